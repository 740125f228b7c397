/**
 * Side effects of a task transition, as data. A transition (transitions.ts) returns them beside the
 * next task row; its plan (plan.ts) orders them around the row's ETag-guarded write, by phase, and
 * the executor (executor.ts) performs them:
 *  - `before`: must exist whenever the new state exists (a pending run's hint, a running run's
 *    claim-expiry trigger, an unresolved task's deadline trigger, a resolution's safety net). Put
 *    before the write, so a crash leaves at most a stale message or index row, never a state without its trigger.
 *  - `after`: cleanup and dispatch once the write took effect (deliver its events, drop triggers,
 *    wake pollers, commit uploads, propagate to dependents, delete the safety net). Lost in a crash, they are
 *    redone by a client retry (an idempotent repeat owes them again) or a trigger.
 * An effect's identity is its content: the executor performs a `before` effect once per call even
 * when an ETag race makes it recompute the transition (ids and `now` are chosen once per call).
 */
import type { ClaimRef, DeadlineSweep } from '../tasks/triggers';
import type { TaskExpiry } from '../tasks/task-expiry';
import type { Priority } from '../tasks/vocabulary';
import type { LogEventAt, LogFields } from '../log-events';

export type Effect =
  // ---- before ----
  /** A pending hint for the run; `hintId` is the only hint that may claim it; invisible until `visibleAt` when given (delayed start). */
  | {
      phase: 'before';
      kind: 'put-hint';
      taskQueueId: string;
      priority: Priority;
      taskId: string;
      runId: number;
      hintId: string;
      deadline: string;
      visibleAt?: string;
    }
  /**
   * The run's claim-expiry trigger; the executor stores its ref as `next.runs[runId].claimTrigger`.
   * `guard`: it guards the run's events, so it is a message (set by the executor for a claim
   * someone listens to, kept by a reclaim of a run that has one).
   */
  | { phase: 'before'; kind: 'put-claim-trigger'; taskId: string; runId: number; takenUntil: string; guard?: true }
  /**
   * The task's deadline trigger; the executor stores its ref as `next.deadlineTrigger`. `sweep`:
   * it also guards the write's events until their delivery re-arms it (set by the executor).
   * `expiry`: the task's, which an expiry-index row carries to its sweep (then a create's
   * `record-expiry` rides along: executor.ts `expiryWithDeadline`).
   */
  | { phase: 'before'; kind: 'put-deadline-trigger'; taskId: string; deadline: string; expiry: TaskExpiry; sweep?: DeadlineSweep }
  /** Fires later to finish propagation a crash cut short, unless `delete-safety-net` removes it. */
  | { phase: 'before'; kind: 'put-safety-net'; taskId: string; runId: number }
  /**
   * The task's and its group's expiry-index rows: every row a createTask may leave behind is found
   * when the task expires. Written now only when the deadline trigger is a message; else its
   * index row carries them (executor.ts `expiryWithDeadline`).
   */
  | { phase: 'before'; kind: 'record-expiry'; taskId: string; expires: string; taskGroupId: string; dependencies: string[] }
  /** Membership of the task group (may refuse: sealed group, other schedulerId). */
  | { phase: 'before'; kind: 'add-group-member'; taskGroupId: string; taskId: string; schedulerId: string; expires: string; created: string }
  /** The task is unresolved again (rerun): its group's open row exists before the row says so. */
  | { phase: 'before'; kind: 'reopen-group'; taskGroupId: string; taskId: string; expires: string }
  // ---- after ----
  | { phase: 'after'; kind: 'drop-trigger'; trigger: 'claim' | 'deadline'; ref: ClaimRef }
  /** Pollers of this instance look again, first at the pending queue the task's hint went to. */
  | { phase: 'after'; kind: 'wake'; taskQueueId: string; taskId: string; priority: Priority }
  /** Uploads end with the run: commit the ones still pending, and seal its live log. */
  | { phase: 'after'; kind: 'commit-uploads'; taskId: string; runId: number }
  /** Tell dependents of the task's final resolution, then record it (dependentsNotified). */
  | { phase: 'after'; kind: 'propagate'; taskId: string }
  /** A keyed run stopped running: free its concurrency key (if it still holds it) for the next waiter. */
  | { phase: 'after'; kind: 'release-key'; key: string; taskId: string; runId: number }
  /** The `put-safety-net` of the same task and run has nothing left to guard. */
  | { phase: 'after'; kind: 'delete-safety-net'; taskId: string; runId: number }
  /**
   * The task resolved for good: remove its group's open row and, if that left the group without
   * unresolved tasks, publish task-group-resolved. Until it succeeded, its guard stays (the task's
   * deadline message, or a safety net for a deadline in the expiry index: plan.ts `guardGroupClose`),
   * which fires on the resolved task and owes this again, so a crash never loses the event.
   * `alone`: the resolution's row says nobody joined the group the task created (`groupAlone`);
   * the write under that row's ETag proves it (a join changes the row), so the group is resolved
   * with it: no call left, no read before task-group-resolved (shared/tasks/groups.ts).
   */
  | {
      phase: 'after';
      kind: 'close-group';
      taskGroupId: string;
      schedulerId: string;
      taskId: string;
      runId: number;
      alone?: true;
    }
  /** A structured log line, written once the write took effect (its plan's `log`). */
  | ({ phase: 'after'; kind: 'log' } & LogEntry<LogEventAt<'info'>>);

