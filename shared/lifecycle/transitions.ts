/**
 * The task lifecycle as a state machine: one pure function per transition,
 * `(task, input, now) -> { record, next, effects } | refusal | later`. The record (records.ts)
 * names what happened, one name per row below. No I/O, no clock reads, no randomness: ids (hintId)
 * and `now` are chosen by the caller once per call, so a recomputation after an ETag race is
 * deterministic. The executor (executor.ts) loads, applies, plans the write from the record
 * (shared/lifecycle/planner.ts: the effects of effects.ts, history, events, read models), performs it.
 *
 * The task's state is its last run's state ('unscheduled' without runs); `=` is an idempotent repeat:
 *
 *   transition      unscheduled         pending             running                   completed/failed/exception
 *   create          -> pending (no dependencies) or unscheduled
 *   schedule        -> pending          =                   =                         =
 *   claim           409                 -> running          = same worker / 409       409
 *   reclaim         404                 409                 -> running (takenUntil)   409
 *   report          404                 409                 -> resolved, or pending   = same report / 409
 *                                                              (retry run)
 *   expireClaim     =                   =                   -> exception, or pending  = (owes propagation)
 *   deadline        -> exception (run)  -> exception        -> exception              = (owes propagation)
 *   cancel          -> exception (run)  -> exception        -> exception              = (owes propagation)
 *   rerun           -> pending (run)    =                   =                         -> pending (new run)
 *   rehint          =                   = (fresh hint)      =                         =
 *   workerGone      =                   =                   -> exception, or pending  =
 *                                                              (worker-shutdown; retry)
 *   suspend         404                 409                 -> pending (resumed run)  = same suspension / 409
 *   changePriority  -> (new priority)   -> (fresh hint)     -> (kept until retried)   409
 *   safetyNet       =                   =                   =                         = (owes propagation)
 *   propagated      bookkeeping only: dependentsNotified = last run
 *   dependentAdded  bookkeeping only: hasDependents = true
 *   markUploads     bookkeeping only: the run's uploads = true (before its first s3 artifact)
 *
 * An idempotent repeat (record `repeat`) returns the task unchanged with the effects it still owes
 * (propagation, upload commits). A refusal carries the 404/409 message. After the deadline, claim,
 * reclaim, cancel, rerun and scheduleTask refuse (409).
 */
import { isDeepStrictEqual } from 'node:util';
import { effect, Effect } from './effects';
import type { Ended, RecordOf, Replay, TransitionName, TransitionRecord } from './records';
import { ReasonCreated, ReasonResolved, Run, TaskDefinition, TaskRecord, isResolved, priorityOf, taskState } from '../tasks/model';
import type { Priority } from '../tasks/vocabulary';
import { INDEXED_DEADLINE, isMessage } from '../tasks/triggers';
import { inlineExpiry, type TaskExpiry } from '../tasks/task-expiry';

/** Taskcluster allows at most 50 runs per task. */
export const MAX_RUNS = 50;
/** Exception reasons after which the queue retries the task (while retriesLeft > 0), and the new run's reasonCreated. */
export const RETRY_REASON: Partial<Record<ReasonResolved, ReasonCreated>> = {
  'worker-shutdown': 'retry',
  'intermittent-task': 'task-retry',
  'claim-expired': 'retry',
};

// ---- results ----

/** What the transition did (its record), the task after it (the same object for a `repeat`) and what it owes. */
export interface Step<R extends TransitionRecord = TransitionRecord> {
  record: R;
  next: TaskRecord;
  effects: Effect[];
}
/** The transition does not apply: a 404 or 409 with this message. */
export interface Refusal {
  refused: 'not-found' | 'conflict';
  message: string;
  /** A keyed run may only be claimed once its concurrency key is held (shared/tasks/concurrency-keys.ts). */
  needsKey?: true;
}
/** A trigger arrived early (clock skew): show it again in this many seconds. */
export interface Later {
  retryAfterS: number;
}
export type Result = Step | Refusal | Later;

export const isRefusal = (r: Result): r is Refusal => 'refused' in r;
export const isLater = (r: Result): r is Later => 'retryAfterS' in r;

export interface Worker {
  workerGroup: string;
  workerId: string;
}
export type Outcome = { state: 'completed' } | { state: 'failed' } | { state: 'exception'; reason: ReasonResolved };

// ---- helpers ----

