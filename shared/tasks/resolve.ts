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
 * Claims a pending run. With a hintId (claimWork), only the hint the run was scheduled with may
 * claim it, so duplicate hints never yield two claims; without one (claimTask), a repeat by the
 * same worker is idempotent.
 */
export async function claimRun(d: TaskDeps, taskId: string, runId: number, worker: Worker, hintId: string | null, known?: TaskRecord): Promise<ClaimOutcome> {
  const t = known ?? (await d.tasks.load(taskId));
  if (!t) return { kind: 'task-not-found' };
  const now = d.now();
  if (deadlinePassed(t, now)) return { kind: 'conflict', reason: 'the task deadline has passed' };
  const run = t.runs[runId];
  if (!run) return { kind: 'conflict', reason: `run ${runId} does not exist` };
  const takenUntil = new Date(now.getTime() + d.config.claimTimeoutS * 1000).toJSON();
  const claimable = (x: TaskRecord) => {
    const r = x.runs[runId];
    return runId === x.runs.length - 1 && r.state === 'pending' && (hintId === null || r.hintId === hintId);
  };
  if (claimable(t)) {
    // The expiry trigger exists before the run is running.
    await d.triggers.claim(taskId, runId, takenUntil);
    const result = await d.tasks.modify(
      taskId,
      (x) => {
        if (!claimable(x)) return false;
        const r = x.runs[runId];
        Object.assign(r, { state: 'running', workerGroup: worker.workerGroup, workerId: worker.workerId, takenUntil, started: now.toJSON() });
        x.takenUntil = takenUntil;
        return true;
      },
      t,
    );
    if (!result) return { kind: 'task-not-found' };
    if (result.changed) return { kind: 'claimed', task: result.task, run: result.task.runs[runId] };
    return settleClaim(result.task, runId, worker, hintId);
  }
  return settleClaim(t, runId, worker, hintId);
}

function settleClaim(t: TaskRecord, runId: number, worker: Worker, hintId: string | null): ClaimOutcome {
  const r = t.runs[runId];
  const isLast = runId === t.runs.length - 1;
  // claimTask is idempotent for the worker that holds the claim; hints never re-claim.
  if (hintId === null && isLast && r.state === 'running' && r.workerGroup === worker.workerGroup && r.workerId === worker.workerId) {
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
  await d.triggers.claim(taskId, runId, takenUntil);
  const result = await d.tasks.modify(
    taskId,
    (x) => {
      if (!ok(x)) return false;
      const r = x.runs[runId];
      if (r.takenUntil && r.takenUntil >= takenUntil) return false;
      r.takenUntil = takenUntil;
      x.takenUntil = takenUntil;
      return true;
    },
    t,
  );
  if (!result || !ok(result.task)) throw conflict(`run ${runId} of task ${taskId} is not running (it was resolved, canceled or overtaken)`);
  return { task: result.task, run: result.task.runs[runId] };
}

// ---- resolution ----

export type Outcome = { state: 'completed' } | { state: 'failed' } | { state: 'exception'; reason: ReasonResolved };

function reasonOf(o: Outcome): ReasonResolved {
  return o.state === 'exception' ? o.reason : o.state;
}

/**
 * Resolves a running run. Repeating the same outcome is idempotent (200); a different outcome, or a
 * run that was never claimed, is a conflict. A retrying exception adds a pending run whose hint is
 * put first.
 */
export async function resolveRun(d: TaskDeps, taskId: string, runId: number, outcome: Outcome): Promise<TaskStatus> {
  const { task: t } = requireRun(await d.tasks.load(taskId), taskId, runId);
  const reason = reasonOf(outcome);
  const retryAs = RETRY_REASON[reason];
  const resolvable = (x: TaskRecord) => runId === x.runs.length - 1 && x.runs[runId].state === 'running';
  let hintId: string | undefined;
  if (resolvable(t) && retryAs && t.retriesLeft > 0 && t.runs.length < MAX_RUNS) {
    hintId = slugid.nice();
    await d.pending.put(t.definition.taskQueueId, t.definition.priority, taskId, runId + 1, hintId, t.definition.deadline);
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
      if (retryAs && x.retriesLeft > 0 && x.runs.length < MAX_RUNS && hintId) {
        x.retriesLeft--;
        x.runs.push({ runId: runId + 1, state: 'pending', reasonCreated: retryAs, scheduled: now, hintId });
      }
      return true;
    },
    t,
  );
  if (!result) throw notFound(`task ${taskId} not found`);
  const r = result.task.runs[runId];
  if (r.state !== outcome.state || r.reasonResolved !== reason) {
    throw conflict(`run ${runId} of task ${taskId} is ${r.state}${r.reasonResolved ? ` (${r.reasonResolved})` : ''}; cannot resolve it as ${reason}`);
  }
  if (result.changed && lastRun(result.task)?.state === 'pending') d.wake(result.task.definition.taskQueueId);
  await propagate(d, result.task);
  // Uploads end with the report, so commit them now (one query when none is pending).
  await commitRunUploads(d.storage, taskId, runId);
  return taskStatus(result.task);
}

