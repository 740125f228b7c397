/**
 * Removes an expired task and what hangs off it: its dependency edges (both directions), its
 * task-group member row, the group's meta row once the whole group has expired, and the task row.
 * Every step is an idempotent delete, so a crash midway is finished by the next sweep, and two
 * reapers sweeping the same row at once do no harm.
 */
import { StorageConflict, deleteRows } from '../storage/storage';
import { groupRowKey, latestRowKey, openRowKey } from './groups';
import { isResolved, taskState } from './model';
import type { TaskDeps } from './deps';
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

export async function expireTask(d: TaskDeps, taskId: string, data: TaskExpiryData): Promise<void> {
  const now = d.now();
  // The group's meta row is read beside the task row: the expiry row names the group.
  const [t, metaOfData] = await Promise.all([d.tasks.load(taskId), d.groups.meta(data.taskGroupId)]);
  if (t && new Date(t.definition.expires) > now) {
    // The index row of a createTask that lost to a different definition: the real task has its own.
    if (t.definition.taskGroupId !== data.taskGroupId) await d.groups.removeMember(data.taskGroupId, taskId, true);
    return;
  }
  const deps = t?.definition.dependencies ?? data.dependencies;
  const taskGroupId = t?.definition.taskGroupId ?? data.taskGroupId;
  const meta = taskGroupId === data.taskGroupId ? metaOfData : await d.groups.meta(taskGroupId);
  const edges = d.storage.table('TaskDeps');
  // Rows in this task's partition: what it waited for (r-*) and who waited for it (d-*).
  if (!t || deps.length || t.hasDependents) {
    let continuation: string | undefined;
    do {
      const page = await edges.page({ partitionKey: taskId, select: ['RowKey'] }, MAX_BATCH, continuation);
      await deleteRows(
        edges,
        taskId,
        page.items.map((r) => r.rowKey),
      );
      continuation = page.continuation;
    } while (continuation);
  }
  // This task in its dependencies' dependents lists.
  for (const r of new Set(deps)) if (r !== taskId) await edges.delete(r, depKey(taskId, r));
  // The member row, the group's latest row of this task, and the open row of a task that never
  // resolved, in one transaction; with them the meta row when the group has expired too (its expires
  // is the latest of its members', so only the last member removes it). A resolved task's open row
  // went with its resolution, or, if a crash cut that step off, with its guard trigger (deadline or
  // `resolved` safety net) soon after; only a task resolved less than GROUP_STEP_SETTLED_MS ago
  // (which may expire before its guard fires) has its open row deleted too, beside the transaction.
  const groups = d.storage.table('TaskGroups');
  const unresolved = !t || !isResolved(taskState(t));
  const keys = [taskId, ...(t ? [latestRowKey(taskId, t.definition.created)] : []), ...(unresolved ? [openRowKey(taskId)] : [])];
  const resolvedAt = t?.runs[t.runs.length - 1]?.resolved;
  const closeToo = !unresolved && !(resolvedAt && now.getTime() - Date.parse(resolvedAt) >= GROUP_STEP_SETTLED_MS);
  const removeRows = async (): Promise<void> => {
    if (meta && new Date(meta.expires) <= now) {
      try {
        await groups.transact([
          ...keys.map((rowKey) => ({ op: 'delete' as const, partitionKey: taskGroupId, rowKey })),
          { op: 'delete', partitionKey: taskGroupId, rowKey: groupRowKey(taskGroupId), etag: meta.etag },
        ]);
      } catch (err) {
        // A row was gone already (a repeat after a crash, a task from before latest rows), or the group changed: one by one.
        if (!(err instanceof StorageConflict)) throw err;
        await deleteRows(groups, taskGroupId, keys);
        await ignoreConflict(groups.delete(taskGroupId, groupRowKey(taskGroupId), meta.etag));
      }
    } else {
      await deleteRows(groups, taskGroupId, keys);
    }
  };
  await Promise.all([closeToo ? d.groups.close(taskGroupId, taskId) : undefined, removeRows()]);
  // The task row with its history, and its operator index rows.
  if (t) await d.tasks.delete(taskId, t);
}

async function ignoreConflict(p: Promise<unknown>): Promise<void> {
  try {
    await p;
  } catch (err) {
    if (!(err instanceof StorageConflict)) throw err;
  }
}