/** The table's `=`: `task` unchanged, owing `effects` again. */
const same = (of: TransitionName, task: TaskRecord, effects: Effect[] = [], replay?: Replay): Step<RecordOf<'repeat'>> => ({
  record: { name: 'repeat', of, ...(replay ? { replay } : {}) },
  next: task,
  effects,
});
const refuse = (message: string): Refusal => ({ refused: 'conflict', message });
const missing = (message: string): Refusal => ({ refused: 'not-found', message });
/**
 * The record a transition changes: its own copy of what transitions change (the runs, the
 * triggers' refs, the scalars). The definition (never changed once created) and the held history
 * (the planner replaces it, never changes it in place) are shared: cloning them was most of the
 * copy's cost.
 */
const copy = (t: TaskRecord): TaskRecord => {
  const { etag: _etag, definition, historyHeld, ...rest } = t;
  void _etag;
  return { ...structuredClone(rest), definition, ...(historyHeld ? { historyHeld } : {}) };
};
const lastRun = (t: TaskRecord): Run | undefined => t.runs[t.runs.length - 1];
const deadlinePassed = (t: TaskRecord, now: Date) => new Date(t.definition.deadline) <= now;
const isLatest = (t: TaskRecord, runId: number) => runId === t.runs.length - 1;
const running = (t: TaskRecord, runId: number) => isLatest(t, runId) && t.runs[runId].state === 'running';
export const takenUntilFrom = (now: Date, claimTimeoutS: number) => new Date(now.getTime() + claimTimeoutS * 1000).toJSON();
function secondsUntil(at: string, now: Date): number {
  return Math.max(1, Math.ceil((new Date(at).getTime() - now.getTime()) / 1000));
}

/** The delayed start of run 0 (`notBefore`), when it is still ahead. */
function delayedStart(x: TaskRecord, reasonCreated: ReasonCreated, now: Date): string | undefined {
  const at = x.definition.notBefore;
  return reasonCreated === 'scheduled' && at && new Date(at) > now ? at : undefined;
}

/** What the task's expiry rows need (shared/tasks/task-expiry.ts), as they carry it: its deadline's index row carries it. */
const expiryOf = (d: TaskDefinition): TaskExpiry => inlineExpiry({ expires: d.expires, taskGroupId: d.taskGroupId, dependencies: d.dependencies });

/** A pending run's start time when still ahead (delayed start): a fresh hint must stay hidden until then too. */
const dueLater = (r: Run, now: Date) => (new Date(r.scheduled) > now ? r.scheduled : undefined);

/**
 * The one way a pending run is added: the run, and its hint (put before the row). A delayed start
 * shows as `scheduled` in the future, and its hint stays invisible until then.
 */
function addPendingRun(x: TaskRecord, reasonCreated: ReasonCreated, now: Date, hintId: string): Effect {
  const runId = x.runs.length;
  const later = delayedStart(x, reasonCreated, now);
  x.runs.push({ runId, state: 'pending', reasonCreated, scheduled: later ?? now.toJSON(), hintId });
  const d = x.definition;
  return effect.putHint(d.taskQueueId, priorityOf(x), x.taskId, runId, hintId, d.deadline, later);
}

/** Whether a resolution with `reason` adds a retry run to `x`. */
function retries(x: TaskRecord, reason: ReasonResolved): boolean {
  return !!RETRY_REASON[reason] && x.retriesLeft > 0 && x.runs.length < MAX_RUNS;
}

/**
 * The one way a running run is resolved: its state and reason, and a retry run when the reason
 * retries and retries are left. Returns the retry's hint effect, if any.
 */
function resolveWithRetry(x: TaskRecord, runId: number, state: Run['state'], reason: ReasonResolved, now: Date, hintId: string): Effect | undefined {
  const retry = retries(x, reason);
  Object.assign(x.runs[runId], { state, reasonResolved: reason, resolved: now.toJSON() });
  x.takenUntil = '';
  if (!retry) return undefined;
  x.retriesLeft--;
  return addPendingRun(x, RETRY_REASON[reason]!, now, hintId);
}

/** The retry run a resolution added (it is the last run), for its record. */
const retryOf = (next: TaskRecord, hint: Effect | undefined): { retry?: number } => (hint ? { retry: next.runs.length - 1 } : {});

/** Propagation a finally resolved task still owes its dependents. */
function owedPropagation(t: TaskRecord): Effect[] {
  return isResolved(taskState(t)) && t.hasDependents && t.dependentsNotified < t.runs.length - 1 ? [effect.propagate(t.taskId)] : [];
}

/** A finally resolved task owes its group's bookkeeping (repeated after a crash cut it short; harmless otherwise). */
function owedGroupClose(t: TaskRecord): Effect[] {
  const d = t.definition;
  return isResolved(taskState(t)) ? [effect.closeGroup(d.taskGroupId, d.schedulerId, t.taskId, t.runs.length - 1, t.groupAlone)] : [];
}

