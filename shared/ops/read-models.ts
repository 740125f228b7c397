/**
 * The operator read models a task write keeps up to date, after its row: the indexes (queued, not
 * awaited; see shared/ops/indexes.ts) and the chart rollups (in memory). What to write is part of
 * the write's plan (shared/lifecycle/planner.ts); this carries it out. `settled()` waits for the queue.
 */
import type { Storage } from '../storage/storage';
import type { Logger } from '../log';
import { IndexBatcher, IndexOp, QueueRegistry } from './indexes';
import type { MinuteTally, Rollups } from './rollups';

/** A write's read-model changes, as its plan made them. */
export interface ReadModelPlan {
  taskId: string;
  taskQueueId: string;
  indexBuckets?: number;
  /** Index changes by partition, and the repairs for when a partition's transaction fails (indexOps, repairOps). */
  index: Map<string, IndexOp[]>;
  repair: IndexOp[];
  /** The task is being deleted: its rows go now, unlingered, before the task row (which says which they are). */
  deleted: boolean;
  tally?: MinuteTally;
}

/** This instance's queued operator index writes. */
export interface IndexWrites {
  /** Resolves once every index write queued before the call is written (or failed and logged). */
  settled(): Promise<void>;
}

export class ReadModels implements IndexWrites {
  private readonly queues: QueueRegistry;

  constructor(
    storage: Storage,
    private readonly log: Logger,
    private readonly batcher = new IndexBatcher(storage),
    private readonly rollups?: Rollups,
  ) {
    this.queues = new QueueRegistry(storage);
  }

  async write(p: ReadModelPlan): Promise<void> {
    // The task write stands; the index catches up at the task's next transition (see indexes.ts).
    const failed = (err: unknown) => this.log.warn('index-write-failed', { taskId: p.taskId, error: String((err as Error)?.message ?? err) });
    if (p.tally) this.rollups?.add(p.taskQueueId, p.tally);
    if (!p.deleted) {
      // Before the task's first index row (a call once per process and task queue), so awaited.
      const listed = await this.queues.ensure(p.taskQueueId, p.indexBuckets).then(() => true, failed);
      if (!listed) return;
    }
    // Queued in the order of the task writes (the batcher keeps each row key's order).
    const behind = [...p.index.keys()].some((pk) => this.batcher.backlogged(pk));
    const written = Promise.all(
      [...p.index].map(([pk, ops]) =>
        this.batcher.apply(
          pk,
          ops,
          p.repair.filter((r) => r.row.partitionKey === pk),
          p.deleted,
        ),
      ),
    ).then(() => undefined, failed);
    // Off the request path, except a deletion's and while the partition is backlogged (the request waits its turn).
    if (p.deleted || behind) await written;
  }

  settled(): Promise<void> {
    return this.batcher.settled();
  }
}
