/**
 * Runs the service in-process on a free port, on the faithful in-memory store with the file's
 * controllable clock or on the test Azurite, with storage names unique to the caller, and hands
 * out taskcluster-client instances pointed at it.
 */
import crypto from 'node:crypto';
import { join, relative } from 'node:path';
import { FaultSettings, loadConfig } from '../../shared/config';
import { ServiceOptions, Services, Tuning } from '../../shared/services';
import { startApp } from '../../shared/app';
import { startHost, LocalHost } from '../../shared/local/host';
import { freePort } from '../../shared/local/ports';
import { memoryLogger } from '../../shared/log';
import { generateAccessToken } from '../../shared/auth/clients';
import { outputErrors } from '../../shared/api/output-schemas';
import type { RouteDef } from '../../shared/api/types';
import { TestClock } from './clock';
import { FaultPlan, FaultyStorage } from '../../shared/storage/faults';
import { AccountsStorage } from '../../shared/storage/accounts';
import type { Storage } from '../../shared/storage/port';
import type { Sandbox } from '../../shared/sandbox/sandbox';

/**
 * This test file's clock (jest loads the module once per file): every service the file starts on
 * the in-memory store, and that store, read it; the test moves it (`clock.advance`) instead of
 * sleeping. Hawk signatures are still checked against real time (taskcluster-client signs with
 * it), so authentication is untouched by however far the clock has moved.
 */
export const clock = new TestClock();

export interface TestService {
  rootUrl: string;
  services: Services;
  host: LocalHost;
  root: { clientId: string; accessToken: string };
  tc: any;
  log: ReturnType<typeof memoryLogger>;
  /** The file's clock (see `clock`); advancing it throws on Azurite. */
  clock: TestClock;
  /** A v87 client class instance with the given credentials (root by default). */
  queue(credentials?: { clientId: string; accessToken: string; certificate?: string } | null, opts?: Record<string, unknown>): any;
  auth(credentials?: { clientId: string; accessToken: string } | null, opts?: Record<string, unknown>): any;
  runReaper(): Promise<void>;
  /** Waits for this instance's background work (event delivery, dependency tracking) and queued index writes. */
  settled(): Promise<void>;
  close(): Promise<void>;
}

/** The services this file has running. */
const running = new Set<TestService>();

/**
 * Waits until no service of this file has background work left, so that a sweep armed next
 * counts the calls of its operation only (on the in-memory store the instances share one meter).
 */
export async function settleServices(): Promise<void> {
  await Promise.all([...running].map((s) => s.settled()));
}

/**
 * Starts the faithful mode's draws over on every service of this file (FaultPlan.reseed), so that
 * a crash sweep's attempts meet the same faults at the same calls.
 */
export function reseedFaults(): void {
  const plans = (st: Storage): FaultPlan[] => (st instanceof FaultyStorage ? [st.plan] : st instanceof AccountsStorage ? st.accounts.flatMap(plans) : []);
  for (const s of running) for (const plan of plans(s.services.storage)) plan.reseed();
}

/**
 * Settings that several test services pass to serve one deployment (same storage names, root
 * credentials and token key), as instances of one Functions app do.
 */
export function sharedDeployment(): Record<string, string> {
  return {
    QUEUE_STORAGE_PREFIX: 't' + crypto.randomBytes(5).toString('hex'),
    QUEUE_ROOT_ACCESS_TOKEN: generateAccessToken(),
    QUEUE_TOKEN_ENCRYPTION_KEY: crypto.randomBytes(32).toString('base64'),
  };
}

/**
 * The seeds of the faithful storage mode the suites run on: each test file draws one of them from
 * its path, so a failure repeats with the same faults.
 */
export const FAULT_SEEDS = [1, 2, 3];
/** Faults of the suites: what Azure does at a rate that a test file meets many times. */
export const TEST_FAULTS = 'pages=0.3 ambiguous=0.05 throttle=0.02 backoff-ms=0';