/** A repeat of a keyed run's resolution still owes its release (lost if the first attempt crashed after the write). */
function owedRelease(t: TaskRecord, runId: number): Effect[] {
  const key = t.definition.concurrencyKey;
  return key && t.runs[runId] && isResolved(t.runs[runId].state) ? [effect.releaseKey(key, t.taskId, runId)] : [];
}

/** What a resolution owes after the write: wake pollers for a retry run, drop triggers that have nothing left to do. */
function afterResolution(before: TaskRecord, next: TaskRecord, opts: { dropClaims: number[]; dropDeadline: boolean }): Effect[] {
  const out: Effect[] = [];
  const last = lastRun(next);
  if (last?.state === 'pending') out.push(effect.wake(next.definition.taskQueueId, next.taskId, priorityOf(next)));
  for (const i of opts.dropClaims) {
    const ref = before.runs[i]?.claimTrigger;
    if (ref) out.push(effect.dropTrigger('claim', ref));
  }
  // The group's bookkeeping first: the executor drops the deadline trigger only once it is done.
  // An indexed one is not dropped (shared/tasks/triggers.ts): a safety net guards the bookkeeping then (plan.ts `guardGroupClose`).
  if (isResolved(taskState(next)) && !isResolved(taskState(before))) out.push(...owedGroupClose(next));
  const own = before.deadlineTrigger === INDEXED_DEADLINE ? undefined : before.deadlineTrigger;
  if (opts.dropDeadline && isResolved(taskState(next)) && own) out.push(effect.dropTrigger('deadline', own));
  const key = next.definition.concurrencyKey;
  for (const r of before.runs) {
    if (key && r.state === 'running' && next.runs[r.runId].state !== 'running') out.push(effect.releaseKey(key, next.taskId, r.runId));
  }
  return out;
}

// ---- transitions ----

export interface CreateInput {
  taskId: string;
  definition: TaskDefinition;
  /** The hint of run 0, when the task has no dependencies. */
  hintId: string;
  /** Index buckets of the task queue (its pending shard count); absent: 1. */
  indexBuckets?: number;
  /**
   * A claimWork waiting on the task queue: run 0, when due now, is claimed for its worker in the
   * create's own write, and no hint is put (nothing is pending in between).
   */
  claimFor?: { worker: Worker; claimTimeoutS: number };
}

/**
 * createTask: a new row, scheduled at once when it has no dependencies. Its expiry rows (or the
 * deadline row that carries them), group membership and deadline trigger come first, so every row
 * it may leave behind is found later.
 */
export function create(input: CreateInput, now: Date): Step<RecordOf<'create'>> {
  const { taskId, definition: def } = input;
  const next: TaskRecord = { taskId, definition: def, runs: [], retriesLeft: def.retries, takenUntil: '', hasDependents: false, dependentsNotified: -1 };
  if (input.indexBuckets && input.indexBuckets > 1) next.indexBuckets = input.indexBuckets;
  const effects: Effect[] = [
    effect.recordExpiry(taskId, def.expires, def.taskGroupId, def.dependencies),
    effect.addGroupMember(def.taskGroupId, taskId, def.schedulerId, def.expires, def.created),
    effect.putDeadlineTrigger(taskId, def.deadline, expiryOf(def)),
  ];
  if (def.dependencies.length === 0) {
    const hint = addPendingRun(next, 'scheduled', now, input.hintId);
    const handed = input.claimFor && claimedAtOnce(next, hint, input.claimFor, now);
    if (handed) return { record: { name: 'create', scheduled: true, claimed: true }, next: handed.next, effects: [...effects, ...handed.effects] };
    effects.push(hint, effect.wake(def.taskQueueId, taskId, priorityOf(next)));
  }
  return { record: { name: 'create', scheduled: next.runs.length > 0 }, next, effects };
}

/**
 * Run 0 of a new task claimed through its own hint, which is then never put: the claim's step, or
 * undefined when the run is not claimable at once (a delayed start, a concurrency key to take).
 */
function claimedAtOnce(next: TaskRecord, hint: Effect, claimFor: NonNullable<CreateInput['claimFor']>, now: Date): Step | undefined {
  if (hint.kind !== 'put-hint' || hint.visibleAt) return undefined;
  const r = claim(next, { runId: 0, worker: claimFor.worker, via: { hintId: hint.hintId, replayWithinS: 0 }, claimTimeoutS: claimFor.claimTimeoutS }, now);
  return isRefusal(r) || isLater(r) ? undefined : r;
}

