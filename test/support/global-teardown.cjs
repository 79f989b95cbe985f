'use strict';
// Jest global teardown of the integration tier: drops this run's template database, then stops
// the embedded PostgreSQL if the set-up started one.
const { dropTemplateDatabase } = require('./template-database.cjs');

module.exports = async function globalTeardown() {
  const template = globalThis.__GEN_DURABLE_TEMPLATE__;
  const pg = globalThis.__GEN_DURABLE_EMBEDDED_PG__;
  try {
    if (template) {
      globalThis.__GEN_DURABLE_TEMPLATE__ = undefined;
      await dropTemplateDatabase(process.env.GEN_DURABLE_TEST_DATABASE_URL, template);
    }
  } finally {
    if (pg) {
      globalThis.__GEN_DURABLE_EMBEDDED_PG__ = undefined;
      await pg.stop();
    }
  }
};
