// Two tiers (docs/development.md):
// - unit: test/unit/**, specs that need no database, no Redis and no network. No global set-up
//   runs for them, and DATABASE_URL is removed from their environment, so `npm run test:unit`
//   (jest --selectProjects unit) takes seconds and starts nothing.
// - integration: every other spec. Its global set-up provides one PostgreSQL for the run
//   (DATABASE_URL, or an embedded server) with a migrated template database, and Redis. Its
//   environment keeps a failing file's databases and drops the others.
// `npm test` runs both. A spec file path on the command line runs that file in its own tier,
// and a run that selects only unit specs skips the integration set-up.
const common = {
  testMatch: ['**/*.spec.ts'],
  moduleFileExtensions: ['ts', 'js', 'json'],
  setupFilesAfterEnv: ['<rootDir>/test/support/leak-check.ts'],
};

/** @type {import('jest').Config} */
module.exports = {
  testTimeout: 30000,
  maxWorkers: 2,
  projects: [
    {
      ...common,
      displayName: 'unit',
      roots: ['<rootDir>/test/unit'],
      testEnvironment: 'node',
      // Transpiled only (tsconfig.json plus isolatedModules): `tsc --noEmit` in `npm run lint`
      // type-checks these files, and type-checking each spec's import graph again here is
      // what would make this tier slow.
      transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: { isolatedModules: true } }] },
      setupFiles: ['<rootDir>/test/support/unit-environment.cjs'],
    },
    {
      ...common,
      displayName: 'integration',
      roots: ['<rootDir>/test', '<rootDir>/sample'],
      transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.json' }] },
      testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/unit/'],
      globalSetup: '<rootDir>/test/support/global-setup.cjs',
      globalTeardown: '<rootDir>/test/support/global-teardown.cjs',
      testEnvironment: '<rootDir>/test/support/database-environment.cjs',
    },
  ],
};