/**
 * createTask for a taskId a task holds: the same definition is an idempotent repeat (Taskcluster
 * publishes task-defined again, and task-pending while run 0 is pending); another is refused.
 */
export function createAgain(task: TaskRecord, definition: TaskDefinition): Result {
  if (!isDeepStrictEqual(task.definition, definition)) return refuse(`taskId ${task.taskId} already used by another task with a different definition`);
  return same('create', task, [], { kind: 'defined', pendingRun0: task.runs.length === 1 && task.runs[0].state === 'pending' });
}

/** Run 0 of an unscheduled task (its dependencies are satisfied); nothing after the deadline. */
export function schedule(task: TaskRecord, input: { hintId: string }, now: Date): Step {
  if (task.runs.length > 0 || deadlinePassed(task, now)) return same('schedule', task);
  const next = copy(task);
  const hint = addPendingRun(next, 'scheduled', now, input.hintId);
  return { record: { name: 'schedule', runId: 0 }, next, effects: [hint, effect.wake(task.definition.taskQueueId, task.taskId, priorityOf(next))] };
}

/** scheduleTask: as `schedule`, refused after the deadline. */
export function scheduleTask(task: TaskRecord, input: { hintId: string }, now: Date): Result {
  if (deadlinePassed(task, now)) return refuse(`task ${task.taskId} has passed its deadline`);
  return schedule(task, input, now);
}

export interface ClaimInput {
  runId: number;
  worker: Worker;
  /**
   * Through a pending hint (claimWork) or directly (claimTask, `null`). `replayWithinS`: the
   * worker that claimed a run through this hint message (`messageId`) gets the same claim back if
   * it asks again this soon after (a retry of a claimWork whose response was lost to a crash).
   */
  via: { hintId: string; messageId?: string; replayWithinS: number } | null;
  claimTimeoutS: number;
  /** The hint a concurrency key was acquired with: a keyed run is claimed only while it still has it. */
  keyHeld?: string;
}

/**
 * Claims a pending run. Through a hint, only the hint the run was scheduled with may claim it, so
 * duplicate hints never yield two claims; directly (claimTask), a repeat by the same worker is
 * idempotent. The claim-expiry trigger exists before the run is running.
 */
export function claim(task: TaskRecord, input: ClaimInput, now: Date): Result {
  const { runId, worker, via } = input;
  if (deadlinePassed(task, now)) return refuse('the task deadline has passed');
  const r = task.runs[runId];
  if (!r) return refuse(`run ${runId} does not exist`);
  // claimTask must not jump a delayed start; a hint only shows up once it is due.
  if (via === null && r.state === 'pending' && new Date(r.scheduled) > now) return refuse(`run ${runId} is scheduled for ${r.scheduled}`);
  if (isLatest(task, runId) && r.state === 'pending' && (via === null || r.hintId === via.hintId)) {
    if (task.definition.concurrencyKey && input.keyHeld !== r.hintId) {
      return { refused: 'conflict', message: `run ${runId} waits for concurrency key ${task.definition.concurrencyKey}`, needsKey: true };
    }
    const next = copy(task);
    const takenUntil = takenUntilFrom(now, input.claimTimeoutS);
    Object.assign(next.runs[runId], { state: 'running', workerGroup: worker.workerGroup, workerId: worker.workerId, takenUntil, started: now.toJSON() });
    if (via?.messageId) next.runs[runId].claimedWith = via.messageId;
    next.takenUntil = takenUntil;
    return { record: { name: 'claim', runId }, next, effects: [effect.putClaimTrigger(task.taskId, runId, takenUntil)] };
  }
  const mine = running(task, runId) && r.workerGroup === worker.workerGroup && r.workerId === worker.workerId;
  // A repeated claim: its first answer (and its events) may have been lost, so they go again.
  if (mine && via === null) return same('claim', task, [], { kind: 'run', runId });
  // Only the very message that claimed: a copy of the hint (same hintId) is another message.
  const replay = mine && via && r.hintId === via.hintId && via.messageId !== undefined && r.claimedWith === via.messageId;
  if (replay && r.started && now.getTime() - new Date(r.started).getTime() < via.replayWithinS * 1000) return same('claim', task, [], { kind: 'run', runId });
  return refuse(`run ${runId} is ${isLatest(task, runId) ? r.state : 'not the latest run'}`);
}

