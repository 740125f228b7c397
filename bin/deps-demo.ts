/**
 * `npm run deps:demo -- --count 10000`: Taskcluster's 10,000-dependency limit end to end on this
 * machine. Starts embedded Azurite and the service (reaper on its schedule), creates `count` tasks,
 * a dependent on all of them, resolves them (claimed and completed by a worker, as on a real
 * deployment) and checks that the dependent is then scheduled once and claimable. Prints the
 * create time, the resolution time, the time from the last resolution to the dependent being
 * pending, storage calls per resolution by op, and any 5xx answer. Exit code 1 if anything was off.
 *
 * Azurite scans every message of the account on each queue call, so live messages are kept low:
 * each dependency waits behind a gate task of its batch (unscheduled: one deadline trigger, no
 * hint), and a batch is opened (its gate cancelled), claimed and completed before the next
 * (`--resolve cancel`: no gates; each is created pending in a queue nobody claims, then
 * cancelled, and the dependent requires all-resolved). Azurite keeps its data in a temporary folder (`--memory`: in memory, where its
 * extent sweeps stall it past the storage deadline every minute: see startAzurite).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as slugid from 'slugid';
import { loadConfig } from '../shared/config';
import { startApp } from '../shared/app';
import { startHost } from '../shared/local/host';
import { startAzurite, freePort } from '../shared/local/azurite';
import { generateAccessToken } from '../shared/auth/clients';
import { mapLimit } from '../shared/limit';
import type { Logger } from '../shared/log';

/** Taskcluster's limit (the create-task schema's maxItems). */
const DEFAULT_COUNT = 10_000;
/** Dependencies opened, claimed and completed together: bounds the live hints and claim triggers. */
const DEFAULT_BATCH = 250;
/** Client calls at once: two cores shared with Azurite; more only queues calls inside Azurite. */
const DEFAULT_CONCURRENCY = 8;
/** What claimWork hands out per call here (Taskcluster's clients ask for up to 32). */
const CLAIM_TASKS = 32;
/** A 5xx is retried as taskcluster-client would, this many times, and counted. */
const CLIENT_RETRIES = 5;
/** The dependent must be pending this soon after the last resolution (it is scheduled in that request). */
const SCHEDULED_WITHIN_MS = 60_000;
/** Generous deadline: the whole run must fit in it, or the deadline trigger would resolve the tasks. */
const TASK_DEADLINE_MS = 6 * 3600_000;
const WORKER = { workerGroup: 'deps-demo', workerId: 'w1' };

/** Counts answers by status class, and prints the first few server errors. */
function countingLogger(): Logger & { status5xx: number; requests: number; errors: number } {
  const PRINT_LIMIT = 5;
  const log = {
    status5xx: 0,
    requests: 0,
    errors: 0,
    request: (f: { status: number; fn: string }) => {
      log.requests++;
      if (f.status >= 500 && log.status5xx++ < PRINT_LIMIT) console.error(`5xx: ${f.fn} ${f.status}`);
    },
    info: () => undefined,
    warn: () => undefined,
    error: (event: string, fields?: Record<string, unknown>) => {
      if (log.errors++ < PRINT_LIMIT) console.error(`error ${event}`, JSON.stringify(fields ?? {}));
    },
  };
  return log;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** One client call, retried on a 5xx or a network error (the client's own retries are off, so we can count them). */
async function call<T>(retried: { n: number }, fn: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err: any) {
      const status = err?.statusCode;
      if (attempt >= CLIENT_RETRIES || (status !== undefined && status < 500)) throw err;
      retried.n++;
      await sleep(100 * 2 ** attempt);
    }
  }
}

function taskDef(taskQueueId: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const now = Date.now();
  return {
    taskQueueId,
    created: new Date(now).toJSON(),
    deadline: new Date(now + TASK_DEADLINE_MS).toJSON(),
    payload: {},
    metadata: { name: 'deps demo', description: 'a task of the 10,000-dependency demo', owner: 'demo@example.com', source: 'https://example.com/deps-demo' },
    ...extra,
  };
}

