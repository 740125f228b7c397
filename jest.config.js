/**
 * Jest runs the TypeScript tests through ts-jest, in two projects:
 *   unit         pure tests (test/unit/**, the reference worker, infra files); no storage, seconds
 *   integration  everything else, against one Azurite for the run started by globalSetup
 * `npm run test:unit` selects the first; `npm test` runs both.
 */
const base = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  transform: { '^.+\\.ts$': ['ts-jest', { diagnostics: { warnOnly: false } }] },
};

/** Tests that need no Azurite (and no built service): they run in the unit tier. */
const UNIT = ['<rootDir>/test/unit/**/*.test.ts', '<rootDir>/test/worker/**/*.test.ts', '<rootDir>/test/infra.test.ts'];

module.exports = {
  projects: [
    { ...base, displayName: 'unit', testMatch: UNIT },
    {
      ...base,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/**/*.test.ts'],
      testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/unit/', '<rootDir>/test/worker/', '<rootDir>/test/infra\\.test\\.ts$'],
      globalSetup: '<rootDir>/test/helpers/global-setup.ts',
      globalTeardown: '<rootDir>/test/helpers/global-teardown.ts',
    },
  ],
  testTimeout: 60000,
  maxWorkers: 2,
  // taskcluster-client and the Azure SDKs keep HTTP agents alive; they hold no state worth waiting for.
  forceExit: true,
};