/** reclaimTask: a later takenUntil for the running run; its old claim-expiry trigger is dropped. */
export function reclaim(task: TaskRecord, input: { runId: number; claimTimeoutS: number }, now: Date): Result {
  const { runId } = input;
  if (!task.runs[runId]) return missing(`run ${runId} of task ${task.taskId} not found`);
  if (deadlinePassed(task, now)) return refuse(`task ${task.taskId} has passed its deadline`);
  if (!running(task, runId)) return refuse(`run ${runId} of task ${task.taskId} is not running (it was resolved, canceled or overtaken)`);
  const takenUntil = takenUntilFrom(now, input.claimTimeoutS);
  const r = task.runs[runId];
  if (r.takenUntil && r.takenUntil >= takenUntil) return same('reclaim', task);
  const next = copy(task);
  Object.assign(next.runs[runId], { takenUntil });
  next.takenUntil = takenUntil;
  // The previous claim's trigger would only fire to find a later takenUntil. A message that guards
  // the run's events is followed by a message (shared/tasks/triggers.ts `claim`).
  const effects = [effect.putClaimTrigger(task.taskId, runId, takenUntil, isMessage(r.claimTrigger))];
  if (r.claimTrigger) effects.push(effect.dropTrigger('claim', r.claimTrigger));
  return { record: { name: 'reclaim', runId }, next, effects };
}

const reasonOf = (o: Outcome): ReasonResolved => (o.state === 'exception' ? o.reason : o.state);

/**
 * reportCompleted / reportFailed / reportException: resolves the running run, adding a retry run
 * for a retrying exception. Repeating the same report is idempotent (it still owes propagation and
 * the upload commit), even after the retry was claimed; a different outcome, a run never claimed
 * or one later runs overtook is refused. A final resolution of a task with dependents puts the
 * safety net first, so dependents are scheduled even if we crash before telling them.
 */
export function report(task: TaskRecord, input: { runId: number; outcome: Outcome; hintId: string }, now: Date): Result {
  const { runId, outcome } = input;
  const r = task.runs[runId];
  if (!r) return missing(`run ${runId} of task ${task.taskId} not found`);
  const reason = reasonOf(outcome);
  if (!running(task, runId)) {
    const last = task.runs.length - 1;
    const retryAs = RETRY_REASON[reason];
    // The run must still be the latest, or be followed only by the retry this very report created.
    const current = runId === last || (runId === last - 1 && !!retryAs && task.runs[last].reasonCreated === retryAs);
    if (r.state === outcome.state && r.reasonResolved === reason && current) {
      // Taskcluster publishes the resolution again (the same event ids here).
      const owed = [...owedPropagation(task), ...owedRelease(task, runId), ...owedGroupClose(task), effect.commitUploads(task.taskId, runId)];
      return same('report', task, owed, { kind: 'end', runId });
    }
    return refuse(
      `run ${runId} of task ${task.taskId} is ${r.state}${r.reasonResolved ? ` (${r.reasonResolved})` : ''}${current ? '' : ' and not the latest run'}; cannot resolve it as ${reason}`,
    );
  }
  const next = copy(task);
  const hint = resolveWithRetry(next, runId, outcome.state, reason, now, input.hintId);
  const net = !hint && task.hasDependents;
  return {
    record: { name: 'report', runId, ...retryOf(next, hint) },
    next,
    effects: [
      ...(hint ? [hint] : []),
      ...(net ? [effect.putSafetyNet(task.taskId, runId)] : []),
      ...afterResolution(task, next, { dropClaims: [runId], dropDeadline: true }),
      ...owedPropagation(next),
      // Uploads end with the report (one query when none is pending).
      effect.commitUploads(task.taskId, runId),
      ...(net ? [effect.deleteSafetyNet(task.taskId, runId)] : []),
    ],
  };
}

/**
 * Claim expiry (reaper): acts only if the run still has the takenUntil the trigger was made for.
 * The run keeps that takenUntil after expiring, so a re-delivered trigger (the reaper crashed after
 * the write) recognises its own work and finishes the propagation. After the deadline the deadline
 * trigger resolves the task instead.
 */
