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
}
