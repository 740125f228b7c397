/**
 * Task dependencies. Edges live in the LifecycleDeps table in both directions:
 *  - requirement rows `(PK=dependent, RK='r-<required>~<dependent>')`: what still blocks a task;
 *  - dependent rows `(PK=required, RK='d-<dependent>~<required>', require)`: whom to tell on resolution.
 * Each row key names both ends, so it is unique in the table: Azurite looks a row up by RowKey
 * first, and a key shared by the 10,000 edges of one task made every edge write scan all of them.
 * Edges are written before the required tasks are checked, so a dependency resolving at the same
 * moment is seen either by this check or by its own resolution (both serialize on its row's ETag).
 */
import type { LifecycleDeps } from './ports';
import { deleteTask } from './delete';
import { TaskRecord, isResolved, taskState } from '../tasks/model';
import { mapLimit } from '../limit';
import { MAX_TABLE_PAGE, firstRow, readPage, rowBatches } from '../storage/storage';

/** Entity-group transactions hold at most 100 operations. */
const MAX_BATCH = 100;
/**
 * Edges handled side by side. A task may have 10,000 dependencies (or dependents); one after
 * another that is minutes of storage calls, past any client timeout. Each edge's own calls stay in
 * order; edges are independent of each other.
 */
const EDGE_CONCURRENCY = 32;
/**
 * Requirement-row transactions in flight. They all go to one partition, which Azure serves at about
 * 2,000 entities/s, and Azurite runs one transaction at a time: 32 of 100 rows queued past the 10 s
 * storage-call deadline.
 */
const REQUIREMENT_CONCURRENCY = 4;

export const reqKey = (required: string, dependent: string) => `r-${required}~${dependent}`;
export const depKey = (dependent: string, required: string) => `d-${dependent}~${required}`;
/** The dependent a dependent row (`d-<dependent>~<required>`) names, and the key of its requirement row. */
function edgeOf(rowKey: string, required: string): { dependent: string; requirement: string } {
  const dependent = rowKey.slice(2, rowKey.indexOf('~'));
  return { dependent, requirement: reqKey(required, dependent) };
}

export interface TrackResult {
  missing: string[];
  expiring: string[];
}

function satisfiedBy(requires: 'completed' | 'resolved', t: TaskRecord): boolean {
  const s = taskState(t);
  return requires === 'completed' ? s === 'completed' : isResolved(s);
}

/**
 * How tracking changes task rows (through the executor, see create.ts): flag a required task as
 * having dependents (undefined if it does not exist; `known`, a row read earlier and not yet
 * flagged, saves a read: the flag is written only if the row is still that one), and schedule the
 * new task.
 */
export interface Tracking {
  flagRequired: (requiredId: string, known?: TaskRecord) => Promise<TaskRecord | undefined>;
  schedule: (taskId: string) => Promise<void>;
}

/**
 * Records a new unscheduled task's edges, checking every required task; schedules it if nothing
 * blocks it. With missing or expiring dependencies the task and its edges are removed again.
 */
export async function trackDependencies(d: LifecycleDeps, task: TaskRecord, tracking: Tracking, known?: Map<string, TaskRecord>): Promise<TrackResult> {
  const deps = task.definition.dependencies;
  await writeRequirements(d, task);
  const { missing, expiring } = await linkRequired(d, task, tracking, known);
  if (missing.length || expiring.length) {
    await removeTracked(d, task, true);
    return { missing: order(missing, deps), expiring: order(expiring, deps) };
  }
  if (!(await isBlocked(d, task.taskId))) await tracking.schedule(task.taskId);
  return { missing, expiring };
}

/**
 * The requirement rows, in the task's own partition: one entity-group transaction per 100. They go
 * before any dependent row, so no resolution can find the task before it is blocked.
 */
export async function writeRequirements(d: LifecycleDeps, task: TaskRecord): Promise<void> {
  const table = d.storage.table('TaskDeps');
  const { dependencies: deps, expires } = task.definition;
  const chunks: string[][] = [];
  for (let i = 0; i < deps.length; i += MAX_BATCH) chunks.push(deps.slice(i, i + MAX_BATCH));
  await mapLimit(chunks, REQUIREMENT_CONCURRENCY, (chunk) =>
    table.transact(chunk.map((r) => ({ op: 'upsert', entity: { partitionKey: task.taskId, rowKey: reqKey(r, task.taskId), expires } }))),
  );
}

/**
 * Reads the required tasks (one point read each, nothing written) before createTask writes
 * anything: which are missing or expire before the task's deadline (its 400), and the rows found,
 * for `linkRequired`. Stops starting reads once one is refused, so thousands of bad dependencies
 * cost about one round of EDGE_CONCURRENCY reads; the 400 names those found by then.
 */
export async function checkRequired(d: LifecycleDeps, task: TaskRecord): Promise<TrackResult & { found: Map<string, TaskRecord> }> {
  const deps = task.definition.dependencies;
  const found = new Map<string, TaskRecord>();
  const missing: string[] = [];
  const expiring: string[] = [];
  await mapLimit(others(task), EDGE_CONCURRENCY, async (r) => {
    if (missing.length || expiring.length) return;
    const required = await d.tasks.load(r);
    if (!required) missing.push(r);
    else if (expiresTooSoon(task, required)) expiring.push(r);
    else found.set(r, required);
  });
  return { missing: order(missing, deps), expiring: order(expiring, deps), found };
}

