/**
 * Task dependencies. Edges live in the TaskDeps table in both directions:
 *  - requirement rows `(PK=dependent, RK='r-'+required)`: what still blocks a task;
 *  - dependent rows `(PK=required, RK='d-'+dependent, require)`: whom to tell on resolution.
 * Edges are written before the required tasks are checked, so a dependency resolving at the same
 * moment is seen either by this check or by its own resolution (both serialize on its row's ETag).
 */
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

/**
 * How tracking changes task rows (through the executor, see create.ts): flag a required task as
 * having dependents (undefined if it does not exist), and schedule the new task.
 */
export interface Tracking {
  flagRequired: (requiredId: string) => Promise<TaskRecord | undefined>;
  schedule: (taskId: string) => Promise<void>;
}

/** Records a new unscheduled task's edges; schedules it if nothing blocks it. */
export async function trackDependencies(d: TaskDeps, task: TaskRecord, tracking: Tracking): Promise<TrackResult> {
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
    const required = await tracking.flagRequired(r);
    if (!required) {
      missing.push(r);
      continue;
    }
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
  if (!(await isBlocked(d, task.taskId))) await tracking.schedule(task.taskId);
  return { missing, expiring };
}

export async function isBlocked(d: TaskDeps, taskId: string): Promise<boolean> {
  const page = await d.storage.table('TaskDeps').page({ partitionKey: taskId, rowKey: { ge: 'r-', lt: 'r.' }, select: ['RowKey'] }, 1);
  return page.items.length > 0;
}

/**
 * Tells the dependents of a resolved task, scheduling (through `schedule`, see executor.ts) each
 * that nothing blocks any more. Idempotent: requirement deletes ignore missing rows and scheduling
 * checks the dependent's runs. Returns how many dependents were scheduled.
 */
export async function notifyDependents(d: TaskDeps, task: TaskRecord, schedule: (taskId: string, known: TaskRecord) => Promise<void>): Promise<number> {
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
          await schedule(dependent, t);
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