/** The QUEUE_STORAGE_FAULTS value of parsed settings. */
export function faultsOf(f: FaultSettings): string {
  return `seed=${f.seed} pages=${f.pages} ambiguous=${f.ambiguous} throttle=${f.throttle} lost-receive=${f.lostReceive} skew-ms=${f.skewMs} instance=${f.instance} retries=${f.retries} backoff-ms=${f.backoffMs}`;
}

function seedOf(path: string): number {
  // From the path inside the repository: a clone elsewhere (CI) gives each file the same seed.
  const inRepo = relative(join(__dirname, '..', '..'), path);
  let h = 0;
  for (const c of inRepo) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return FAULT_SEEDS[h % FAULT_SEEDS.length];
}

/**
 * Test files that run on the faithful mode: the conformance suite, the crash and ambiguity sweeps
 * and the other integration tests of the service, except ON_AZURITE. The rest (e2e, the
 * dashboard, the storage-port contract suite) keep Azurite, which also serves as the smoke test of
 * the Azure adapter.
 */
const FAITHFUL = [/\/test\/conformance\//, /\/test\/integration\//];

/**
 * Files that stay on Azurite: the smoke subset of the conformance suite that drives the Azure
 * adapter end to end, and integration tests of that adapter or of Azurite itself.
 */
const ON_AZURITE: Record<string, string> = {
  'lifecycle.test.ts': 'smoke test of the Azure adapter: a whole task lifecycle',
  'storage-port.test.ts': 'the storage-port contract suite: runs each adapter, the Azure one on Azurite',
  'storage-deadline.test.ts': 'a hanging proxy in front of Azurite: the Azure SDK call deadline',
  'local-persist.test.ts': "Azurite's own persistence across restarts",
  'indexes.test.ts': 'the index store on the Azure adapter',
  'storage-count.test.ts': "pins each operation's storage calls exactly, on the Azure adapter",
};

/**
 * Files of the faithful suites that stay on Azurite, each with its reason (docs/storage-faults.md
 * lists them).
 */
const NOT_YET_FAITHFUL: Record<string, string> = {
  'accounts.test.ts': 'two Azurite accounts by design',
};

/**
 * Crash sweeps that still run on the in-memory store and its clock without the faithful mode's own
 * faults, each with its reason. The others run on the faithful mode: the sweep re-seeds the faults
 * before each attempt (test/helpers/crash.ts), so every attempt meets the same faults at the same calls.
 */
const SWEEPS: Record<string, string> = {};

/** Other files on the in-memory store and its clock without the faithful mode's faults: they count calls or messages exactly. */
const WITHOUT_FAULTS: Record<string, string> = {
  'expiration.test.ts': "counts each expiry pass's storage calls exactly; a short page is a call of its own",
  'reaper-overlap.test.ts': 'counts the triggers handled exactly; an ambiguous queue put duplicates one',
  'hook-lease.test.ts': "fails a fire after its second storage call, which a short page's extra call moves",
};

/**
 * Where test services store. The faithful in-memory mode (shared/storage/faults.ts) for the files
 * above, one store per process shared by the instances of one deployment, on one of FAULT_SEEDS
 * per file; the in-memory store without its faults for SWEEPS and WITHOUT_FAULTS; the test Azurite
 * otherwise, and for every file with `TEST_ON_AZURITE=1`. A test that names
 * QUEUE_STORAGE_CONNECTION keeps it.
 */
function testStorage(env: Record<string, string>): Record<string, string> {
  if (env.QUEUE_STORAGE_CONNECTION) return {};
  const path = expect.getState().testPath ?? '';
  const named = (list: Record<string, string>) => Object.keys(list).some((f) => path.endsWith(`/${f}`));
  const unfaulted = named(WITHOUT_FAULTS) || named(SWEEPS);
  // TEST_FAITHFUL_ALL=1 runs the listed files on the faithful mode too (to work on them).
  const all = process.env.TEST_FAITHFUL_ALL === '1';
  const onStore = FAITHFUL.some((re) => re.test(path)) && !named(ON_AZURITE);
  const faithful = onStore && (all || !(named(NOT_YET_FAITHFUL) || unfaulted));
  if (process.env.TEST_ON_AZURITE === '1' || !(faithful || (onStore && unfaulted))) {
    const conn = process.env.TEST_STORAGE_CONNECTION;
    if (!conn) throw new Error('TEST_STORAGE_CONNECTION is not set: run tests through jest (globalSetup starts Azurite)');
    return { QUEUE_STORAGE_CONNECTION: conn };
  }
  if (!faithful) return { QUEUE_STORAGE_CONNECTION: 'memory:tests' };
  const seed = process.env.TEST_FAULT_SEED ?? String(seedOf(path));
  return { QUEUE_STORAGE_CONNECTION: 'memory:tests', QUEUE_STORAGE_FAULTS: `seed=${seed} ${TEST_FAULTS}` };
}

/** A test service's own parts: tuning, and a sandbox pool of its own (the process's by default). */
export interface TestServiceOptions {
  tuning?: Partial<Tuning>;
  sandbox?: Sandbox;
  delegation?: ServiceOptions['delegation'];
}

export async function startTestService(env: Record<string, string> = {}, opts: TestServiceOptions = {}): Promise<TestService> {
  const port = await freePort();
  const rootUrl = `http://localhost:${port}`;
  const root = { clientId: 'static/root', accessToken: env.QUEUE_ROOT_ACCESS_TOKEN ?? generateAccessToken() };
  const config = loadConfig({
    ...testStorage(env),
    QUEUE_STORAGE_PREFIX: 't' + crypto.randomBytes(5).toString('hex'),
    QUEUE_PUBLIC_URL: rootUrl,
    QUEUE_ROOT_ACCESS_TOKEN: root.accessToken,
    QUEUE_TOKEN_ENCRYPTION_KEY: crypto.randomBytes(32).toString('base64'),
    QUEUE_CLAIM_WORK_POLL_S: '2',
    QUEUE_DEADLINE_DELAY_S: '0',
    QUEUE_REAPER_SCHEDULE: '*/1 * * * * *',
    ...env,
  });
  const onMemory = config.storageConnection.trim().startsWith('memory:');
  // Services on Azurite run on real time: one may join a file whose clock never moved, and the
  // clock may not move while it runs (the file's services would disagree on the time).
  if (onMemory) clock.controlled = true;
  else if (clock.moved) throw new Error("this file's clock moved: a service on Azurite, on real time, would disagree with the others");
  else clock.realTimeServices++;
  const log = memoryLogger();
  // Queued index writes and expiry-index deletes go out at once unless a test asks for the
  // production linger, and chart rollups are written only when read or at close: crash sweeps
  // rely on a fixed order of calls, which a timer would shuffle (see Tuning.indexLingerMs,
  // Tuning.forgetLingerMs, Tuning.rollupFlushMs).
  const app = await startApp(config, {
    log,
    tuning: { indexLingerMs: 0, forgetLingerMs: 0, rollupFlushMs: 0, ...opts.tuning },
    ...(onMemory ? { now: clock.now } : {}),
    ...(opts.sandbox ? { sandbox: opts.sandbox } : {}),
    ...(opts.delegation ? { delegation: opts.delegation } : {}),
  });
  const services = app.svc;
  const host = await startHost({ app: { ...app, routes: app.routes.map(checkedOutput) }, port, quiet: true });
  const tc = (await import('taskcluster-client')).default;
  const client = (Cls: any, credentials: any, opts: Record<string, unknown> = {}) =>
    new Cls({ rootUrl, credentials: credentials === null ? undefined : (credentials ?? root), retries: 0, ...opts });
  const svc: TestService = {
    rootUrl,
    services,
    host,
    root,
    tc,
    log,
    clock,
    queue: (c, o) => client(tc.Queue, c, o),
    auth: (c, o) => client(tc.Auth, c, o),
    runReaper: () => host.runTimer('reaper'),
    settled: async () => {
      const background = services.background ?? new Set();
      while (background.size) await Promise.allSettled([...background]);
      await Promise.all([services.indexes.settled(), services.expiry.settled()]);
    },
    close: async () => {
      running.delete(svc);
      if (!onMemory) clock.realTimeServices--;
      await app.close();
      await host.close();
    },
  };
  running.add(svc);
  return svc;
}

/** Responses that broke their route's output schema since the last test ended. */
const violations: string[] = [];

/** Every successful JSON response is checked against the route's output schema; a violation fails the test that caused it. */
function assertNoViolations(): void {
  const found = violations.splice(0);
  if (found.length) throw new Error(`responses that break their output schema:\n${found.join('\n')}`);
}
afterEach(assertNoViolations);
// Responses of beforeAll hooks, or of calls still running when the last test ended.
afterAll(assertNoViolations);

function checkedOutput(r: RouteDef): RouteDef {
  return {
    ...r,
    handler: async (req) => {
      const res = await r.handler(req);
      if (res.body !== undefined && res.raw === undefined && (res.status ?? 200) < 400) {
        const body = JSON.parse(JSON.stringify(res.body)); // as the client receives it
        const errors = r.output ? outputErrors(r.output, body) : ['a JSON response, but the route declares no output schema'];
        if (errors.length) violations.push(`${r.service}_${r.name} ${r.output ?? ''}: ${errors.join('; ')}\n  body: ${JSON.stringify(body).slice(0, 500)}`);
      }
      return res;
    },
  };
}

/** Another instance of the same deployment (same storage names and secrets), as a scaled-out Functions app has. */
export function startSecondInstance(svc: TestService, env: Record<string, string> = {}, opts: { tuning?: Partial<Tuning> } = {}): Promise<TestService> {
  const c = svc.services.config;
  return startTestService(
    {
      QUEUE_STORAGE_PREFIX: c.storagePrefix,
      QUEUE_ROOT_ACCESS_TOKEN: c.rootAccessToken,
      QUEUE_TOKEN_ENCRYPTION_KEY: c.tokenEncryptionKey.toString('base64'),
      QUEUE_CLAIM_TIMEOUT_S: String(c.claimTimeoutS),
      QUEUE_CLAIM_WORK_POLL_S: String(c.claimWorkPollS),
      // The same store, with this instance's own faults.
      QUEUE_STORAGE_CONNECTION: c.storageConnection,
      ...(c.storageFaults ? { QUEUE_STORAGE_FAULTS: faultsOf({ ...c.storageFaults, instance: c.storageFaults.instance + 1 }) } : {}),
      ...env,
    },
    { tuning: svc.services.tuning, ...opts },
  );
}

/** A minimal valid task definition for `taskQueueId`. */
export function taskDef(taskQueueId = 'prov/wt', overrides: Record<string, unknown> = {}): Record<string, any> {
  const now = clock.ms();
  return {
    taskQueueId,
    created: new Date(now).toJSON(),
    deadline: new Date(now + 3600_000).toJSON(),
    payload: {},
    metadata: { name: 'test task', description: 'a test', owner: 'tester@example.com', source: 'https://example.com/test' },
    ...overrides,
  };
}

export function slugid(): string {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require('slugid').nice();
}

/** Expects a taskcluster-client call to fail with this HTTP status (and code, if given). */
export async function expectError(p: Promise<unknown>, statusCode: number, code?: string): Promise<any> {
  try {
    await p;
  } catch (err: any) {
    if (err.statusCode !== statusCode || (code && err.code !== code)) {
      throw new Error(`expected ${statusCode}${code ? ' ' + code : ''}, got ${err.statusCode} ${err.code}: ${err.message}`, { cause: err });
    }
    return err;
  }
  throw new Error(`expected ${statusCode}${code ? ' ' + code : ''}, but the call succeeded`);
}

/** Settings that keep a test service on the test Azurite (a test of what Azurite or the Azure SDKs do). */
export function onAzurite(): Record<string, string> {
  const conn = process.env.TEST_STORAGE_CONNECTION;
  if (!conn) throw new Error('TEST_STORAGE_CONNECTION is not set: run tests through jest (globalSetup starts Azurite)');
  return { QUEUE_STORAGE_CONNECTION: conn };
}
