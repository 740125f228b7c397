/**
 * Run transitions after creation: claim, reclaim, resolution (with retries), claim expiry,
 * deadline, cancel, rerun and schedule. Each is a guarded read-modify-write of the task row; side
 * effects that must exist whenever the new state exists (hints, claim-expiry triggers) are written
 * *before* the row, so a crash leaves at most a stale message, never a task without its message.
 */
import * as slugid from 'slugid';
import { TaskDeps } from './deps';
import { ReasonCreated, ReasonResolved, Run, TaskRecord, TaskStatus, isResolved, taskState, taskStatus } from './model';
import { conflict, notFound } from '../errors';
import type { TriggerRef } from './triggers';
import { notifyDependents, scheduleRun0 } from './dependencies';
import { commitRunUploads } from '../artifacts/commit';

/** Taskcluster allows at most 50 runs per task. */
export const MAX_RUNS = 50;
/** Exception reasons after which the queue retries the task (while retriesLeft > 0). */
const RETRY_REASON: Partial<Record<ReasonResolved, ReasonCreated>> = {
  'worker-shutdown': 'retry',
  'intermittent-task': 'task-retry',
  'claim-expired': 'retry',
};

export interface Worker {
  workerGroup: string;
  workerId: string;
}

function deadlinePassed(t: TaskRecord, now: Date): boolean {
  return new Date(t.definition.deadline) <= now;
}

function lastRun(t: TaskRecord): Run | undefined {
  return t.runs[t.runs.length - 1];
}

function requireRun(t: TaskRecord | undefined, taskId: string, runId: number): { task: TaskRecord; run: Run } {
  if (!t) throw notFound(`task ${taskId} not found`);
  const run = t.runs[runId];
  if (!run) throw notFound(`run ${runId} of task ${taskId} not found`);
  return { task: t, run };
}

/**
 * After a write that resolved runs: their claim-expiry triggers, and the deadline trigger once the
 * task is finally resolved, have nothing left to do.
 */
async function dropTriggers(d: TaskDeps, t: TaskRecord, resolvedRuns: number[]): Promise<void> {
  const drops = resolvedRuns.map((i) => d.triggers.drop('claim', t.runs[i]?.claimTrigger));
  if (isResolved(taskState(t))) drops.push(d.triggers.drop('deadline', t.deadlineTrigger));
  await Promise.all(drops);
}

/** Propagates a final resolution to dependents once, recording that it was done. */
export async function propagate(d: TaskDeps, t: TaskRecord): Promise<void> {
  const last = t.runs.length - 1;
  if (!isResolved(taskState(t)) || !t.hasDependents || t.dependentsNotified >= last) return;
  await notifyDependents(d, t);
  await d.tasks.modify(t.taskId, (x) => {
    if (x.runs.length - 1 !== last || x.dependentsNotified >= last) return false;
    x.dependentsNotified = last;
    return true;
  });
}

// ---- claiming ----

export type ClaimOutcome = { kind: 'claimed'; task: TaskRecord; run: Run } | { kind: 'task-not-found' } | { kind: 'conflict'; reason: string };

/**
 * How a claim arrives: through a pending hint (claimWork) or directly (claimTask, `null`).
 * `replayWithinS`: the worker that claimed a run through this hint gets the same claim back if it
 * asks again this soon after (a retry of a claimWork whose response was lost to a crash).
 */
export type ClaimVia = { hintId: string; replayWithinS: number } | null;

/**
 * Claims a pending run. Through a hint, only the hint the run was scheduled with may claim it, so
 * duplicate hints never yield two claims; directly (claimTask), a repeat by the same worker is
 * idempotent.
 */
