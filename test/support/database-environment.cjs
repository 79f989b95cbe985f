'use strict';
// The jest environment of the integration tier: Node's, plus the fate of the file's databases.
// test-database.ts registers every database a file creates here; when the file ends, they are
// dropped if every test and hook passed, and kept, with their names printed, if anything
// failed, so the rows a failing test left can be read with psql.
const path = require('node:path');

const { Client } = require('pg');
const { TestEnvironment } = require('jest-environment-node');

const REGISTRY = '__GEN_DURABLE_TEST_DATABASES__';

class DatabaseEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    this.testPath = path.relative(config.projectConfig.rootDir, context.testPath);
    this.failed = false;
    this.databases = [];
    this.global[REGISTRY] = this.databases;
  }

  handleTestEvent(event) {
    if (event.name === 'test_fn_failure' || event.name === 'hook_failure') this.failed = true;
    if (event.name === 'test_done' && event.test.errors.length > 0) this.failed = true;
  }

  async teardown() {
    try {
      const names = [...new Set(this.databases)];
      if (names.length > 0 && this.failed) {
        const server = process.env.GEN_DURABLE_TEST_DATABASE_URL ?? '';
        process.stderr.write(
          `\n[gen-durable tests] ${this.testPath} failed: kept its database${names.length > 1 ? 's' : ''} ` +
            `${names.join(', ')} on ${redact(server)} (drop with DROP DATABASE … WITH (FORCE))\n`,
        );
      } else if (names.length > 0) {
        await dropAll(names);
      }
    } finally {
      await super.teardown();
    }
  }
}

/** `url` without its password. */
function redact(url) {
  try {
    const u = new URL(url);
    u.password = '';
    return u.toString();
  } catch {
    return url;
  }
}

async function dropAll(names) {
  const client = new Client({ connectionString: process.env.GEN_DURABLE_TEST_DATABASE_URL });
  try {
    await client.connect();
    for (const name of names) {
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    }
  } catch (err) {
    process.stderr.write(
      `[gen-durable tests] could not drop ${names.join(', ')}: ${err instanceof Error ? err.message : String(err)}\n`,
    );
  } finally {
    await client.end().catch(() => undefined);
  }
}

module.exports = DatabaseEnvironment;