export function expireClaim(task: TaskRecord, input: { runId: number; takenUntil: string; hintId: string; indexed?: boolean }, now: Date): Result {
  const { runId, takenUntil } = input;
  const r = task.runs[runId];
  // A message guards its run's claim and end events: still here after the run ended with its
  // takenUntil, it was not dropped after their delivery, so they go again. An expiry-index row
  // (`indexed`) guards no events: found after the run ended, its delete was merely lost.
  const ended = !input.indexed && r && r.takenUntil === takenUntil && isResolved(r.state) ? ({ kind: 'run', runId } as const) : undefined;
  if (r && r.state === 'exception' && r.reasonResolved === 'claim-expired' && r.takenUntil === takenUntil) {
    return same('claim-expired', task, [...owedPropagation(task), ...owedRelease(task, runId), ...owedGroupClose(task)], ended);
  }
  if (!r || !running(task, runId) || r.takenUntil !== takenUntil) return same('claim-expired', task, [], ended);
  if (new Date(takenUntil) > now) return { retryAfterS: secondsUntil(takenUntil, now) };
  if (deadlinePassed(task, now)) return same('claim-expired', task);
  const next = copy(task);
  const hint = resolveWithRetry(next, runId, 'exception', 'claim-expired', now, input.hintId);
  return {
    record: { name: 'claim-expired', runId, ...retryOf(next, hint) },
    next,
    effects: [
      ...(hint ? [hint] : []),
      effect.log('claim-expired', { taskId: task.taskId, runId, retried: !!hint }),
      // The firing trigger is removed by the reaper; a row that fired first drops the run's message (an early row's twin).
      ...afterResolution(task, next, { dropClaims: input.indexed && isMessage(r.claimTrigger) ? [runId] : [], dropDeadline: true }),
      // Uploads the worker finished before it went silent would otherwise wait for a first read.
      effect.commitUploads(task.taskId, runId),
      ...owedPropagation(next),
    ],
  };
}

/**
 * Deadline (reaper): resolves every unresolved run as deadline-exceeded, or adds an exception run
 * to an unscheduled task. A resolved task is left alone, but an interrupted propagation is finished.
 */
export function deadline(task: TaskRecord, input: { deadline: string; indexed?: boolean }, now: Date): Result {
  if (task.definition.deadline !== input.deadline) return same('deadline', task);
  if (new Date(input.deadline) > now) return { retryAfterS: secondsUntil(input.deadline, now) };
  // A deadline message of the task's own that outlived the resolution: the group's bookkeeping was
  // cut short. An indexed deadline outlives every resolution: a safety net guards their bookkeeping.
  if (isResolved(taskState(task))) return same('deadline', task, [...owedPropagation(task), ...(input.indexed ? [] : owedGroupClose(task))]);
  const next = copy(task);
  const at = now.toJSON();
  const ended: Ended[] = [];
  if (next.runs.length === 0) {
    next.runs.push({ runId: 0, state: 'exception', reasonCreated: 'exception', reasonResolved: 'deadline-exceeded', scheduled: at, resolved: at });
    ended.push({ runId: 0, from: null });
  }
  const wasRunning = task.runs.filter((r) => r.state === 'running').map((r) => r.runId);
  for (const r of next.runs) {
    if (r.state === 'pending' || r.state === 'running') {
      ended.push({ runId: r.runId, from: r.state });
      Object.assign(r, { state: 'exception', reasonResolved: 'deadline-exceeded', resolved: at });
    }
  }
  next.takenUntil = '';
  return {
    record: { name: 'deadline', ended },
    next,
    effects: [
      effect.log('deadline-exceeded', { taskId: task.taskId }),
      ...afterResolution(task, next, { dropClaims: wasRunning, dropDeadline: false }),
      ...wasRunning.map((i) => effect.commitUploads(task.taskId, i)),
      ...owedPropagation(next),
    ],
  };
}

/** The resolution safety net fired: finish a propagation that a crash interrupted. */
export function safetyNet(task: TaskRecord): Step {
  return same('safety-net', task, [...owedPropagation(task), ...owedGroupClose(task)]);
}

/**
 * cancelTask: resolves the latest unresolved run as canceled (or adds a canceled run to an
 * unscheduled task). A resolved task is left alone (it still owes its propagation).
 */
export function cancel(task: TaskRecord, _input: Record<string, never>, now: Date): Result {
  if (deadlinePassed(task, now)) return refuse(`task ${task.taskId} has passed its deadline`);
  const last = lastRun(task);
  // Cancelling a cancelled task again: Taskcluster publishes its task-exception again.
  if (last && isResolved(last.state))
    return same('cancel', task, owedPropagation(task), last.reasonResolved === 'canceled' ? { kind: 'end', runId: last.runId } : undefined);
  const next = copy(task);
  const at = now.toJSON();
  if (!last) {
    next.runs.push({ runId: 0, state: 'exception', reasonCreated: 'exception', reasonResolved: 'canceled', scheduled: at, resolved: at });
  } else {
    Object.assign(next.runs[last.runId], { state: 'exception', reasonResolved: 'canceled', resolved: at });
  }
  next.takenUntil = '';
  const canceled = next.runs.length - 1;
  const netRun = Math.max(0, task.runs.length - 1);
  return {
    record: { name: 'cancel', ended: { runId: canceled, from: last ? (last.state as Ended['from']) : null } },
    next,
    effects: [
      ...(task.hasDependents ? [effect.putSafetyNet(task.taskId, netRun)] : []),
      ...afterResolution(task, next, { dropClaims: [canceled], dropDeadline: true }),
      ...(next.runs[canceled].workerGroup ? [effect.commitUploads(task.taskId, canceled)] : []),
      ...owedPropagation(next),
      ...(task.hasDependents ? [effect.deleteSafetyNet(task.taskId, netRun)] : []),
    ],
  };
}