/** A registered info event with its fields (shared/log-events.ts), one member per event. */
export type LogEntry<E extends LogEventAt<'info'>> = E extends LogEventAt<'info'> ? { event: E; fields: LogFields<E> } : never;

export type EffectOf<K extends Effect['kind']> = Extract<Effect, { kind: K }>;

/** Constructors, so transitions read as a list of what they owe. */
export const effect = {
  putHint: (taskQueueId: string, priority: Priority, taskId: string, runId: number, hintId: string, deadline: string, visibleAt?: string): Effect => ({
    phase: 'before',
    kind: 'put-hint',
    taskQueueId,
    priority,
    taskId,
    runId,
    hintId,
    deadline,
    ...(visibleAt ? { visibleAt } : {}),
  }),
  putClaimTrigger: (taskId: string, runId: number, takenUntil: string, guard?: boolean): Effect => ({
    phase: 'before',
    kind: 'put-claim-trigger',
    taskId,
    runId,
    takenUntil,
    ...(guard ? { guard: true as const } : {}),
  }),
  putDeadlineTrigger: (taskId: string, deadline: string, expiry: TaskExpiry): Effect => ({
    phase: 'before',
    kind: 'put-deadline-trigger',
    taskId,
    deadline,
    expiry,
  }),
  putSafetyNet: (taskId: string, runId: number): Effect => ({ phase: 'before', kind: 'put-safety-net', taskId, runId }),
  recordExpiry: (taskId: string, expires: string, taskGroupId: string, dependencies: string[]): Effect => ({
    phase: 'before',
    kind: 'record-expiry',
    taskId,
    expires,
    taskGroupId,
    dependencies,
  }),
  addGroupMember: (taskGroupId: string, taskId: string, schedulerId: string, expires: string, created: string): Effect => ({
    phase: 'before',
    kind: 'add-group-member',
    taskGroupId,
    taskId,
    schedulerId,
    expires,
    created,
  }),
  reopenGroup: (taskGroupId: string, taskId: string, expires: string): Effect => ({ phase: 'before', kind: 'reopen-group', taskGroupId, taskId, expires }),
  dropTrigger: (trigger: 'claim' | 'deadline', ref: ClaimRef): Effect => ({ phase: 'after', kind: 'drop-trigger', trigger, ref }),
  wake: (taskQueueId: string, taskId: string, priority: Priority): Effect => ({ phase: 'after', kind: 'wake', taskQueueId, taskId, priority }),
  commitUploads: (taskId: string, runId: number): Effect => ({ phase: 'after', kind: 'commit-uploads', taskId, runId }),
  propagate: (taskId: string): Effect => ({ phase: 'after', kind: 'propagate', taskId }),
  releaseKey: (key: string, taskId: string, runId: number): Effect => ({ phase: 'after', kind: 'release-key', key, taskId, runId }),
  deleteSafetyNet: (taskId: string, runId: number): Effect => ({ phase: 'after', kind: 'delete-safety-net', taskId, runId }),
  closeGroup: (taskGroupId: string, schedulerId: string, taskId: string, runId: number, alone?: true): Effect => ({
    phase: 'after',
    kind: 'close-group',
    taskGroupId,
    schedulerId,
    taskId,
    runId,
    ...(alone ? { alone } : {}),
  }),
  log: <E extends LogEventAt<'info'>>(event: E, fields: LogFields<E>): Effect => ({ phase: 'after', kind: 'log', event, fields }) as Effect,
};

/** The `put-safety-net` that a `delete-safety-net` deletes (same task and run). */
export function safetyNetOf(e: EffectOf<'delete-safety-net'>): EffectOf<'put-safety-net'> {
  return { phase: 'before', kind: 'put-safety-net', taskId: e.taskId, runId: e.runId };
}

/** An effect's identity: equal effects are one effect (performed once per call). */
export function effectKey(e: Effect): string {
  return JSON.stringify(e);
}
