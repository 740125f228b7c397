/**
 * Removes an expired task and what hangs off it: its dependency edges (both directions), its
 * task-group member row, the group's meta row once the whole group has expired, and the task row.
 * Every step is an idempotent delete, so a crash midway is finished by the next sweep, and two
 * reapers sweeping the same row at once do no harm.
 */
import { deleteRows, rowBatches } from '../storage/storage';
import { isResolved, taskState } from '../tasks/model';
import type { LifecycleDeps } from './ports';
import { deleteTask } from './delete';
import { depKey } from './dependencies';

/**
 * By this long after a resolution its group step (the open row's delete) is done: its guard trigger
 * (deadline, due QUEUE_DEADLINE_DELAY_S after the deadline, or the `resolved` safety net, minutes
 * after the resolution) fires before the expiry phase of a reaper pass then, and redoes it after a crash.
 */
export const GROUP_STEP_SETTLED_MS = 3600_000;
/** Edge rows read per page (an entity-group transaction's worth). */
const MAX_BATCH = 100;

/** What the expiry index row of a task carries, so the sweep works even after the task row is gone. */
export interface TaskExpiryData {
  taskGroupId: string;
  dependencies: string[];
}

/**
 * `groupDue`: the group's expiry row at this task's expires is due with this one (the reaper pairs
 * them): a task that created its group and was never joined then removes the group's rows too, in
 * one transaction without the partition read. True if it did (the group row is done).
 */
export async function expireTask(d: LifecycleDeps, taskId: string, data: TaskExpiryData, groupDue = false): Promise<boolean> {
  const now = d.now();
  const t = await d.tasks.load(taskId);
  // The index row of a createTask that lost to a different definition: the real task has its own.
  if (t && t.definition.taskGroupId !== data.taskGroupId) {
    await d.groups.removeMember(data.taskGroupId, taskId, true);
    return false;
  }
  if (t && new Date(t.definition.expires) > now) return false;
  const deps = t?.definition.dependencies ?? data.dependencies;
  const taskGroupId = data.taskGroupId;
  const edges = d.storage.table('TaskDeps');
  // Rows in this task's partition: what it waited for (r-*) and who waited for it (d-*).
  if (!t || deps.length || t.hasDependents) {
    for await (const batch of rowBatches(edges, { partitionKey: taskId, select: ['RowKey'] }, MAX_BATCH))
      await deleteRows(
        edges,
        taskId,
        batch.map((r) => r.rowKey),
      );
  }
  // This task in its dependencies' dependents lists.
  for (const r of new Set(deps)) if (r !== taskId) await edges.delete(r, depKey(taskId, r));
  // The open row of a task that never resolved goes now (it would keep a live group from counting
  // as resolved). A resolved member's went with its resolution, or, if a crash cut that step off,
  // with its guard trigger (deadline, or the `resolved` safety net) soon after; only a task resolved
  // less than GROUP_STEP_SETTLED_MS ago (which may expire before its guard fires) has it deleted too.
  const unresolved = !t || !isResolved(taskState(t));
  const resolvedAt = t?.runs[t.runs.length - 1]?.resolved;
  const closeToo = unresolved || !(resolvedAt && now.getTime() - Date.parse(resolvedAt) >= GROUP_STEP_SETTLED_MS);
  // Its member and latest rows go with the rest of the group's partition, at the group's expiry
  // (expireGroup); listings skip expired members meanwhile. The task row with its history, and its
  // index rows. A group of one (its row says nobody joined: its open row is there, resolved or not)
  // goes with it when its row is due too, in the task row's transaction (same partition), which
  // fails if anyone joined since; the group's row then reads what is left (expireGroup).
  if (groupDue && t?.groupAlone && taskGroupId === taskId) {
    if (await deleteTask(d, taskId, t, d.groups.aloneKeys(taskGroupId, t.definition.created))) return true;
    // Someone joined since the read: its open row goes as any member's does.
    if (closeToo) await d.groups.close(taskGroupId, taskId);
    return false;
  }
  await Promise.all([closeToo ? d.groups.close(taskGroupId, taskId) : undefined, t ? deleteTask(d, taskId, t) : undefined]);
  return false;
}

/**
 * A group's expiry row came due (one per distinct member expires): once the meta row's expires has
 * passed, every row of the group goes (shared/tasks/groups.ts `expire`).
 */
export async function expireGroup(d: LifecycleDeps, taskGroupId: string): Promise<void> {
  await d.groups.expire(taskGroupId, d.now());
}