export async function claimRun(d: TaskDeps, taskId: string, runId: number, worker: Worker, via: ClaimVia, known?: TaskRecord): Promise<ClaimOutcome> {
  const t = known ?? (await d.tasks.load(taskId));
  if (!t) return { kind: 'task-not-found' };
  const now = d.now();
  if (deadlinePassed(t, now)) return { kind: 'conflict', reason: 'the task deadline has passed' };
  const run = t.runs[runId];
  if (!run) return { kind: 'conflict', reason: `run ${runId} does not exist` };
  const takenUntil = new Date(now.getTime() + d.config.claimTimeoutS * 1000).toJSON();
  const claimable = (x: TaskRecord) => {
    const r = x.runs[runId];
    return runId === x.runs.length - 1 && r.state === 'pending' && (via === null || r.hintId === via.hintId);
  };
  if (claimable(t)) {
    // The expiry trigger exists before the run is running.
    const claimTrigger = await d.triggers.claim(taskId, runId, takenUntil);
    const result = await d.tasks.modify(
      taskId,
      (x) => {
        if (!claimable(x)) return false;
        const r = x.runs[runId];
        Object.assign(r, { state: 'running', workerGroup: worker.workerGroup, workerId: worker.workerId, takenUntil, started: now.toJSON(), claimTrigger });
        x.takenUntil = takenUntil;
        return true;
      },
      t,
    );
    if (!result) return { kind: 'task-not-found' };
    if (result.changed) return { kind: 'claimed', task: result.task, run: result.task.runs[runId] };
    return settleClaim(result.task, runId, worker, via, now);
  }
  return settleClaim(t, runId, worker, via, now);
}

function settleClaim(t: TaskRecord, runId: number, worker: Worker, via: ClaimVia, now: Date): ClaimOutcome {
  const r = t.runs[runId];
  const isLast = runId === t.runs.length - 1;
  const mine = isLast && r.state === 'running' && r.workerGroup === worker.workerGroup && r.workerId === worker.workerId;
  if (mine && via === null) return { kind: 'claimed', task: t, run: r };
  if (mine && via && r.hintId === via.hintId && r.started && now.getTime() - new Date(r.started).getTime() < via.replayWithinS * 1000) {
    return { kind: 'claimed', task: t, run: r };
  }
  return { kind: 'conflict', reason: `run ${runId} is ${isLast ? r.state : 'not the latest run'}` };
}

export async function reclaimRun(d: TaskDeps, taskId: string, runId: number): Promise<{ task: TaskRecord; run: Run }> {
  const { task: t } = requireRun(await d.tasks.load(taskId), taskId, runId);
  const now = d.now();
  if (deadlinePassed(t, now)) throw conflict(`task ${taskId} has passed its deadline`);
  const ok = (x: TaskRecord) => runId === x.runs.length - 1 && x.runs[runId].state === 'running';
  if (!ok(t)) throw conflict(`run ${runId} of task ${taskId} is not running (it was resolved, canceled or overtaken)`);
  const takenUntil = new Date(now.getTime() + d.config.claimTimeoutS * 1000).toJSON();
  const claimTrigger = await d.triggers.claim(taskId, runId, takenUntil);
  let replaced: TriggerRef | undefined;
  const result = await d.tasks.modify(
    taskId,
    (x) => {
      if (!ok(x)) return false;
      const r = x.runs[runId];
      if (r.takenUntil && r.takenUntil >= takenUntil) return false;
      replaced = r.claimTrigger;
      r.takenUntil = takenUntil;
      r.claimTrigger = claimTrigger;
      x.takenUntil = takenUntil;
      return true;
    },
    t,
  );
  if (!result || !ok(result.task)) throw conflict(`run ${runId} of task ${taskId} is not running (it was resolved, canceled or overtaken)`);
  // The previous claim's trigger would only fire to find a later takenUntil.
  if (result.changed) await d.triggers.drop('claim', replaced);
  return { task: result.task, run: result.task.runs[runId] };
}

// ---- resolution ----

export type Outcome = { state: 'completed' } | { state: 'failed' } | { state: 'exception'; reason: ReasonResolved };

function reasonOf(o: Outcome): ReasonResolved {
  return o.state === 'exception' ? o.reason : o.state;
}

/**
 * Resolves a running run. Repeating the same outcome is idempotent (200); a different outcome, a
 * run that was never claimed, or a run that later runs have overtaken is a conflict. A retrying
 * exception adds a pending run whose hint is put first; repeating that report after the retry was
 * claimed is still a 200 and never resolves the task (the task's state is its last run's).
 */
