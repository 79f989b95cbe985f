'use strict';
module.exports = async function globalTeardown() {
  const pg = globalThis.__GEN_DURABLE_EMBEDDED_PG__;
  if (pg) await pg.stop();
};
