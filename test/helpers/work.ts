/**
 * Small helpers for tests of the worker path: unique task queues, claiming one task, waiting for a
 * moment to pass.
 */
import { TestService, taskDef, slugid, clock, settleServices } from './service';

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Lets `ms` pass: moves the file's clock on the in-memory store, sleeps on Azurite. */
export async function passTime(ms: number): Promise<void> {
  if (!clock.controlled) return sleep(ms);
  clock.advance(ms);
  // Background work (event delivery, index writes) runs on real promises: let it take a turn.
  await new Promise((r) => setImmediate(r));
}

/** A task queue id nobody else uses (each test gets empty pending queues). */
export function uniqueQueue(prefix = 'prov'): string {
  return `${prefix}/q${Math.random().toString(36).slice(2, 10)}`;
}

/** Lets the time pass until `iso` (plus `slackMs`): see passTime. */
export async function waitUntil(iso: string | number | Date, slackMs = 150): Promise<void> {
  await passTime(new Date(iso).getTime() + slackMs - clock.ms());
}

export interface WorkerId {
  workerGroup: string;
  workerId: string;
}

export const W1: WorkerId = { workerGroup: 'wg', workerId: 'w1' };
export const W2: WorkerId = { workerGroup: 'wg', workerId: 'w2' };

/** claimWork for up to `tasks` runs; returns the claims. */
export async function claim(svc: TestService, taskQueueId: string, worker: WorkerId = W1, tasks = 1, opts: Record<string, unknown> = {}): Promise<any[]> {
  const r = await svc.queue(undefined, opts).claimWork(taskQueueId, { ...worker, tasks });
  return r.tasks;
}

/**
 * claimWork's poll window for instances that check "nothing left to claim" many times (a crash
 * sweep's every step): none. claimWork still looks once (HintPoller.request), so an empty answer
 * means no visible hint was claimable, and costs no waiting. A claim that must succeed goes through
 * claimAny.
 */
export const CHECK_POLL_S = '0';
/** Looks a claim that must succeed makes before it gives up; background work settles between them. */
const CLAIM_ATTEMPTS = 10;

/** claimWork until something is claimed (see CHECK_POLL_S); [] only if every attempt came back empty. */
export async function claimAny(svc: TestService, taskQueueId: string, worker: WorkerId = W1, tasks = 32): Promise<any[]> {
  for (let i = 0; i < CLAIM_ATTEMPTS; i++) {
    const got = await claim(svc, taskQueueId, worker, tasks);
    if (got.length) return got;
    // A hint another instance puts in the background (dependency resolution, event delivery) may still be on its way.
    await settleServices();
  }
  return [];
}

/** claimWork that must return exactly one claim, for `taskId` if given. */
export async function claimOne(svc: TestService, taskQueueId: string, taskId?: string, worker: WorkerId = W1): Promise<any> {
  const claims = await claimAny(svc, taskQueueId, worker, 1);
  if (claims.length !== 1) throw new Error(`expected one claim from ${taskQueueId}, got ${claims.length}`);
  if (taskId && claims[0].status.taskId !== taskId) throw new Error(`expected a claim for ${taskId}, got ${claims[0].status.taskId}`);
  return claims[0];
}

export async function status(svc: TestService, taskId: string): Promise<any> {
  return (await svc.queue().status(taskId)).status;
}

/** A short summary of a task's runs, e.g. ['exception/worker-shutdown', 'pending'] */
export async function runSummary(svc: TestService, taskId: string): Promise<string[]> {
  const s = await status(svc, taskId);
  return s.runs.map((r: any) => (r.reasonResolved ? `${r.state}/${r.reasonResolved}` : r.state));
}

/** How far the clock moves between reaper passes: trigger visibility is rounded up to whole seconds. */
const REAP_STEP_MS = 1000;
/** Passes of reapUntil on the file's clock before it gives up (each one a second of that clock). */
const REAP_PASSES = 60;

/**
 * Runs reaper passes until `done()` holds, letting a second pass between passes (trigger visibility
 * is rounded up to whole seconds, so a trigger may show up to a second after the moment it was
 * made for). On Azurite it waits up to `timeoutMs` of real time.
 */
export async function reapUntil(svc: TestService, done: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (let pass = 1; ; pass++) {
    await svc.runReaper();
    if (await done()) return;
    if (clock.controlled ? pass >= REAP_PASSES : Date.now() > end) throw new Error('reapUntil: condition not reached');
    if (clock.controlled) {
      clock.advance(REAP_STEP_MS);
      // Background work of the last pass (event delivery) runs on real promises.
      await new Promise((r) => setImmediate(r));
    } else await sleep(100);
  }
}

/** Creates a task in its own queue and claims run 0; returns the worker's queue client too. */
export async function runningTask(svc: TestService, overrides: Record<string, unknown> = {}) {
  const tq = uniqueQueue();
  const taskId = slugid();
  await svc.queue().createTask(taskId, taskDef(tq, overrides));
  const c = await claimOne(svc, tq, taskId);
  return { tq, taskId, c, wq: svc.queue(c.credentials) };
}

/**
 * Uploads `data` for an object artifact the way a worker does: taskcluster-client's upload helper,
 * with the credentials and uploadId createArtifact answered (`res`).
 */
export async function uploadObject(svc: TestService, res: any, data: Buffer, contentType = 'text/plain'): Promise<void> {
  await svc.tc.upload({
    projectId: res.projectId,
    name: res.name,
    contentType,
    contentLength: data.length,
    expires: res.expires,
    uploadId: res.uploadId,
    object: new svc.tc.Object({ rootUrl: svc.rootUrl, credentials: res.credentials, retries: 0 }),
    streamFactory: async () => (await import('node:stream')).Readable.from([data]),
    retries: 0,
  });
}