export async function resolveRun(d: TaskDeps, taskId: string, runId: number, outcome: Outcome): Promise<TaskStatus> {
  const { task: t } = requireRun(await d.tasks.load(taskId), taskId, runId);
  const reason = reasonOf(outcome);
  const retryAs = RETRY_REASON[reason];
  const resolvable = (x: TaskRecord) => runId === x.runs.length - 1 && x.runs[runId].state === 'running';
  const retries = (x: TaskRecord) => !!retryAs && x.retriesLeft > 0 && x.runs.length < MAX_RUNS;
  let hintId: string | undefined;
  let net: TriggerRef | undefined;
  if (resolvable(t)) {
    if (retries(t)) {
      hintId = slugid.nice();
      await d.pending.put(t.definition.taskQueueId, t.definition.priority, taskId, runId + 1, hintId, t.definition.deadline);
    } else if (t.hasDependents) {
      net = await d.triggers.resolved(taskId, runId);
    }
  }
  const now = d.now().toJSON();
  const result = await d.tasks.modify(
    taskId,
    (x) => {
      if (!resolvable(x)) return false;
      const r = x.runs[runId];
      r.state = outcome.state;
      r.reasonResolved = reason;
      r.resolved = now;
      x.takenUntil = '';
      if (retries(x) && hintId) {
        x.retriesLeft--;
        x.runs.push({ runId: runId + 1, state: 'pending', reasonCreated: retryAs!, scheduled: now, hintId });
      }
      return true;
    },
    t,
  );
  if (!result) throw notFound(`task ${taskId} not found`);
  const after = result.task;
  const r = after.runs[runId];
  const last = after.runs.length - 1;
  // The run must still be the latest, or be followed only by the retry this very report created.
  const current = runId === last || (runId === last - 1 && !!retryAs && after.runs[last].reasonCreated === retryAs);
  if (r.state !== outcome.state || r.reasonResolved !== reason || !current) {
    throw conflict(
      `run ${runId} of task ${taskId} is ${r.state}${r.reasonResolved ? ` (${r.reasonResolved})` : ''}${current ? '' : ' and not the latest run'}; cannot resolve it as ${reason}`,
    );
  }
  if (result.changed && lastRun(after)?.state === 'pending') d.wake(after.definition.taskQueueId);
  if (result.changed) await dropTriggers(d, after, [runId]);
  await propagate(d, after);
  // Uploads end with the report, so commit them now (one query when none is pending).
  await commitRunUploads(d.storage, taskId, runId);
  if (net) await d.triggers.done(net).catch((err) => d.log.warn('resolved-net-delete-failed', { taskId, error: String(err?.message ?? err) }));
  return taskStatus(after);
}

/** What a trigger handler asks of the reaper: delete the message (done) or show it again later. */
export type TriggerResult = void | { retryAfterS: number };

function secondsUntil(at: string, now: Date): number {
  return Math.max(1, Math.ceil((new Date(at).getTime() - now.getTime()) / 1000));
}

/**
 * Claim expiry (reaper): acts only if the run still has the takenUntil the trigger was made for.
 * The run keeps that takenUntil after expiring, so a re-delivered trigger (the reaper crashed after
 * the write) recognises its own work and finishes the side effects.
 */