/**
 * rerunTask: a new pending run for a resolved (or unscheduled) task, with fresh retries. The
 * resolution dropped the deadline trigger; the task is unresolved again, so it gets a new one.
 */
export function rerun(task: TaskRecord, input: { hintId: string }, now: Date): Result {
  if (deadlinePassed(task, now)) return refuse(`task ${task.taskId} has passed its deadline`);
  const state = taskState(task);
  if (state === 'pending' || state === 'running') return same('rerun', task);
  if (task.runs.length >= MAX_RUNS) return refuse(`Maximum number of runs reached (${MAX_RUNS})`);
  const next = copy(task);
  const hint = addPendingRun(next, 'rerun', now, input.hintId);
  next.retriesLeft = Math.min(next.definition.retries, MAX_RUNS - next.runs.length);
  next.takenUntil = '';
  const d = task.definition;
  return {
    record: { name: 'rerun', runId: next.runs.length - 1 },
    next,
    effects: [
      effect.putDeadlineTrigger(task.taskId, d.deadline, expiryOf(d)),
      effect.reopenGroup(d.taskGroupId, task.taskId, d.expires),
      hint,
      effect.wake(d.taskQueueId, task.taskId, priorityOf(next)),
    ],
  };
}

/**
 * A pending run whose hint is lost or hidden (shared/reaper/hints.ts) gets a fresh one. Only while
 * the run is still pending with the hint that was found missing; the old hint then claims nothing.
 */
export function rehint(task: TaskRecord, input: { runId: number; staleHintId: string | undefined; hintId: string }, now: Date): Step {
  const run = task.runs[input.runId];
  if (!isLatest(task, input.runId) || run.state !== 'pending' || run.hintId !== input.staleHintId || deadlinePassed(task, now)) return same('rehint', task);
  const next = copy(task);
  next.runs[input.runId].hintId = input.hintId;
  const d = next.definition;
  return {
    record: { name: 'rehint', runId: input.runId },
    next,
    effects: [
      effect.putHint(d.taskQueueId, priorityOf(next), task.taskId, input.runId, input.hintId, d.deadline, dueLater(run, now)),
      effect.wake(d.taskQueueId, task.taskId, priorityOf(next)),
    ],
  };
}

/**
 * A worker declared gone: its running run resolves at once as exception/worker-shutdown (retried
 * while retries are left), with everything a worker's own report of it owes. Only the run that
 * worker still holds: a run already resolved, overtaken or claimed by another worker is left alone.
 */
export function workerGone(task: TaskRecord, input: { runId: number; worker: Worker; hintId: string }, now: Date): Result {
  const r = task.runs[input.runId];
  const held = r && running(task, input.runId) && r.workerGroup === input.worker.workerGroup && r.workerId === input.worker.workerId;
  if (!held || deadlinePassed(task, now)) return same('worker-gone', task);
  const step = report(task, { runId: input.runId, outcome: { state: 'exception', reason: 'worker-shutdown' }, hintId: input.hintId }, now);
  if (!('next' in step) || step.record.name !== 'report') return step;
  const { name: _report, ...resolution } = step.record;
  return {
    record: { name: 'worker-gone', ...resolution },
    next: step.next,
    effects: [...step.effects, effect.log('worker-gone', { taskId: task.taskId, runId: input.runId, ...input.worker })],
  };
}

/**
 * suspendRun: the worker ends its running run as exception/suspended with a continuation (JSON);
 * a `resumed` run becomes pending at `resumeAt` (its hint hidden until then) and whoever claims it
 * gets the continuation. Retries are untouched; runs are bounded by MAX_RUNS. Repeating the same
 * suspension is idempotent; anything else on a run that is not running is refused.
 */
