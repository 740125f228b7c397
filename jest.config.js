/**
 * Jest runs the TypeScript tests through ts-jest, in four projects:
 *   unit         pure code (test/unit/**, the reference worker's test/worker/**): no storage, no child
 *                process, port or compiler (test/helpers/pure.ts refuses the first two); seconds
 *   local        this machine, no storage: sandbox and task child processes, loopback servers, the
 *                local host, the TypeScript compiler (test/local/**)
 *   build        the deployment artifacts: the Bicep templates compiled, the package zip built
 *   integration  everything else, against one Azurite for the run started by globalSetup
 * `npm run test:unit` selects the first; `npm test` runs them all.
 */
const base = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  transform: { '^.+\\.ts$': ['ts-jest', { diagnostics: { warnOnly: false } }] },
};

const UNIT = ['<rootDir>/test/unit/', '<rootDir>/test/worker/'];
const LOCAL = ['<rootDir>/test/local/'];
const BUILD = ['<rootDir>/test/infra.test.ts', '<rootDir>/test/package.test.ts'];
/** A folder or file as a testMatch glob. */
const glob = (p) => (p.endsWith('/') ? `${p}**/*.test.ts` : p);
/** A folder or file as a testPathIgnorePatterns regex. */
const ignore = (p) => (p.endsWith('/') ? p : `${p.replace(/\./g, '\\.')}$`);

module.exports = {
  projects: [
    { ...base, displayName: 'unit', testMatch: UNIT.map(glob), setupFilesAfterEnv: ['<rootDir>/test/helpers/pure.ts'] },
    { ...base, displayName: 'local', testMatch: LOCAL.map(glob) },
    { ...base, displayName: 'build', testMatch: BUILD },
    {
      ...base,
      displayName: 'integration',
      testMatch: ['<rootDir>/test/**/*.test.ts'],
      testPathIgnorePatterns: ['/node_modules/', ...[...UNIT, ...LOCAL, ...BUILD].map(ignore)],
      globalSetup: '<rootDir>/test/helpers/global-setup.ts',
      globalTeardown: '<rootDir>/test/helpers/global-teardown.ts',
    },
  ],
  testTimeout: 60000,
  maxWorkers: 2,
  // taskcluster-client and the Azure SDKs keep HTTP agents alive; they hold no state worth waiting for.
  forceExit: true,
};