export async function expireClaim(d: TaskDeps, taskId: string, runId: number, takenUntil: string): Promise<TriggerResult> {
  const t = await d.tasks.load(taskId);
  if (!t) return;
  const matches = (x: TaskRecord) => {
    const r = x.runs[runId];
    return !!r && r.state === 'running' && r.takenUntil === takenUntil && runId === x.runs.length - 1;
  };
  const r0 = t.runs[runId];
  if (r0 && r0.state === 'exception' && r0.reasonResolved === 'claim-expired' && r0.takenUntil === takenUntil) {
    await propagate(d, t);
    return;
  }
  if (!matches(t)) return;
  const now = d.now();
  if (new Date(takenUntil) > now) return { retryAfterS: secondsUntil(takenUntil, now) }; // visible early (clock skew)
  if (deadlinePassed(t, now)) return; // the deadline trigger resolves it
  const retries = (x: TaskRecord) => x.retriesLeft > 0 && x.runs.length < MAX_RUNS;
  let hintId: string | undefined;
  if (retries(t)) {
    hintId = slugid.nice();
    await d.pending.put(t.definition.taskQueueId, t.definition.priority, taskId, runId + 1, hintId, t.definition.deadline);
  }
  const result = await d.tasks.modify(
    taskId,
    (x) => {
      if (!matches(x)) return false;
      const r = x.runs[runId];
      Object.assign(r, { state: 'exception', reasonResolved: 'claim-expired', resolved: now.toJSON() });
      x.takenUntil = '';
      if (hintId && retries(x)) {
        x.retriesLeft--;
        x.runs.push({ runId: runId + 1, state: 'pending', reasonCreated: 'retry', scheduled: now.toJSON(), hintId });
      }
      return true;
    },
    t,
  );
  if (!result) return;
  if (result.changed) {
    d.log.info('claim-expired', { taskId, runId, retried: lastRun(result.task)?.state === 'pending' });
    await dropTriggers(d, result.task, []);
    // Uploads the worker finished before it went silent would otherwise wait for a first read.
    await commitRunUploads(d.storage, taskId, runId);
  }
  if (lastRun(result.task)?.state === 'pending') d.wake(result.task.definition.taskQueueId);
  await propagate(d, result.task);
}

/**
 * Deadline (reaper): resolves every unresolved run, or adds an exception run to an unscheduled
 * task. A resolved task is left alone, but an interrupted propagation is finished.
 */
export async function resolveDeadline(d: TaskDeps, taskId: string, deadline: string): Promise<TriggerResult> {
  const t = await d.tasks.load(taskId);
  if (!t || t.definition.deadline !== deadline) return;
  const nowDate = d.now();
  if (new Date(deadline) > nowDate) return { retryAfterS: secondsUntil(deadline, nowDate) }; // visible early (clock skew)
  const now = nowDate.toJSON();
  const result = await d.tasks.modify(
    taskId,
    (x) => {
      if (isResolved(taskState(x))) return false;
      if (x.runs.length === 0) {
        x.runs.push({ runId: 0, state: 'exception', reasonCreated: 'exception', reasonResolved: 'deadline-exceeded', scheduled: now, resolved: now });
      }
      for (const r of x.runs) {
        if (r.state === 'pending' || r.state === 'running') Object.assign(r, { state: 'exception', reasonResolved: 'deadline-exceeded', resolved: now });
      }
      x.takenUntil = '';
      return true;
    },
    t,
  );
  if (!result) return;
  if (result.changed) {
    d.log.info('deadline-exceeded', { taskId });
    const wasRunning = t.runs.filter((r) => r.state === 'running').map((r) => r.runId);
    await Promise.all(wasRunning.map((i) => d.triggers.drop('claim', result.task.runs[i]?.claimTrigger)));
    for (const i of wasRunning) await commitRunUploads(d.storage, taskId, i);
  }
  await propagate(d, result.task);
}

/** The `resolved` trigger: finish propagation that a crash interrupted. */
export async function finishResolution(d: TaskDeps, taskId: string): Promise<void> {
  const t = await d.tasks.load(taskId);
  if (t) await propagate(d, t);
}

// ---- creator actions ----

export async function cancelTask(d: TaskDeps, t: TaskRecord): Promise<TaskStatus> {
  return (await cancelTaskOnce(d, t)).status;
}

