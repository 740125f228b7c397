/**
 * What the task domain functions need, passed in as one argument.
 */
import type { Storage } from '../storage/storage';
import type { TaskStore } from './store';
import type { PendingQueues } from './pending';
import type { Triggers } from './triggers';
import type { TaskGroups } from './groups';
import type { ExpiryIndex } from './expiry';
import type { Logger } from '../log';

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
  uploads: { commit: (taskId: string, runId: number) => Promise<void> };
  /** Wakes this instance's claimWork pollers for a task queue (no-op where none run). */
  wake: (taskQueueId: string) => void;
  /**
   * After a task's group open row is gone: publishes task-group-resolved if the group has no
   * unresolved task left (shared/events/recorder.ts); throws if that could not be delivered.
   */
  groupResolved?: (g: { taskGroupId: string; schedulerId: string; taskId: string; runId: number }) => Promise<void>;
  /** A claim was replayed to a worker that may have missed it: its events are delivered again (shared/events/recorder.ts). */
  redeliverRun?: (taskId: string, runId: number) => Promise<unknown>;
}
