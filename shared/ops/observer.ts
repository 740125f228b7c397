/**
 * What TaskStore does around each task write besides the task row: history rows in the same
 * transaction, then the operator indexes and one structured `task-transition` log event per run
 * transition (the per-task metric stream: App Insights turns these lines into queryable events).
 * Index writes are queued, not awaited (see shared/ops/indexes.ts); `settled()` waits for them.
 */
import type { Entity, Storage } from '../storage/storage';
import type { TaskRecord } from '../tasks/model';
import type { TaskObserver } from '../tasks/store';
import type { Logger } from '../log';
import { currentActor } from './actor';
import { HistoryEntry, historyKeys, historyRowKey, historyRows } from './history';
import { IndexBatcher, QueueRegistry, indexOps, repairOps } from './indexes';
import type { Rollups } from './rollups';

/** The observer, and the way to wait for its queued index writes. */
export type OpsObserver = TaskObserver & IndexWrites;

/** This instance's queued operator index writes. */
export interface IndexWrites {
  /** Resolves once every index write queued before the call is written (or failed and logged). */
  settled(): Promise<void>;
}

export function opsObserver(storage: Storage, log: Logger, now: () => Date, batcher = new IndexBatcher(storage), rollups?: Rollups): OpsObserver {
  // Entries computed for a write, logged once the write has taken effect.
  const pending = new WeakMap<TaskRecord, HistoryEntry[]>();
  const queues = new QueueRegistry(storage);
  const failed = (task: TaskRecord) => (err: unknown) =>
    // The task write stands; the index catches up at the task's next transition (see indexes.ts).
    log.warn('index-write-failed', { taskId: task.taskId, error: String((err as Error)?.message ?? err) });

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
      rollups?.observe(before, after);
      for (const { event, ...e } of entries) {
        log.info('task-transition', { taskId: task.taskId, taskQueueId: task.definition.taskQueueId, transition: event, ...e });
      }
      if (after) {
        // Before the task's first index row (a call once per process and task queue), so awaited.
        const listed = await queues.ensure(task.definition.taskQueueId, task.indexBuckets).then(() => true, failed(task));
        if (!listed) return;
      }
      // Queued in the order of the task writes (the batcher keeps each row key's order).
      const repair = repairOps(before, after);
      const changes = indexOps(before, after);
      const behind = [...changes.keys()].some((pk) => batcher.backlogged(pk));
      const written = Promise.all(
        [...changes].map(([pk, ops]) =>
          batcher.apply(
            pk,
            ops,
            repair.filter((r) => r.row.partitionKey === pk),
            !after,
          ),
        ),
      ).then(() => undefined, failed(task));
      // Off the request path, except a deletion's (its index rows go, unlingered, before the task
      // row: TaskStore.delete) and while the partition is backlogged (the request waits its turn).
      if (!after || behind) await written;
    },

    settled: () => batcher.settled(),

    // The task row counts its history rows, so their keys need no query.
    extraKeys: async (taskId: string, known?: TaskRecord) =>
      known?.historySeq ? Array.from({ length: known.historySeq }, (_, i) => historyRowKey(taskId, i + 1)) : historyKeys(storage, taskId),
  };
}
