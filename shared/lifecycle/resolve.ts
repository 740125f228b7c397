/**
 * The task operations after creation (claim, reclaim, reports, claim expiry, deadline, the safety
 * net, cancel, rerun, schedule): each picks its ids and `now` once, runs its transition
 * (transitions.ts) through the executor (executor.ts) and maps the outcome to what its caller
 * answers. The rules live in the transitions; crash ordering in the executor.
 */
import * as slugid from 'slugid';
import type { LifecycleDeps } from './ports';
import { Run, TaskRecord, TaskStatus, taskStatus } from '../tasks/model';
import { conflict, notFound } from '../errors';
import { Executed, execute, rehinter } from './executor';
import { acquireKey } from '../tasks/concurrency-keys';
import { effect } from './effects';
import * as T from './transitions';
import type { Later, Refusal } from './transitions';
import type { Priority } from '../tasks/vocabulary';

export type { Outcome, Worker } from './transitions';
export { MAX_RUNS } from './transitions';

type Executes = Executed | Refusal | Later | undefined;

/** An API call's outcome: the task, or its refusal as the Taskcluster error. */
function settled(taskId: string, r: Executes): Executed {
  if (!r) throw notFound(`task ${taskId} not found`);
  if ('refused' in r) throw r.refused === 'not-found' ? notFound(r.message) : conflict(r.message);
  if ('retryAfterS' in r) throw new Error(`task ${taskId}: unexpected retry-after`);
  return r;
}

// ---- claiming ----

export type ClaimOutcome = { kind: 'claimed'; task: TaskRecord; run: Run } | { kind: 'task-not-found' } | { kind: 'conflict'; reason: string };
export type ClaimVia = T.ClaimInput['via'];

/**
 * Claims a pending run through a hint (claimWork) or directly (claimTask, `via` null). `alongside`
 * runs once the claim stands, side by side with its index write (claimWork deletes the hint then).
 */
export async function claimRun(
  d: LifecycleDeps,
  taskId: string,
  runId: number,
  worker: T.Worker,
  via: ClaimVia,
  known?: TaskRecord,
  alongside?: () => Promise<void>,
): Promise<ClaimOutcome> {
  const input: T.ClaimInput = { runId, worker, via, claimTimeoutS: d.config.claimTimeoutS };
  const now = d.now();
  // Through a hint the run is almost always pending: its claim-expiry trigger goes out while the
  // row loads, instead of after (a refused claim leaves a stale trigger, harmless when it fires).
  // A row this instance holds loads at once: the plan's own put, which knows the trigger's kind, is as early.
  const early = via && !known && !d.tasks.recentRow?.(taskId) ? earlyClaimTrigger(d, taskId, runId, now) : undefined;
  const options = { early, alongside };
  let seen: TaskRecord | undefined;
  let r = await execute(
    d,
    taskId,
    (t) => {
      seen = t;
      return T.claim(t, input, now);
    },
    known,
    options,
  );
  if (r && 'needsKey' in r && seen) {
    // A keyed run: take its concurrency key first (the run's hint is the fencing token), or wait in line.
    const t: TaskRecord = seen;
    if ((await acquireKey(d, t, runId, now, rehinter(d))) === 'busy') return { kind: 'conflict', reason: r.message };
    r = await execute(d, taskId, (x) => T.claim(x, { ...input, keyHeld: t.runs[runId].hintId }, now), t, options);
  }
  if (!r) return { kind: 'task-not-found' };
  if ('refused' in r) return { kind: 'conflict', reason: r.message };
  if ('retryAfterS' in r) throw new Error(`task ${taskId}: unexpected retry-after`);
  return { kind: 'claimed', task: r.task, run: r.task.runs[runId] };
}

/**
 * The claim-expiry trigger a claim at `now` owes (the same effect the claim transition returns):
 * its expiry-index row. A run someone listens to needs a message instead (its `guard`), which the
 * executor then puts as well; the row stays behind as a second trigger of the same claim: at
 * takenUntil one task read, and if the claim lapsed the expiry, which drops the message too.
 */
function earlyClaimTrigger(d: LifecycleDeps, taskId: string, runId: number, now: Date) {
  const takenUntil = T.takenUntilFrom(now, d.config.claimTimeoutS);
  return { effect: effect.putClaimTrigger(taskId, runId, takenUntil), ref: d.triggers.claim(taskId, runId, takenUntil) };
}

export async function reclaimRun(d: LifecycleDeps, taskId: string, runId: number): Promise<{ task: TaskRecord; run: Run }> {
  const input = { runId, claimTimeoutS: d.config.claimTimeoutS };
  const now = d.now();
  const { task } = settled(taskId, await execute(d, taskId, (t) => T.reclaim(t, input, now)));
  return { task, run: task.runs[runId] };
}

// ---- resolution ----

/** reportCompleted / reportFailed / reportException. */
export async function resolveRun(d: LifecycleDeps, taskId: string, runId: number, outcome: T.Outcome): Promise<TaskStatus> {
  const input = { runId, outcome, hintId: slugid.nice() };
  const now = d.now();
  return taskStatus(settled(taskId, await execute(d, taskId, (t) => T.report(t, input, now))).task);
}

