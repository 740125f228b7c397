/**
 * Dependency rules (dependency-cruiser), checked by `npm run deps` and so by `npm test`. Layers, top down:
 *   functions/, bench/, bin/, shared/local/   entry points and the local host
 *   shared/api/ (and shared/app/)            HTTP: routing, parsing, the route table
 *   domain: shared/{tasks,work,artifacts,auth,ops,reaper}/ and any other folder of shared/
 *   shared/storage/                           the only code that talks to Azure Storage
 * A layer imports only layers below it; the kernel files (shared/{errors,limit,log,config,bounded-cache}.ts) are
 * below everything. worker/ is a separate program that talks to the queue over HTTP only.
 */

/** Every other folder of shared/ (tasks, work, artifacts, auth, ops, reaper and any new one) is domain. */
const DOMAIN = '^shared/(?!(api|app|local|storage)/)[^/]+/';
const AZURE_STORAGE_SDKS = '^node_modules/@azure/(data-tables|storage-queue|storage-blob)/';

const folderCycleRules = [
  {
    name: 'no-folder-cycles',
    comment: 'Folders form a hierarchy; a cycle between two folders means neither can be understood or changed alone.',
    severity: 'error',
    scope: 'folder',
    from: {},
    to: { circular: true },
  },
];

module.exports = {
  forbidden: [
    {
      name: 'domain-not-to-api-or-entry-points',
      comment: 'The domain knows nothing of HTTP, the local host or the Functions registrations; they call it, never the reverse.',
      severity: 'error',
      from: { path: DOMAIN },
      to: { path: '^(functions|bench|bin|worker)/|^shared/(api|app|local)/' },
    },
    {
      name: 'api-not-to-entry-points',
      comment: 'The HTTP layer serves both the Azure registrations and the local host, so it depends on neither.',
      severity: 'error',
      from: { path: '^shared/(api|app)/' },
      to: { path: '^(functions|bench|bin|worker)/|^shared/local/' },
    },
    {
      name: 'storage-not-to-domain',
      comment: 'Storage is the bottom layer: it stores records and knows no domain rules, HTTP or hosts.',
      severity: 'error',
      from: { path: '^shared/storage/' },
      to: { path: '^(functions|bench|bin|worker)/|^shared/', pathNot: '^shared/(storage/|(errors|limit|log|config|bounded-cache)\\.ts$)' },
    },
    {
      name: 'kernel-imports-no-layer',
      comment: 'Errors, limits, logging and config are used by every layer, so they import none.',
      severity: 'error',
      from: { path: '^shared/(errors|limit|log|config|bounded-cache)\\.ts$' },
      to: { path: '^(functions|bench|bin|worker)/|^shared/[^/]+/' },
    },
    {
      name: 'azure-sdks-only-in-storage',
      comment:
        "One storage port counts every storage call and is the one place to change how storage is used. The bench's raw ceiling measures the SDKs' default clients beside it.",
      severity: 'error',
      from: { pathNot: '^shared/storage/|^shared/local/azurite\\.ts$|^bench/raw-sdk\\.ts$' },
      to: { path: AZURE_STORAGE_SDKS },
    },
    {
      name: 'worker-stands-alone',
      comment: 'The reference worker is a separate program that speaks the public protocol only; the service is not its library.',
      severity: 'error',
      from: { path: '^worker/' },
      to: { path: '^(functions|shared|bench|bin)/' },
    },
    {
      name: 'nothing-imports-entry-points',
      comment: 'Entry points are leaves: code they share belongs in shared/.',
      severity: 'error',
      from: { pathNot: '^(functions|bench|bin|worker)/' },
      to: { path: '^(functions|bench|bin|worker)/' },
    },
    ...folderCycleRules,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Type-only imports couple layers just as much as value imports.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
