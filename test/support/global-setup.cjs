'use strict';
// Jest global set-up of the integration tier: one PostgreSQL for the whole run (DATABASE_URL,
// or an embedded server this run starts and stops), this run's migrated template database on
// it, and the Redis URL. Each test file then creates its own databases on that server, copies
// of the template (test/support/test-database.ts), so files run in parallel without sharing
// state and without replaying the DDL.
const path = require('node:path');
const net = require('node:net');
const { startEmbeddedPostgres } = require('../../scripts/embedded-postgres.cjs');
const { createTemplateDatabase } = require('./template-database.cjs');

function reachable(url) {
  return new Promise((resolve) => {
    let u;
    try {
      u = new URL(url);
    } catch {
      resolve(false);
      return;
    }
    const socket = net.connect({ host: u.hostname, port: Number(u.port || 6379) });
    socket.setTimeout(1000);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

module.exports = async function globalSetup() {
  if (process.env.DATABASE_URL) {
    process.env.GEN_DURABLE_TEST_DATABASE_URL = process.env.DATABASE_URL;
  } else {
    const pg = await startEmbeddedPostgres();
    globalThis.__GEN_DURABLE_EMBEDDED_PG__ = pg;
    process.env.GEN_DURABLE_TEST_DATABASE_URL = pg.url;
    process.stdout.write(
      `\n[gen-durable tests] embedded PostgreSQL on ${pg.url} (no DATABASE_URL)\n`,
    );
  }
  const template = await createTemplateDatabase(process.env.GEN_DURABLE_TEST_DATABASE_URL);
  globalThis.__GEN_DURABLE_TEMPLATE__ = template;
  process.env.GEN_DURABLE_TEST_TEMPLATE = template;
  const redisUrl = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
  if (await reachable(redisUrl)) {
    process.env.GEN_DURABLE_TEST_REDIS_URL = redisUrl;
  } else if (process.env.CI) {
    throw new Error(
      `Redis is not reachable at ${redisUrl}; CI runs the Redis-backed tests (start it or set REDIS_URL)`,
    );
  } else {
    process.stdout.write(
      `[gen-durable tests] Redis not reachable at ${redisUrl}: Redis-backed tests are skipped\n`,
    );
  }
  process.env.GEN_DURABLE_ROOT = path.resolve(__dirname, '../..');
};
