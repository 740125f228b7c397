/** Jest runs the TypeScript tests through ts-jest; one Azurite for the run is started by globalSetup. */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { diagnostics: { warnOnly: false } }] },
  globalSetup: '<rootDir>/test/helpers/global-setup.ts',
  globalTeardown: '<rootDir>/test/helpers/global-teardown.ts',
  testTimeout: 60000,
  maxWorkers: 2,
  // taskcluster-client and the Azure SDKs keep HTTP agents alive; they hold no state worth waiting for.
  forceExit: true,
};
