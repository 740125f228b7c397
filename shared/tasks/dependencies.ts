/**
 * Task dependencies. Edges live in the TaskDeps table in both directions:
 *  - requirement rows `(PK=dependent, RK='r-'+required)`: what still blocks a task;
 *  - dependent rows `(PK=required, RK='d-'+dependent, require)`: whom to tell on resolution.
 * Edges are written before the required tasks are checked, so a dependency resolving at the same
 * moment is seen either by this check or by its own resolution (both serialize on its row's ETag).
 */
import * as slugid from 'slugid';
import { TaskDeps } from './deps';
import { TaskRecord, isResolved, taskState } from './model';

/** Entity-group transactions hold at most 100 operations. */
const MAX_BATCH = 100;

const reqKey = (required: string) => `r-${required}`;
const depKey = (dependent: string) => `d-${dependent}`;

export interface TrackResult {
  missing: string[];
  expiring: string[];
}

function satisfiedBy(requires: 'completed' | 'resolved', t: TaskRecord): boolean {
  const s = taskState(t);
  return requires === 'completed' ? s === 'completed' : isResolved(s);
}

/** Records a new unscheduled task's edges; schedules it if nothing blocks it. */
export async function trackDependencies(d: TaskDeps, task: TaskRecord): Promise<TrackResult> {
  const table = d.storage.table('TaskDeps');
  const def = task.definition;
  const require = def.requires === 'all-resolved' ? 'resolved' : 'completed';
  const deps = def.dependencies;
  for (let i = 0; i < deps.length; i += MAX_BATCH) {
    const chunk = deps.slice(i, i + MAX_BATCH);
    await table.transact(chunk.map((r) => ({ op: 'upsert', entity: { partitionKey: task.taskId, rowKey: reqKey(r), expires: def.expires } })));
  }
  const missing: string[] = [];
  const expiring: string[] = [];
  for (const r of deps) {
    if (r === task.taskId) continue; // a self-dependency waits for scheduleTask
    await table.upsert({ partitionKey: r, rowKey: depKey(task.taskId), require, expires: def.expires });
    // Flag the required task so its resolution looks for dependents; re-reads on ETag races.
    const result = await d.tasks.modify(r, (t) => {
      if (t.hasDependents) return false;
      t.hasDependents = true;
      return true;
    });
    if (!result) {
      missing.push(r);
      continue;
    }
    const required = result.task;
    if (new Date(required.definition.expires) < new Date(def.deadline)) {
      expiring.push(r);
      continue;
    }
    if (satisfiedBy(require, required)) await table.delete(task.taskId, reqKey(r));
  }
  if (missing.length || expiring.length) {
    // Remove the task before its edges, so nobody can trigger a task that will not exist.
    await d.tasks.delete(task.taskId);
    for (const r of deps) if (r !== task.taskId) await table.delete(r, depKey(task.taskId));
    for (const r of deps) await table.delete(task.taskId, reqKey(r));
    return { missing, expiring };
  }
  if (!(await isBlocked(d, task.taskId))) await scheduleRun0(d, task.taskId);
  return { missing, expiring };
}

export async function isBlocked(d: TaskDeps, taskId: string): Promise<boolean> {
  const page = await d.storage.table('TaskDeps').page({ partitionKey: taskId, rowKey: { ge: 'r-', lt: 'r.' }, select: ['RowKey'] }, 1);
  return page.items.length > 0;
}

/**
 * Adds run 0 (pending) to a task without runs, putting its hint first: if the row update loses,
 * the hint is stale and harmless; if we crash after it, a retry mints a fresh one.
 */
export async function scheduleRun0(d: TaskDeps, taskId: string, known?: TaskRecord): Promise<TaskRecord | undefined> {
  const task = known ?? (await d.tasks.load(taskId));
  if (!task) return undefined;
  const now = d.now();
  if (task.runs.length > 0 || new Date(task.definition.deadline) <= now) return task;
  const hintId = slugid.nice();
  const def = task.definition;
  await d.pending.put(def.taskQueueId, def.priority, taskId, 0, hintId, def.deadline);
  const result = await d.tasks.modify(
    taskId,
    (t) => {
      if (t.runs.length > 0) return false;
      t.runs.push({ runId: 0, state: 'pending', reasonCreated: 'scheduled', scheduled: now.toJSON(), hintId });
      return true;
    },
    task,
  );
  if (result?.changed) d.wake(def.taskQueueId);
  return result?.task;
}

/**
 * Tells the dependents of a resolved task. Idempotent: requirement deletes ignore missing rows and
 * scheduling checks the dependent's runs. Returns how many dependents were scheduled.
 */
export async function notifyDependents(d: TaskDeps, task: TaskRecord): Promise<number> {
  const state = taskState(task);
  if (!isResolved(state)) return 0;
  const table = d.storage.table('TaskDeps');
  let scheduled = 0;
  let continuation: string | undefined;
  do {
    const page = await table.page({ partitionKey: task.taskId, rowKey: { ge: 'd-', lt: 'd.' } }, 1000, continuation);
    for (const row of page.items) {
      if (row.require === 'completed' && state !== 'completed') continue;
      const dependent = row.rowKey.slice(2);
      await table.delete(dependent, reqKey(task.taskId));
      if (!(await isBlocked(d, dependent))) {
        const t = await d.tasks.load(dependent);
        if (t && t.runs.length === 0) {
          await scheduleRun0(d, dependent, t);
          scheduled++;
        }
      }
    }
    continuation = page.continuation;
  } while (continuation);
  return scheduled;
}

/** One page of the tasks that depend on `taskId` (its dependents list). */
export async function dependentPage(d: TaskDeps, taskId: string, limit: number, continuation?: string): Promise<{ taskIds: string[]; continuation?: string }> {
  const page = await d.storage.table('TaskDeps').page({ partitionKey: taskId, rowKey: { ge: 'd-', lt: 'd.' }, select: ['RowKey'] }, limit, continuation);
  return { taskIds: page.items.map((r) => r.rowKey.slice(2)), continuation: page.continuation };
}
