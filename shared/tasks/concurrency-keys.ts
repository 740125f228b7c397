/**
 * Concurrency keys: at most one task per key is running. A task names its key in the extension
 * field `concurrencyKey`; the ConcurrencyKeys table holds, per key (PartitionKey), a `holder` row
 * naming the run that may run and the hint it acquired the key with, and `w~…` rows for the tasks
 * waiting, ordered by priority, then creation.
 *
 * - Acquire (before a keyed run is claimed): the key is free, or its holder is dead (its run is no
 *   longer running), and no earlier live waiter is ahead; then the holder row is written with
 *   insert-if-absent or an ETag-guarded replace (guardedUpdate), so two claimers can never both take it. The claim
 *   transition then only succeeds while the run still has that hint (`keyHeld`): the hint is the
 *   fencing token, so a claimer whose key was taken over (by fencing its hint) cannot start.
 * - A busy key makes the claimer a waiter: its hint is consumed and it gets a fresh one when the
 *   key is released.
 * - Release (after every resolution of a running keyed run: report, claim expiry, deadline, cancel,
 *   worker gone): delete the holder row only if it still names that run (ETag-guarded: a late
 *   release never frees a newer holder's key), then hint the first live waiter.
 * - Leaks (a crash between a resolution and its release, an acquire whose claim never happened)
 *   are recovered when a waiter asks again: the reaper's hint repair re-hints waiters whose hint is
 *   gone, and their acquire finds the holder dead.
 * Tasks without a key never touch this table.
 */
import { UNCHANGED, WriteCongestion, allRows, deleteIfMatch, guardedUpdate, readPage, type StoredEntity } from '../storage/storage';
import { decodeKey, encodeKey } from '../storage/keys';
import type { TaskDeps } from './ports';
import { TaskRecord, priorityOf, taskState } from './model';
import { PRIORITIES } from './vocabulary';

/**
 * Gives a pending run a fresh hint if it still has `staleHintId` (the rehint transition, through
 * the executor, which is passed in because the executor performs releases); resolves to the task after.
 */
export type Rehint = (t: TaskRecord, runId: number, staleHintId: string | undefined) => Promise<TaskRecord | undefined>;

/** A holder whose run is still pending with the acquiring hint is trusted to be mid-claim this long. */
export const IN_FLIGHT_S = 30;
/** Waiter rows looked at to find the first live one (stale rows are deleted on the way). */
const WAITER_SCAN = 10;
/** Holder writes lost to concurrent acquirers, per look at the key, before waiting in line (or reporting it busy). */
const ACQUIRE_ATTEMPTS = 5;

const HOLDER_RK = 'holder';
const WAIT_PREFIX = 'w~';

export interface Holder {
  taskId: string;
  runId: number;
  hintId: string;
  since: string;
}
export interface Waiter {
  taskId: string;
  runId: number;
  priority: string;
  created: string;
}

const table = (d: TaskDeps) => d.storage.table('ConcurrencyKeys');
const pk = (key: string) => encodeKey(key);
const waiterRk = (t: TaskRecord) => `${WAIT_PREFIX}${PRIORITIES.indexOf(priorityOf(t))}~${t.definition.created}~${t.taskId}`;

const holderFrom = (row: StoredEntity): Holder & { etag: string } => ({
  taskId: row.taskId as string,
  runId: Number(row.runId),
  hintId: row.hintId as string,
  since: row.since as string,
  etag: row.etag,
});

export async function holderOf(d: TaskDeps, key: string): Promise<(Holder & { etag: string }) | undefined> {
  const row = await table(d).get(pk(key), HOLDER_RK);
  return row && holderFrom(row);
}