/** Storage calls by op since `before`, per `per` (sorted, largest first). */
function perOp(after: Map<string, number>, before: Map<string, number>, per: number): [string, number][] {
  return [...after]
    .map(([op, n]): [string, number] => [op, (n - (before.get(op) ?? 0)) / per])
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1]);
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      count: { type: 'string' },
      batch: { type: 'string' },
      concurrency: { type: 'string' },
      memory: { type: 'boolean' },
      resolve: { type: 'string' },
      accounts: { type: 'string' },
    },
  });
  const count = Number(values.count ?? DEFAULT_COUNT);
  const batch = Number(values.batch ?? DEFAULT_BATCH);
  const concurrency = Number(values.concurrency ?? DEFAULT_CONCURRENCY);
  const cancel = values.resolve === 'cancel';
  const problems: string[] = [];

  // DEPS_DEMO_STORAGE: an Azurite started elsewhere (e.g. under a profiler) instead of an embedded one.
  const external = process.env.DEPS_DEMO_STORAGE;
  // On disk: in memory, Azurite's extent sweeps stall it past the storage deadline (see startAzurite).
  const dir = values.memory ? undefined : fs.mkdtempSync(path.join(os.tmpdir(), 'deps-demo-'));
  // `--accounts k`: k data accounts, each its own Azurite (tasks are placed by a hash of their id):
  // each Azurite then re-sorts and scans a k-th of the messages and rows per call.
  const accounts = external ? 1 : Number(values.accounts ?? 1);
  const azurites = external
    ? [{ connectionString: external, stop: async () => undefined }]
    : await Promise.all(
        Array.from({ length: accounts }, (_, i) => startAzurite({ location: dir && fs.mkdirSync(path.join(dir, String(i)), { recursive: true }) })),
      );
  const azurite = { connectionString: azurites[0].connectionString, stop: () => Promise.all(azurites.map((a) => a.stop())).then(() => undefined) };
  // Ctrl-C: Azurite is a child process of ours and would outlive us.
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      void azurite.stop().finally(() => {
        if (dir) fs.rmSync(dir, { recursive: true, force: true });
        process.exit(130);
      });
    });
  }
  const port = await freePort();
  const rootUrl = `http://localhost:${port}`;
  const root = { clientId: 'static/root', accessToken: generateAccessToken() };
  const config = loadConfig({
    QUEUE_STORAGE_CONNECTION: azurite.connectionString,
    QUEUE_STORAGE_PREFIX: `depsdemo${crypto.randomBytes(2).toString('hex')}`,
    QUEUE_PUBLIC_URL: rootUrl,
    QUEUE_ROOT_ACCESS_TOKEN: root.accessToken,
    QUEUE_TOKEN_ENCRYPTION_KEY: crypto.randomBytes(32).toString('base64'),
    QUEUE_CLAIM_WORK_POLL_S: '2',
    QUEUE_STORAGE_MORE_CONNECTIONS: azurites
      .slice(1)
      .map((a) => a.connectionString)
      .join(' '),
  });
  const log = countingLogger();
  const app = await startApp(config, { log });
  const host = await startHost({ app, port, host: '127.0.0.1', runTimers: true, quiet: true, settings: { QUEUE_REAPER_SCHEDULE: config.reaperSchedule } });
  const meter = app.svc.storage.meter;
  const tc = (await import('taskcluster-client')).default;
  const queue = new tc.Queue({ rootUrl, credentials: root, retries: 0 });
  const retried = { n: 0 };
  const started = Date.now();
  try {
    const tag = crypto.randomBytes(3).toString('hex');
    const gateQueue = `deps-demo/gate-${tag}`;
    const depQueue = `deps-demo/deps-${tag}`;
    const dependentQueue = `deps-demo/dependent-${tag}`;
    const deps = Array.from({ length: count }, () => slugid.nice());
    const batches: string[][] = [];
    for (let i = 0; i < count; i += batch) batches.push(deps.slice(i, i + batch));
    const gates = batches.map(() => slugid.nice());

    // 1. The dependencies, each behind its batch's gate (the gates go to a queue nobody claims).
    console.log(`creating ${count} dependencies in ${batches.length} batches of ${batch}...`);
    let t0 = Date.now();
    // Cancelled ones need no gate: pending in a queue nobody claims (the gate's edges would make
    // each create scan a TaskDeps table growing with every create, at Azurite).
    if (!cancel) await mapLimit(gates, concurrency, (g) => call(retried, () => queue.createTask(g, taskDef(gateQueue))));
    for (const [i, ids] of batches.entries()) {
      await mapLimit(ids, concurrency, (id) =>
        call(retried, () => queue.createTask(id, taskDef(depQueue, cancel ? {} : { dependencies: [gates[i]], requires: 'all-resolved' }))),
      );
    }
    const createMs = Date.now() - t0;
    console.log(`  created in ${secs(createMs)} (${((count * 1000) / createMs).toFixed(0)} tasks/s)`);

    // 2. The dependent.
    const dependent = slugid.nice();
    t0 = Date.now();
    const requires = cancel ? 'all-resolved' : 'all-completed';
    const created: any = await call(retried, () => queue.createTask(dependent, taskDef(dependentQueue, { dependencies: deps, requires })));
    const answerMs = Date.now() - t0;
    await Promise.allSettled([...(app.svc.background ?? [])]);
    const linkedMs = Date.now() - t0;
    console.log(`  the dependent on ${count}: answered ${created.status.state} in ${secs(answerMs)}, edges linked after ${secs(linkedMs)}`);
    if (created.status.state !== 'unscheduled') problems.push(`dependent created ${created.status.state}`);

    // 3. Resolve: open a batch (cancel its gate), claim and complete its tasks, then the next.
    console.log('resolving...');
    const before = new Map(meter.byOp);
    t0 = Date.now();
    let resolved = 0;
    let lastResolvedAt = 0;
    for (const [i, ids] of batches.entries()) {
      if (cancel) {
        // Cancelled while pending: one resolution each, no claim (claimWork skips the stale hint).
        await mapLimit(ids, concurrency, async (id) => {
          await call(retried, () => queue.cancelTask(id));
          resolved++;
          lastResolvedAt = Date.now();
        });
      } else await call(retried, () => queue.cancelTask(gates[i]));
      const open = new Set(cancel ? [] : ids);
      while (open.size) {
        const claims = await mapLimit(
          Array.from({ length: Math.min(concurrency, Math.ceil(open.size / CLAIM_TASKS)) }, () => 0),
          concurrency,
          () => call(retried, () => queue.claimWork(depQueue, { ...WORKER, tasks: CLAIM_TASKS })),
        );
        const got = claims.flatMap((c: any) => c.tasks);
        await mapLimit(got, concurrency, async (c: any) => {
          const { taskId } = c.status;
          if (!open.delete(taskId)) problems.push(`claimed ${taskId} again, or one outside the batch`);
          const worker = new tc.Queue({ rootUrl, credentials: c.credentials, retries: 0 });
          await call(retried, () => worker.reportCompleted(taskId, c.runId));
          resolved++;
          lastResolvedAt = Date.now();
        });
      }
      // The dependent waits for the very last one.
      if (resolved < count) {
        const s = ((await call(retried, () => queue.status(dependent))) as any).status;
        if (s.state !== 'unscheduled') problems.push(`dependent ${s.state} after ${resolved} of ${count}`);
      }
      if ((i + 1) % Math.max(1, Math.round(batches.length / 10)) === 0) console.log(`  ${resolved}/${count} resolved after ${secs(Date.now() - t0)}`);
    }
    const resolveMs = lastResolvedAt - t0;
    const ops = perOp(meter.byOp, before, count);

    // 4. The dependent: pending (scheduled by the last resolution), claimable once, then nothing.
    let state = '';
    let runs: any[] = [];
    while (Date.now() - lastResolvedAt < SCHEDULED_WITHIN_MS) {
      ({ state, runs } = ((await call(retried, () => queue.status(dependent))) as any).status);
      if (state === 'pending') break;
      await sleep(100);
    }
    const pendingMs = Date.now() - lastResolvedAt;
    if (state !== 'pending' || runs.length !== 1 || runs[0].reasonCreated !== 'scheduled')
      problems.push(`dependent is ${state} with runs ${JSON.stringify(runs)}`);
    const claimed = ((await call(retried, () => queue.claimWork(dependentQueue, { ...WORKER, tasks: 4 }))) as any).tasks.map((c: any) => c.status.taskId);
    const again = ((await call(retried, () => queue.claimWork(dependentQueue, { ...WORKER, tasks: 4 }))) as any).tasks.length;
    if (claimed.length !== 1 || claimed[0] !== dependent || again !== 0) problems.push(`dependent claims: ${JSON.stringify(claimed)}, then ${again}`);
    const claimableMs = Date.now() - lastResolvedAt;

    const total = ops.reduce((s, [, n]) => s + n, 0);
    console.log(`\n${count} dependencies end to end (${secs(Date.now() - started)} wall, ${accounts} data account(s)):`);
    console.log(`  ${`create ${count} tasks:`.padEnd(33)}${secs(createMs)}`);
    console.log(`  create the dependent:            answered in ${secs(answerMs)}, edges linked after ${secs(linkedMs)}`);
    console.log(`  ${`resolve all (${cancel ? 'cancel' : 'claim + complete'}):`.padEnd(33)}${secs(resolveMs)} (${((count * 1000) / resolveMs).toFixed(0)}/s)`);
    console.log(`  last resolution -> pending:      ${secs(pendingMs)}, claimed ${secs(claimableMs)} after it`);
    console.log(`  storage calls per resolution:    ${total.toFixed(1)}${cancel ? '' : ' (gate, claim and report included)'}`);
    for (const [op, n] of ops.slice(0, 20)) console.log(`    ${op.padEnd(28)} ${n.toFixed(2)}`);
    console.log(`  5xx answers: ${log.status5xx} (client retries ${retried.n}); errors logged: ${log.errors}; requests ${log.requests}`);
    if (log.status5xx) problems.push(`${log.status5xx} answers were 5xx`);
  } catch (err) {
    problems.push(`failed: ${(err as Error)?.stack ?? err}`);
  } finally {
    await app.close();
    await host.close();
    await azurite.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  }
  for (const p of problems.slice(0, 20)) console.log(`PROBLEM: ${p}`);
  console.log(problems.length ? `FAILED (${problems.length} problems)` : 'OK');
  return problems.length ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