export function suspend(task: TaskRecord, input: { runId: number; continuation: string; resumeAt: string; hintId: string }, now: Date): Result {
  const { runId } = input;
  const r = task.runs[runId];
  if (!r) return missing(`run ${runId} of task ${task.taskId} not found`);
  const after = task.runs[runId + 1];
  if (r.reasonResolved === 'suspended' && after?.reasonCreated === 'resumed' && task.continuation === input.continuation) return same('suspend', task);
  if (!running(task, runId)) return refuse(`run ${runId} of task ${task.taskId} is ${r.state}; only a running run can be suspended`);
  if (deadlinePassed(task, now)) return refuse(`task ${task.taskId} has passed its deadline`);
  if (task.runs.length >= MAX_RUNS) return refuse(`Maximum number of runs reached (${MAX_RUNS}); the task cannot be suspended again`);
  const next = copy(task);
  Object.assign(next.runs[runId], { state: 'exception', reasonResolved: 'suspended', resolved: now.toJSON() });
  next.takenUntil = '';
  next.continuation = input.continuation;
  const resumeAt = new Date(input.resumeAt) > now ? input.resumeAt : undefined;
  const resumed = next.runs.length;
  next.runs.push({ runId: resumed, state: 'pending', reasonCreated: 'resumed', scheduled: resumeAt ?? now.toJSON(), hintId: input.hintId });
  const d = next.definition;
  return {
    record: { name: 'suspend', runId, resumed },
    next,
    effects: [
      effect.putHint(d.taskQueueId, priorityOf(next), task.taskId, resumed, input.hintId, d.deadline, resumeAt),
      ...afterResolution(task, next, { dropClaims: [runId], dropDeadline: false }),
      effect.commitUploads(task.taskId, runId),
    ],
  };
}

/**
 * changeTaskPriority: the task's runs are queued at `priority` from now on. A pending run gets a
 * fresh hint in the new priority's queue (its old hint then claims nothing); a running run keeps
 * its claim, and its retry is queued at the new priority. Refused once resolved or past the deadline.
 */
export function changePriority(task: TaskRecord, input: { priority: Priority; hintId: string }, now: Date): Result {
  if (isResolved(taskState(task))) return refuse(`task ${task.taskId} is resolved; its priority can no longer change`);
  if (deadlinePassed(task, now)) return refuse(`task ${task.taskId} has passed its deadline`);
  if (priorityOf(task) === input.priority) return same('change-priority', task);
  const next = copy(task);
  next.priority = input.priority;
  // Its task-priority-changed event rides on the `prioritized` history row (shared/lifecycle/planner.ts).
  const record: RecordOf<'change-priority'> = { name: 'change-priority', from: priorityOf(task), to: input.priority };
  const last = lastRun(next);
  if (last?.state !== 'pending') return { record, next, effects: [] };
  last.hintId = input.hintId;
  const d = next.definition;
  return {
    record,
    next,
    effects: [
      effect.putHint(d.taskQueueId, input.priority, task.taskId, last.runId, input.hintId, d.deadline, dueLater(last, now)),
      effect.wake(d.taskQueueId, task.taskId, input.priority),
    ],
  };
}

/** Bookkeeping after propagation: the resolution of run `last` has been told to dependents. */
export function propagated(task: TaskRecord, input: { last: number }): Step {
  if (task.runs.length - 1 !== input.last || task.dependentsNotified >= input.last) return same('propagated', task);
  const next = copy(task);
  next.dependentsNotified = input.last;
  return { record: { name: 'propagated', last: input.last }, next, effects: [] };
}

/** A dependent task was created: the task's resolution must now look for dependents. */
export function dependentAdded(task: TaskRecord): Step {
  if (task.hasDependents) return same('dependent-added', task);
  const next = copy(task);
  next.hasDependents = true;
  return { record: { name: 'dependent-added' }, next, effects: [] };
}

/**
 * The run's first s3 artifact is about to be created (shared/artifacts/create.ts), or its live log
 * (`liveLog`, shared/artifacts/live-log.ts, only while it runs): its resolution must commit the
 * uploads, or seal the log.
 */
export function markUploads(task: TaskRecord, input: { runId: number; liveLog?: true }): Step {
  const r = task.runs[input.runId];
  const log = input.liveLog && r?.state === 'running' && !r.liveLog;
  if (!r || (input.liveLog ? !log : r.uploads)) return same('mark-uploads', task);
  const next = copy(task);
  if (input.liveLog) next.runs[input.runId].liveLog = true;
  else next.runs[input.runId].uploads = true;
  return { record: { name: 'mark-uploads', runId: input.runId }, next, effects: [] };
}