/** What a trigger handler asks of the reaper: delete the message (done) or show it again later. */
/** `body`: what the trigger says when it shows again (replaced with the delay: one call). */
export type TriggerResult = void | { retryAfterS: number; body?: unknown };

async function onTrigger(d: LifecycleDeps, taskId: string, transition: (t: TaskRecord) => T.Result, known?: TaskRecord): Promise<TriggerResult> {
  const r = await execute(d, taskId, transition, known);
  if (r && 'retryAfterS' in r) return { retryAfterS: r.retryAfterS };
}

/** Claim expiry (reaper); `known`: the task as just read; `indexed`: kept in the expiry index, not a message of the run's own (shared/tasks/triggers.ts). */
export async function expireClaim(
  d: LifecycleDeps,
  taskId: string,
  runId: number,
  takenUntil: string,
  known?: TaskRecord,
  indexed = false,
): Promise<TriggerResult> {
  const input = { runId, takenUntil, hintId: slugid.nice(), indexed };
  const now = d.now();
  return onTrigger(d, taskId, (t) => T.expireClaim(t, input, now), known);
}

/** Deadline (reaper); `indexed`: kept in the expiry index, not a message of the task's own (shared/tasks/triggers.ts). */
export async function resolveDeadline(d: LifecycleDeps, taskId: string, deadline: string, indexed = false): Promise<TriggerResult> {
  const now = d.now();
  return onTrigger(d, taskId, (t) => T.deadline(t, { deadline, indexed }, now));
}

/** The `resolved` trigger: finish propagation that a crash interrupted. */
export async function finishResolution(d: LifecycleDeps, taskId: string): Promise<void> {
  await onTrigger(d, taskId, (t) => T.safetyNet(t));
}

// ---- creator actions ----

export async function cancelTask(d: LifecycleDeps, t: TaskRecord): Promise<TaskStatus> {
  return (await cancelTaskOnce(d, t)).status;
}

/** cancelTask, also telling whether this call was the one that cancelled it (for cancelTaskGroup). */
export async function cancelTaskOnce(d: LifecycleDeps, t: TaskRecord): Promise<{ status: TaskStatus; changed: boolean }> {
  const now = d.now();
  const { task, changed } = settled(t.taskId, await execute(d, t.taskId, (x) => T.cancel(x, {}, now), t));
  return { status: taskStatus(task), changed };
}

export async function rerunTask(d: LifecycleDeps, t: TaskRecord): Promise<TaskStatus> {
  const input = { hintId: slugid.nice() };
  const now = d.now();
  return taskStatus(settled(t.taskId, await execute(d, t.taskId, (x) => T.rerun(x, input, now), t)).task);
}

export async function scheduleTask(d: LifecycleDeps, t: TaskRecord): Promise<TaskStatus> {
  const input = { hintId: slugid.nice() };
  const now = d.now();
  return taskStatus(settled(t.taskId, await execute(d, t.taskId, (x) => T.scheduleTask(x, input, now), t)).task);
}

/** suspendRun: ends the run as suspended; a resumed run is pending at `resumeAt`. */
export async function suspendRun(d: LifecycleDeps, t: TaskRecord, runId: number, continuation: string, resumeAt: string): Promise<TaskStatus> {
  const input = { runId, continuation, resumeAt, hintId: slugid.nice() };
  const now = d.now();
  return taskStatus(settled(t.taskId, await execute(d, t.taskId, (x) => T.suspend(x, input, now), t)).task);
}

/** A worker declared gone: resolves the run it holds as exception/worker-shutdown; true if this call did. */
export async function workerGoneRun(d: LifecycleDeps, taskId: string, runId: number, worker: T.Worker): Promise<boolean> {
  const input = { runId, worker, hintId: slugid.nice() };
  const now = d.now();
  const r = await execute(d, taskId, (t) => T.workerGone(t, input, now));
  return !!r && 'changed' in r && r.changed;
}

/** changeTaskPriority: the task's status after the change (a repeat changes nothing). */
export async function changeTaskPriority(d: LifecycleDeps, t: TaskRecord, priority: Priority): Promise<{ status: TaskStatus; changed: boolean }> {
  const input = { priority, hintId: slugid.nice() };
  const now = d.now();
  const { task, changed } = settled(t.taskId, await execute(d, t.taskId, (x) => T.changePriority(x, input, now), t));
  return { status: taskStatus(task), changed };
}

/**
 * Gives a pending run a fresh hint (its old one was lost or hidden for far too long); true if this
 * call did. The new hint goes before the row, which then names it.
 */
export async function rehintRun(d: LifecycleDeps, taskId: string, runId: number, staleHintId: string | undefined): Promise<boolean> {
  const input = { runId, staleHintId, hintId: slugid.nice() };
  const now = d.now();
  const r = await execute(d, taskId, (t) => T.rehint(t, input, now));
  return !!r && 'changed' in r && r.changed;
}
