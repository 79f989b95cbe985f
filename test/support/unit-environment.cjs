'use strict';
// Runs before each unit spec (test/unit/**): a unit spec needs no database and no Redis, so
// their addresses are taken out of its environment. A unit spec that reaches for a server fails
// in `npm test` exactly as it does in `npm run test:unit` (where no global set-up runs at all)
// and belongs in the integration tier instead.
for (const name of [
  'DATABASE_URL',
  'REDIS_URL',
  'GEN_DURABLE_TEST_DATABASE_URL',
  'GEN_DURABLE_TEST_REDIS_URL',
  'GEN_DURABLE_TEST_TEMPLATE',
]) {
  delete process.env[name];
}
process.env.GEN_DURABLE_TEST_TIER = 'unit';