export async function waitersOf(d: TaskDeps, key: string, limit: number): Promise<(Waiter & { rowKey: string })[]> {
  const waiting = await allRows(table(d), { partitionKey: pk(key), rowKey: { ge: WAIT_PREFIX, lt: `${WAIT_PREFIX}~` } }, { max: limit });
  return waiting.map((r) => ({
    rowKey: r.rowKey,
    taskId: r.taskId as string,
    runId: Number(r.runId),
    priority: r.priority as string,
    created: r.created as string,
  }));
}

/**
 * The task's latest run, when it is pending, due (a delayed start or resumption is not waiting yet:
 * it asks for the key when its hint shows up) and before the deadline.
 */
function waitingRun(t: TaskRecord | undefined, now: Date) {
  if (!t || taskState(t) !== 'pending' || new Date(t.definition.deadline) <= now) return undefined;
  const r = t.runs[t.runs.length - 1];
  return new Date(r.scheduled) <= now ? r : undefined;
}

/** The first waiter that still waits (stale rows deleted on the way), with its task. */
async function firstLiveWaiter(d: TaskDeps, key: string, me: string | undefined, now: Date) {
  for (const w of await waitersOf(d, key, WAITER_SCAN)) {
    if (w.taskId === me) return { waiter: w, task: undefined };
    const t = await d.tasks.load(w.taskId);
    // A row written before a priority change is stale: the task waits under its new priority too.
    if (waitingRun(t, now) && w.priority === priorityOf(t!)) return { waiter: w, task: t };
    await table(d).delete(pk(key), w.rowKey);
  }
  return undefined;
}

/**
 * Whether the holder's run may still run. A holder pending with the hint it acquired with is
 * mid-claim; past IN_FLIGHT_S it is fenced (a fresh hint, so that claim can no longer happen) and
 * then dead.
 */
async function holderAlive(d: TaskDeps, h: Holder, now: Date, rehint: Rehint): Promise<boolean> {
  const t = await d.tasks.load(h.taskId);
  const r = t?.runs[h.runId];
  if (!t || !r || h.runId !== t.runs.length - 1) return false;
  if (r.state === 'running') return true;
  if (r.state !== 'pending' || r.hintId !== h.hintId) return false;
  if (now.getTime() - new Date(h.since).getTime() < IN_FLIGHT_S * 1000) return true;
  const after = await rehint(t, h.runId, h.hintId);
  // Fenced, or its hint moved on meanwhile; only a claim that got through keeps it alive.
  return after?.runs[h.runId]?.state === 'running';
}

async function addWaiter(d: TaskDeps, key: string, t: TaskRecord, runId: number): Promise<void> {
  await table(d).upsert({
    partitionKey: pk(key),
    rowKey: waiterRk(t),
    taskId: t.taskId,
    runId,
    priority: priorityOf(t),
    created: t.definition.created,
  });
}

/**
 * Takes the key for run `runId` of `t` (pending, with its current hint as the fencing token), or
 * records the task as waiting. 'held' means the claim may go ahead with `keyHeld` = the run's hint.
 */
export async function acquireKey(d: TaskDeps, t: TaskRecord, runId: number, now: Date, rehint: Rehint): Promise<'held' | 'busy'> {
  if ((await tryAcquire(d, t, runId, now, rehint)) === 'held') return 'held';
  // Wait in line, then look again: a release that ran before our row was written saw no waiter.
  await addWaiter(d, t.definition.concurrencyKey!, t, runId);
  return tryAcquire(d, t, runId, now, rehint);
}

/**
 * One look at the key: the holder row is written (insert-if-absent, or replace under the ETag read)
 * when the key is free, or its holder dead, and no earlier live waiter is ahead; another acquirer
 * winning the write makes it decide again (guardedUpdate). Deciding deletes stale waiter rows and
 * may fence a holder stuck mid-claim (`holderAlive`): both are safe to repeat.
 */
