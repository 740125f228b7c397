/**
 * Small helpers for tests of the worker path: unique task queues, claiming one task, waiting for a
 * moment to pass.
 */
import { TestService, taskDef, slugid } from './service';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A task queue id nobody else uses (each test gets empty pending queues). */
export function uniqueQueue(prefix = 'prov'): string {
  return `${prefix}/q${Math.random().toString(36).slice(2, 10)}`;
}

/** Sleeps until `iso` (plus `slackMs`) has passed. */
export async function waitUntil(iso: string | number | Date, slackMs = 150): Promise<void> {
  const at = new Date(iso).getTime() + slackMs;
  const ms = at - Date.now();
  if (ms > 0) await sleep(ms);
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

/** claimWork that must return exactly one claim, for `taskId` if given. */
export async function claimOne(svc: TestService, taskQueueId: string, taskId?: string, worker: WorkerId = W1): Promise<any> {
  const claims = await claim(svc, taskQueueId, worker, 1);
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

/**
 * Runs reaper passes until `done()` holds (trigger visibility is rounded up to whole seconds, so a
 * trigger may show up to a second after the moment it was made for).
 */
export async function reapUntil(svc: TestService, done: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    await svc.runReaper();
    if (await done()) return;
    if (Date.now() > end) throw new Error('reapUntil: condition not reached');
    await sleep(100);
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
