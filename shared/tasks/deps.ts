/**
 * What the task domain functions need, passed in as one argument.
 */
import type { Storage } from '../storage/storage';
import type { TaskRecord } from './model';
import type { TaskStore } from './store';
import type { PendingQueues } from './pending';
import type { DeadlineSweep, Triggers } from './triggers';
import type { TaskGroups } from './groups';
import type { ExpiryIndex } from './expiry';
import type { Logger } from '../log';
import type { Priority } from './vocabulary';
import type { Planner, PlannedEvents, ReadModelWrites } from './plan';

/**
 * The transition an idempotent repeat repeats: a createTask (its task-defined, and run 0's
 * task-pending while that run is still pending), or the end of run `runId` (a report or cancel).
 */
export type RepeatedCall = { kind: 'defined'; pendingRun0: boolean } | { kind: 'end'; runId: number };

/**
 * How one task write's events travel (shared/events/recorder.ts makes them; the executor applies
 * them): opaque to the executor beyond these two facts.
 */
export interface WriteEvents {
  /** The deadline trigger the write puts also guards its events, as this sweep (no trigger of their own). */
  deadlineSweep?: DeadlineSweep;
  /** A claim-expiry trigger that the write's `after` effects drop guards them: those wait for their delivery. */
  guarded: boolean;
}

/** Events as effects of task writes: planned with the write, recorded on its history rows (same transaction), delivered after the commit. */
export interface TaskEvents {
  /**
   * Before the write (and its `before` effects): how its planned events are guarded until
   * delivered (the claim-expiry or deadline trigger the write puts, or a sweep trigger put now).
   */
  prepare(events: PlannedEvents): Promise<WriteEvents>;
  /** After the commit: true if delivered. Throws only if a guarded write's events are neither delivered nor swept (its guard must stay). */
  deliver(w: WriteEvents): Promise<boolean>;
}

/** The operator read models (shared/ops/read-models.ts): a plan's index and rollup writes, after the row. */
export interface ReadModels {
  /** Queued; resolves once the request need not wait longer (a deletion's are written by then: its row goes next). */
  write(w: ReadModelWrites): Promise<void>;
}

/** The task whose hint a wake is about: pollers look first at the pending queue its hint went to. */
export interface WakeHint {
  taskId: string;
  priority: Priority;
}

export interface TaskDeps {
  storage: Storage;
  tasks: TaskStore;
  pending: PendingQueues;
  triggers: Triggers;
  groups: TaskGroups;
  expiry: ExpiryIndex;
  now: () => Date;
  log: Logger;
  config: {
    claimTimeoutS: number;
    maxTaskDeadlineDays: number;
    deadlineDelayS: number;
  };
  /** Work that outlives its request (createTask's background tracking); closing the app waits for it. */
  background?: Set<Promise<void>>;
  /** Test knobs (shared/services.ts Tuning); production uses the defaults. */
  tuning?: { syncDependencies?: number };
  /** Commits a resolved run's pending uploads (shared/artifacts/commit.ts); idempotent. */
  uploads: { commit: (taskId: string, runId: number) => Promise<void>; sealLiveLog: (taskId: string, runId: number) => Promise<void> };
  /** Wakes this instance's claimWork pollers for a task queue (no-op where none run), naming the hinted task. */
  wake: (taskQueueId: string, hinted?: WakeHint) => void;
  /**
   * After a task's group open row is gone: publishes task-group-resolved if the group has no
   * unresolved task left (`empty`: known without a read, shared/tasks/groups.ts `close`;
   * shared/events/recorder.ts); throws if that could not be delivered.
   */
  groupResolved?: (g: { taskGroupId: string; schedulerId: string; taskId: string; runId: number }, empty: boolean) => Promise<void>;
  /** Turns a transition's step into the plan of its write (shared/plans/plan.ts). */
  plan: Planner;
  /** Events of task writes; without, writes publish nothing (tools, benches of the bare store). */
  taskEvents?: TaskEvents;
  /** Operator read models; without, none are kept. */
  readModels?: ReadModels;
  /** Who acts in this invocation (shared/ops/actor.ts): named in history rows; counts the run transitions it makes. */
  actor?: () => { actor?: string; transitions: number } | undefined;
  /** A claim was replayed to a worker that may have missed it: its events are delivered again (shared/events/recorder.ts). */
  redeliverRun?: (taskId: string, runId: number) => Promise<unknown>;
  /** An idempotent repeat of a createTask, report or cancel publishes that transition's events again (shared/events/recorder.ts). */
  republish?: (task: TaskRecord, which: RepeatedCall) => Promise<unknown>;
}