/** cancelTask, also telling whether this call was the one that cancelled it (for cancelTaskGroup). */
export async function cancelTaskOnce(d: TaskDeps, t: TaskRecord): Promise<{ status: TaskStatus; changed: boolean }> {
  const now = d.now();
  if (deadlinePassed(t, now)) throw conflict(`task ${t.taskId} has passed its deadline`);
  const net = t.hasDependents && !isResolved(taskState(t)) ? await d.triggers.resolved(t.taskId, Math.max(0, t.runs.length - 1)) : undefined;
  const result = await d.tasks.modify(
    t.taskId,
    (x) => {
      const last = lastRun(x);
      if (!last) {
        x.runs.push({ runId: 0, state: 'exception', reasonCreated: 'exception', reasonResolved: 'canceled', scheduled: now.toJSON(), resolved: now.toJSON() });
      } else if (last.state === 'pending' || last.state === 'running') {
        Object.assign(last, { state: 'exception', reasonResolved: 'canceled', resolved: now.toJSON() });
      } else return false;
      x.takenUntil = '';
      return true;
    },
    t,
  );
  if (!result) throw notFound(`task ${t.taskId} not found`);
  if (result.changed) {
    const canceled = result.task.runs.length - 1;
    await dropTriggers(d, result.task, [canceled]);
    if (result.task.runs[canceled].workerGroup) await commitRunUploads(d.storage, t.taskId, canceled);
  }
  await propagate(d, result.task);
  if (net) await d.triggers.done(net).catch((err) => d.log.warn('resolved-net-delete-failed', { taskId: t.taskId, error: String(err?.message ?? err) }));
  return { status: taskStatus(result.task), changed: result.changed };
}

export async function rerunTask(d: TaskDeps, t: TaskRecord): Promise<TaskStatus> {
  const now = d.now();
  if (deadlinePassed(t, now)) throw conflict(`task ${t.taskId} has passed its deadline`);
  const state = taskState(t);
  if (state === 'pending' || state === 'running') return taskStatus(t);
  if (t.runs.length >= MAX_RUNS) throw conflict(`Maximum number of runs reached (${MAX_RUNS})`);
  const runId = t.runs.length;
  const hintId = slugid.nice();
  // The resolution deleted the deadline trigger; the task is unresolved again, so it needs one.
  const deadlineTrigger = await d.triggers.deadline(t.taskId, t.definition.deadline);
  await d.pending.put(t.definition.taskQueueId, t.definition.priority, t.taskId, runId, hintId, t.definition.deadline);
  const result = await d.tasks.modify(
    t.taskId,
    (x) => {
      const s = taskState(x);
      if (s === 'pending' || s === 'running' || x.runs.length !== runId) return false;
      x.runs.push({ runId, state: 'pending', reasonCreated: 'rerun', scheduled: now.toJSON(), hintId });
      x.deadlineTrigger = deadlineTrigger;
      x.retriesLeft = Math.min(x.definition.retries, MAX_RUNS - x.runs.length);
      x.takenUntil = '';
      return true;
    },
    t,
  );
  if (!result) throw notFound(`task ${t.taskId} not found`);
  if (result.changed) d.wake(t.definition.taskQueueId);
  return taskStatus(result.task);
}

export async function scheduleTask(d: TaskDeps, t: TaskRecord): Promise<TaskStatus> {
  if (deadlinePassed(t, d.now())) throw conflict(`task ${t.taskId} has passed its deadline`);
  const after = await scheduleRun0(d, t.taskId, t);
  if (!after) throw notFound(`task ${t.taskId} not found`);
  return taskStatus(after);
}

/**
 * Gives a pending run a fresh hint (its old one was lost or hidden for far too long). The new hint
 * goes first; the row then names it, so the old hint, if it ever shows up again, claims nothing.
 */
export async function rehintRun(d: TaskDeps, taskId: string, runId: number, staleHintId: string | undefined): Promise<boolean> {
  const t = await d.tasks.load(taskId);
  const still = (x: TaskRecord) => runId === x.runs.length - 1 && x.runs[runId].state === 'pending' && x.runs[runId].hintId === staleHintId;
  if (!t || !still(t) || deadlinePassed(t, d.now())) return false;
  const hintId = slugid.nice();
  await d.pending.put(t.definition.taskQueueId, t.definition.priority, taskId, runId, hintId, t.definition.deadline);
  const result = await d.tasks.modify(
    taskId,
    (x) => {
      if (!still(x)) return false;
      x.runs[runId].hintId = hintId;
      return true;
    },
    t,
  );
  if (result?.changed) d.wake(t.definition.taskQueueId);
  return !!result?.changed;
}