/** Claim expiry (reaper): acts only if the run still has the takenUntil the trigger was made for. */
export async function expireClaim(d: TaskDeps, taskId: string, runId: number, takenUntil: string): Promise<void> {
  const t = await d.tasks.load(taskId);
  if (!t) return;
  const matches = (x: TaskRecord) => {
    const r = x.runs[runId];
    return !!r && r.state === 'running' && r.takenUntil === takenUntil && runId === x.runs.length - 1;
  };
  if (!matches(t)) return;
  const now = d.now();
  if (new Date(takenUntil) > now) return; // visible early (clock skew): the trigger is re-put below
  if (deadlinePassed(t, now)) return; // the deadline trigger resolves it
  let hintId: string | undefined;
  if (t.retriesLeft > 0 && t.runs.length < MAX_RUNS) {
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
      if (hintId && x.retriesLeft > 0 && x.runs.length < MAX_RUNS) {
        x.retriesLeft--;
        x.runs.push({ runId: runId + 1, state: 'pending', reasonCreated: 'retry', scheduled: now.toJSON(), hintId });
      }
      return true;
    },
    t,
  );
  if (!result) return;
  if (result.changed) d.log.info('claim-expired', { taskId, runId, retried: lastRun(result.task)?.state === 'pending' });
  if (lastRun(result.task)?.state === 'pending') d.wake(result.task.definition.taskQueueId);
  await propagate(d, result.task);
}

/** Deadline (reaper): resolves every unresolved run, or adds an exception run to an unscheduled task. */
export async function resolveDeadline(d: TaskDeps, taskId: string, deadline: string): Promise<void> {
  const t = await d.tasks.load(taskId);
  if (!t || t.definition.deadline !== deadline) return;
  const now = d.now().toJSON();
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
  if (result.changed) d.log.info('deadline-exceeded', { taskId });
  await propagate(d, result.task);
}

/** The `resolved` trigger: finish propagation that a crash interrupted. */
export async function finishResolution(d: TaskDeps, taskId: string): Promise<void> {
  const t = await d.tasks.load(taskId);
  if (t) await propagate(d, t);
}

// ---- creator actions ----

export async function cancelTask(d: TaskDeps, t: TaskRecord): Promise<TaskStatus> {
  const now = d.now();
  if (deadlinePassed(t, now)) throw conflict(`task ${t.taskId} has passed its deadline`);
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
  await propagate(d, result.task);
  return taskStatus(result.task);
}

export async function rerunTask(d: TaskDeps, t: TaskRecord): Promise<TaskStatus> {
  const now = d.now();
  if (deadlinePassed(t, now)) throw conflict(`task ${t.taskId} has passed its deadline`);
  const state = taskState(t);
  if (state === 'pending' || state === 'running') return taskStatus(t);
  if (t.runs.length >= MAX_RUNS) throw conflict(`Maximum number of runs reached (${MAX_RUNS})`);
  const runId = t.runs.length;
  const hintId = slugid.nice();
  await d.pending.put(t.definition.taskQueueId, t.definition.priority, t.taskId, runId, hintId, t.definition.deadline);
  const result = await d.tasks.modify(
    t.taskId,
    (x) => {
      const s = taskState(x);
      if (s === 'pending' || s === 'running' || x.runs.length !== runId) return false;
      x.runs.push({ runId, state: 'pending', reasonCreated: 'rerun', scheduled: now.toJSON(), hintId });
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
