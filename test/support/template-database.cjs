'use strict';
// The migrated template database of one jest run. The integration set-up (global-setup.cjs)
// builds it once: a fresh database, the schema migrated into `public` by the production
// migrator, then closed to connections. Each test file's database is a copy of it
// (`CREATE DATABASE … TEMPLATE …` in test-database.ts), so no file replays the DDL.
//
// Several jest runs may share one server (helpers, CI jobs, a developer beside them), so the
// name is unique per run (`gd_tpl_<pid>_<random>`) and only this run drops it.
const { randomBytes } = require('node:crypto');

const { Client } = require('pg');

require('./ts-register.cjs');
const { migrateUp } = require('../../lib/schema/migrator.ts');

function withDatabase(url, database) {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

async function onServer(url, fn) {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Creates and migrates this run's template on the server of `serverUrl`; returns its name. */
async function createTemplateDatabase(serverUrl) {
  const name = `gd_tpl_${process.pid}_${randomBytes(4).toString('hex')}`;
  await onServer(serverUrl, (c) => c.query(`CREATE DATABASE ${name}`));
  try {
    await onServer(withDatabase(serverUrl, name), (c) =>
      migrateUp(
        { query: (text, params) => c.query(text, params), inTransaction: false },
        { schema: 'public' },
      ),
    );
    // A copy needs a source nobody is connected to; closing it to connections also keeps
    // autovacuum and stray clients out.
    await onServer(serverUrl, (c) =>
      c.query(`ALTER DATABASE ${name} WITH ALLOW_CONNECTIONS false`),
    );
  } catch (err) {
    await dropTemplateDatabase(serverUrl, name).catch(() => undefined);
    throw err;
  }
  return name;
}

async function dropTemplateDatabase(serverUrl, name) {
  await onServer(serverUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
}

module.exports = { createTemplateDatabase, dropTemplateDatabase };
