/**
 * What TaskStore does around each task write besides the task row: history rows in the same
 * transaction, then the operator indexes and one structured `task-transition` log event per run
 * transition (the per-task metric stream: App Insights turns these lines into queryable events).
 */
import type { Entity, Storage } from '../storage/storage';
import type { TaskRecord } from '../tasks/model';
import type { TaskObserver } from '../tasks/store';
import type { Logger } from '../log';
import { currentActor } from './actor';
import { HistoryEntry, historyKeys, historyRowKey, historyRows } from './history';
import { IndexBatcher, QueueRegistry, indexOps, repairOps } from './indexes';

export function opsObserver(storage: Storage, log: Logger, now: () => Date): TaskObserver {
  // Entries computed for a write, logged once the write has taken effect.
  const pending = new WeakMap<TaskRecord, HistoryEntry[]>();
  const batcher = new IndexBatcher(storage);
  const queues = new QueueRegistry(storage);
  return {
    rowsFor(before: TaskRecord | undefined, after: TaskRecord): Entity[] {
      const { rows, entries } = historyRows(before, after, now().toJSON(), currentActor()?.actor);
      pending.set(after, entries);
      return rows;
    },

    async written(before: TaskRecord | undefined, after: TaskRecord | undefined): Promise<void> {
      const entries = after ? (pending.get(after) ?? []) : [];
      const ctx = currentActor();
      if (ctx) ctx.transitions += entries.filter((e) => e.runId !== undefined).length;
      const task = (after ?? before)!;
      for (const { event, ...e } of entries) {
        log.info('task-transition', { taskId: task.taskId, taskQueueId: task.definition.taskQueueId, transition: event, ...e });
      }
      try {
        if (after) await queues.ensure(task.definition.taskQueueId, task.indexBuckets); // no call once this process has listed it
        const repair = repairOps(before, after);
        await Promise.all(
          [...indexOps(before, after)].map(([pk, ops]) =>
            batcher.apply(
              pk,
              ops,
              repair.filter((r) => r.row.partitionKey === pk),
            ),
          ),
        );
      } catch (err) {
        // The task write stands; the index catches up at the task's next transition (see indexes.ts).
        log.error('index-write-failed', { taskId: task.taskId, error: String((err as Error)?.message ?? err) });
      }
    },

    // The task row counts its history rows, so their keys need no query.
    extraKeys: async (taskId: string, known?: TaskRecord) =>
      known?.historySeq ? Array.from({ length: known.historySeq }, (_, i) => historyRowKey(taskId, i + 1)) : historyKeys(storage, taskId),
  };
}