async function tryAcquire(d: TaskDeps, t: TaskRecord, runId: number, now: Date, rehint: Rehint): Promise<'held' | 'busy'> {
  const key = t.definition.concurrencyKey!;
  const hintId = t.runs[runId].hintId ?? '';
  let first: Awaited<ReturnType<typeof firstLiveWaiter>>;
  let held = false;
  try {
    await guardedUpdate(
      table(d),
      { partitionKey: pk(key), rowKey: HOLDER_RK },
      async (row) => {
        first = await firstLiveWaiter(d, key, t.taskId, now);
        const ahead = first && first.waiter.taskId !== t.taskId;
        const h = row && holderFrom(row);
        const mine = h && h.taskId === t.taskId && h.runId === runId && h.hintId === hintId;
        const free = !h || (!mine && !(await holderAlive(d, h, now, rehint)));
        held = !!mine || (free && !ahead);
        return held && !mine ? { taskId: t.taskId, runId, hintId, since: now.toJSON() } : UNCHANGED;
      },
      { what: `concurrency key ${key}`, attempts: ACQUIRE_ATTEMPTS },
    );
  } catch (err) {
    if (err instanceof WriteCongestion) return 'busy'; // other acquirers kept winning: wait in line
    throw err;
  }
  if (!held) return 'busy';
  if (first?.waiter.taskId === t.taskId) await table(d).delete(pk(key), first.waiter.rowKey);
  return 'held';
}

/**
 * Releases the key run `runId` of task `taskId` held (only if it still does), then gives the first
 * live waiter a fresh hint so it can take the key. `task` is the releasing task as written: its
 * retry run, if any, takes its place in line first (by its priority and creation, like any waiter).
 */
export async function releaseKey(d: TaskDeps, key: string, taskId: string, runId: number, rehint: Rehint, task?: TaskRecord): Promise<void> {
  const h = await holderOf(d, key);
  if (h && (h.taskId !== taskId || h.runId !== runId)) return; // another run's key now: not ours to release
  // Already gone: an earlier attempt released it but may not have woken the next waiter.
  if (h && !(await deleteIfMatch(table(d), pk(key), HOLDER_RK, h.etag)).ok) return; // taken over meanwhile
  const now = d.now();
  const retry = waitingRun(task, now);
  if (task && retry) await addWaiter(d, key, task, retry.runId);
  const first = await firstLiveWaiter(d, key, undefined, now);
  const run = waitingRun(first?.task, now);
  if (!first?.task || !run) return;
  await rehint(first.task, run.runId, run.hintId);
}

/** Who holds a key and who waits, for operators and the dashboard. */
export async function describeKey(d: TaskDeps, key: string, limit: number) {
  const [holder, waiting] = await Promise.all([holderOf(d, key), waitersOf(d, key, limit)]);
  // The holder's run as it is now: who runs it, or that the key is only held until someone asks.
  const run = holder && (await d.tasks.load(holder.taskId))?.runs[holder.runId];
  return {
    concurrencyKey: key,
    ...(holder
      ? {
          holder: {
            taskId: holder.taskId,
            runId: holder.runId,
            since: holder.since,
            ...(run ? { state: run.state } : {}),
            ...(run?.workerGroup ? { workerGroup: run.workerGroup, workerId: run.workerId } : {}),
          },
        }
      : {}),
    // A task listed twice (a row from before a priority change) shows once, at its first place.
    waiting: waiting
      .filter((w, i) => waiting.findIndex((x) => x.taskId === w.taskId) === i)
      .map(({ taskId, runId, priority, created }) => ({ taskId, runId, priority, created })),
  };
}

/** Held keys in key order, a page across the table's partitions (an operator query). */
export async function heldKeys(d: TaskDeps, limit: number, continuation?: string) {
  const page = await readPage(table(d), { rowKey: HOLDER_RK }, limit, continuation);
  return {
    concurrencyKeys: page.items.map((r) => ({
      concurrencyKey: decodeKey(r.partitionKey),
      holder: { taskId: r.taskId as string, runId: Number(r.runId), since: r.since as string },
    })),
    continuation: page.continuation,
  };
}