/**
 * The dependent rows and flags: for each required task, a row in its partition naming this task,
 * then its `hasDependents` flag (ETag-guarded), which also tells its state at that moment: already
 * satisfied, the requirement row goes. A resolution racing this is serialized on the required
 * task's row: it either sees the flag (and then our row) or we see it resolved. `known` rows (from
 * `checkRequired`) save the read of each required task that was not flagged yet.
 */
export async function linkRequired(d: LifecycleDeps, task: TaskRecord, tracking: Tracking, known?: Map<string, TaskRecord>): Promise<TrackResult> {
  const table = d.storage.table('TaskDeps');
  const def = task.definition;
  const require = def.requires === 'all-resolved' ? 'resolved' : 'completed';
  const missing: string[] = [];
  const expiring: string[] = [];
  await mapLimit(others(task), EDGE_CONCURRENCY, async (r) => {
    await table.upsert({ partitionKey: r, rowKey: depKey(task.taskId, r), require, expires: def.expires });
    const seen = known?.get(r);
    // A row already flagged tells nothing about the moment after our row was written: read again.
    const required = await tracking.flagRequired(r, seen && !seen.hasDependents ? seen : undefined);
    if (!required) missing.push(r);
    else if (expiresTooSoon(task, required)) expiring.push(r);
    else if (satisfiedBy(require, required)) await table.delete(task.taskId, reqKey(r, task.taskId));
  });
  return { missing, expiring };
}

/**
 * Removes a task whose dependencies were refused: the task row first, so nobody can trigger a task
 * that will not exist, then its requirement rows and (`linked`) its rows in the required tasks'
 * partitions.
 */
export async function removeTracked(d: LifecycleDeps, task: TaskRecord, linked: boolean): Promise<void> {
  const table = d.storage.table('TaskDeps');
  await deleteTask(d, task.taskId);
  if (linked) await mapLimit(others(task), EDGE_CONCURRENCY, (r) => table.delete(r, depKey(task.taskId, r)));
  await mapLimit(task.definition.dependencies, EDGE_CONCURRENCY, (r) => table.delete(task.taskId, reqKey(r, task.taskId)));
}

/** The required tasks other than the task itself (a self-dependency waits for scheduleTask). */
function others(task: TaskRecord): string[] {
  return task.definition.dependencies.filter((r) => r !== task.taskId);
}

function expiresTooSoon(task: TaskRecord, required: TaskRecord): boolean {
  return new Date(required.definition.expires) < new Date(task.definition.deadline);
}

/** `some` in the order of `all` (the order the client listed its dependencies in). */
function order(some: string[], all: string[]): string[] {
  const set = new Set(some);
  return all.filter((x) => set.has(x));
}

/** Whether any requirement row of the task remains (the first of its range, read through empty pages). */
export async function isBlocked(d: LifecycleDeps, taskId: string): Promise<boolean> {
  return !!(await firstRow(d.storage.table('TaskDeps'), { partitionKey: taskId, rowKey: { ge: 'r-', lt: 'r.' }, select: ['RowKey'] }));
}

/**
 * Tells the dependents of a resolved task, scheduling (through `schedule`, see executor.ts) each
 * that nothing blocks any more. Idempotent: requirement deletes ignore missing rows and scheduling
 * checks the dependent's runs. Returns how many dependents were scheduled.
 */
export async function notifyDependents(d: LifecycleDeps, task: TaskRecord, schedule: (taskId: string, known: TaskRecord) => Promise<void>): Promise<number> {
  const state = taskState(task);
  if (!isResolved(state)) return 0;
  const table = d.storage.table('TaskDeps');
  let scheduled = 0;
  for await (const batch of rowBatches(table, { partitionKey: task.taskId, rowKey: { ge: 'd-', lt: 'd.' } }, MAX_TABLE_PAGE)) {
    const told = batch.filter((row) => row.require !== 'completed' || state === 'completed');
    await mapLimit(told, EDGE_CONCURRENCY, async (row) => {
      const { dependent, requirement } = edgeOf(row.rowKey, task.taskId);
      await table.delete(dependent, requirement);
      if (!(await isBlocked(d, dependent))) {
        const t = await d.tasks.load(dependent);
        if (t && t.runs.length === 0) {
          await schedule(dependent, t);
          scheduled++;
        }
      }
    });
  }
  return scheduled;
}

/** One page of the tasks that depend on `taskId` (its dependents list). */
export async function dependentPage(
  d: LifecycleDeps,
  taskId: string,
  limit: number,
  continuation?: string,
): Promise<{ taskIds: string[]; continuation?: string }> {
  const page = await readPage(d.storage.table('TaskDeps'), { partitionKey: taskId, rowKey: { ge: 'd-', lt: 'd.' }, select: ['RowKey'] }, limit, continuation);
  return { taskIds: page.items.map((r) => edgeOf(r.rowKey, taskId).dependent), continuation: page.continuation };
}
