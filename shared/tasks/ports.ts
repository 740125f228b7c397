/**
 * What the task store's domain functions need (concurrency keys, the lifecycle below it), passed in
 * as one argument. The lifecycle's own ports extend it (shared/lifecycle/ports.ts).
 */
import type { Storage } from '../storage/storage';
import type { TaskStore } from './store';
import type { PendingQueues } from './pending';
import type { Triggers } from './triggers';
import type { TaskGroups } from './groups';
import type { ExpiryIndex } from './expiry';
import type { Logger } from '../log';
import type { Priority } from './vocabulary';
import type { TaskRecord } from './model';

/**
 * A claimWork of this instance waiting on a task queue, taken out of its line for a task being
 * created here: run 0 is claimed for its worker in the create's own write (shared/work/poller.ts).
 */
export interface WaitingClaim {
  worker: { workerGroup: string; workerId: string };
  /** The create's write claimed run 0 for this worker: the claimWork answers with it. */
  claimed(task: TaskRecord): void;
  /** The create claimed nothing (a repeat, a refusal, a failure): the claimWork waits on in its place. */
  giveBack(): void;
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
  /** Takes the claimWork of this instance that has waited longest on a task queue, if any (none where no pollers run). */
  waiting?: (taskQueueId: string) => WaitingClaim | undefined;
}
