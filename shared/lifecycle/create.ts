/**
 * createTask, following the reference order: schema (done by the caller), task-queue forms,
 * scopes, timestamps, `**` scopes, group, then an idempotent insert.
 */
import * as slugid from 'slugid';
import { PRIORITIES, Priority } from '../tasks/vocabulary';
import { ApiError, conflict, inputError } from '../errors';
import type { LifecycleDeps } from './ports';
import { TaskDefinition, TaskRecord, TaskStatus, encodeTask, normalizeDate, taskStatus, whilePending } from '../tasks/model';
import type { TriggerRef } from '../tasks/triggers';
import { create, createAgain, dependentAdded, schedule } from './transitions';
import { execute } from './executor';
import { Tracking, checkRequired, linkRequired, trackDependencies, writeRequirements, isBlocked } from './dependencies';

/** Clients' clocks may drift this far from ours when they stamp `created`. */
export const CREATED_DRIFT_MS = 15 * 60 * 1000;
const DAY_MS = 24 * 3600 * 1000;
/** Default `expires`: one year after the deadline. */
const DEFAULT_EXPIRY_MS = 365 * DAY_MS;
/**
 * Up to this many dependencies, createTask tracks them before it answers (3 storage calls each,
 * ~2.5 s for 1,000 on Azurite). Beyond, it answers once it has checked them (1 call each) and links
 * them in the background: 10,000 tracked at once took minutes, past the client's 30 s timeout.
 */
export const SYNC_DEPENDENCIES = 1000;

export type Authorize = (params: Record<string, unknown>) => Promise<void>;

export const CREATE_TASK_SCOPES = {
  AllOf: [
    { for: 'scope', in: 'scopes', each: '<scope>' },
    { for: 'route', in: 'routes', each: 'queue:route:<route>' },
    'queue:create-task:project:<projectId>',
    'queue:scheduler-id:<schedulerId>',
    { AnyOf: [{ for: 'priority', in: 'priorities', each: 'queue:create-task:<priority>:<provisionerId>/<workerType>' }] },
  ],
};

/** The requested priority and every higher one: a scope for a higher priority also allows lower. */
export function prioritiesAtOrAbove(p: Priority): Priority[] {
  return PRIORITIES.slice(0, PRIORITIES.indexOf(p) + 1);
}

export function resolveTaskQueue(input: { taskQueueId?: string; provisionerId?: string; workerType?: string }): {
  taskQueueId: string;
  provisionerId: string;
  workerType: string;
} {
  if (input.taskQueueId) {
    const [provisionerId, workerType] = input.taskQueueId.split('/');
    if ((input.provisionerId !== undefined && input.provisionerId !== provisionerId) || (input.workerType !== undefined && input.workerType !== workerType)) {
      throw inputError(`taskQueueId must match "provisionerId/workerType" (got '${input.taskQueueId}' and '${input.provisionerId}/${input.workerType}')`);
    }
    return { taskQueueId: input.taskQueueId, provisionerId, workerType };
  }
  if (!input.provisionerId || !input.workerType) {
    throw inputError('a task needs either taskQueueId or both provisionerId and workerType');
  }
  return { taskQueueId: `${input.provisionerId}/${input.workerType}`, provisionerId: input.provisionerId, workerType: input.workerType };
}

export async function createTask(d: LifecycleDeps, taskId: string, input: any, authorize: Authorize): Promise<TaskStatus> {
  const q = resolveTaskQueue(input);
  const taskGroupId: string = input.taskGroupId ?? taskId;
  const priority: Priority = input.priority;
  await authorize({
    ...q,
    taskId,
    taskGroupId,
    scopes: input.scopes,
    routes: input.routes,
    projectId: input.projectId,
    schedulerId: input.schedulerId,
    priorities: prioritiesAtOrAbove(priority),
  });

  const now = d.now();
  const created = normalizeDate(input.created, 'created');
  const deadline = normalizeDate(input.deadline, 'deadline');
  const expires = normalizeDate(input.expires ?? new Date(new Date(deadline).getTime() + DEFAULT_EXPIRY_MS).toJSON(), 'expires');
  if (Math.abs(new Date(created).getTime() - now.getTime()) > CREATED_DRIFT_MS) {
    throw inputError(`created (${created}) must be within 15 minutes of the current time (${now.toJSON()})`);
  }
  if (created > deadline) throw inputError('created must be before (or equal to) deadline');
  if (new Date(deadline) < now) throw inputError('deadline is in the past');
  if (new Date(deadline).getTime() > now.getTime() + d.config.maxTaskDeadlineDays * DAY_MS + CREATED_DRIFT_MS) {
    throw inputError(`deadline may be at most ${d.config.maxTaskDeadlineDays} days from now`);
  }
  if (expires < deadline) throw inputError('expires must be after (or equal to) deadline');
  const notBefore = input.notBefore === undefined ? undefined : normalizeDate(input.notBefore, 'notBefore');
  if (notBefore && notBefore >= deadline) throw inputError(`notBefore (${notBefore}) must be before the deadline (${deadline})`);
  const bad = (input.scopes as string[]).filter((s) => s.endsWith('**'));
  if (bad.length) throw inputError(`scopes must not end with '**': ${bad.join(', ')}`);

  const definition: TaskDefinition = {
    provisionerId: q.provisionerId,
    workerType: q.workerType,
    taskQueueId: q.taskQueueId,
    schedulerId: input.schedulerId,
    projectId: input.projectId,
    taskGroupId,
    dependencies: input.dependencies,
    requires: input.requires,
    routes: input.routes,
    priority,
    retries: input.retries,
    created,
    deadline,
    expires,
    scopes: input.scopes,
    payload: input.payload,
    metadata: input.metadata,
    tags: input.tags,
    extra: input.extra,
    // Only when given, so definitions without it compare equal to those created before it existed.
    ...(notBefore ? { notBefore } : {}),
    ...(input.concurrencyKey ? { concurrencyKey: input.concurrencyKey } : {}),
  };
  if (definition.dependencies.length === 0) return createScheduled(d, taskId, definition, now);
  const step = create({ taskId, definition, hintId: slugid.nice(), indexBuckets: d.pending.shardCount(q.taskQueueId) }, now);
  encodeTask(step.next); // refuses oversized definitions before anything is written
  // Missing or expiring dependencies are a 400 before anything is written, found at the first ones.
  const checked = await checkRequired(d, step.next);
  if (checked.missing.length || checked.expiring.length) throw refusedDependencies(checked);
  const background = definition.dependencies.length > (d.tuning?.syncDependencies ?? SYNC_DEPENDENCIES);
  // Put before the row: whatever happens to this call or to the background work, the tracking is finished.
  const net = background ? await d.triggers.tracking(taskId) : undefined;
  const task = written(taskId, await execute(d, taskId, (t) => createAgain(t, definition), undefined, { create: step }));
  // A repeat (`!r.changed`) may retry a create that stopped before its dependencies were tracked:
  // that is redone (idempotently) while the task still waits for them.
  if (task.runs.length > 0) return taskStatus(task);
  if (background) return trackInBackground(d, task, net!, checked.found);
  const tracked = await trackDependencies(d, task, taskTracking(d), checked.found);
  if (tracked.missing.length || tracked.expiring.length) {
    await d.groups.removeMember(taskGroupId, taskId, true, definition.created);
    throw refusedDependencies(tracked);
  }
  return taskStatus((await d.tasks.load(taskId)) ?? task);
}

/** The task a create wrote or found, or the conflict it met. */
function written(taskId: string, r: Awaited<ReturnType<typeof execute>>): TaskRecord {
  if (!r || 'retryAfterS' in r) throw conflict(`task ${taskId} is being created or deleted concurrently; retry`);
  if ('refused' in r) throw conflict(r.message);
  return r.task;
}

/**
 * A task without dependencies: run 0 is pending at once. When a claimWork of this instance waits on
 * the task queue, the same write claims run 0 for its worker and no hint is put (the hand-over);
 * createTask still answers with the task as created, pending.
 */
async function createScheduled(d: LifecycleDeps, taskId: string, definition: TaskDefinition, now: Date): Promise<TaskStatus> {
  const waiter = d.waiting?.(definition.taskQueueId);
  const claimFor = waiter && { worker: waiter.worker, claimTimeoutS: d.config.claimTimeoutS };
  const step = create({ taskId, definition, hintId: slugid.nice(), indexBuckets: d.pending.shardCount(definition.taskQueueId), claimFor }, now);
  // Run 0 runs with this call's hint: this call's write (only it knows that hint), also when the
  // insert met its own earlier success (a lost answer) and found the row.
  const mine = (t: TaskRecord | undefined): t is TaskRecord =>
    step.record.claimed === true && t?.runs[0]?.state === 'running' && t.runs[0].hintId === step.next.runs[0].hintId;
  try {
    encodeTask(step.next); // refuses oversized definitions before anything is written
  } catch (err) {
    waiter?.giveBack();
    throw err;
  }
  let task: TaskRecord;
  try {
    task = written(taskId, await execute(d, taskId, (t) => createAgain(t, definition), undefined, { create: step }));
  } catch (err) {
    // A failure after the row was written (its answer lost, or work after it): the claim stands, so the worker gets it.
    const found = waiter && (await d.tasks.load(taskId).catch(() => undefined));
    if (mine(found)) waiter!.claimed(found);
    else waiter?.giveBack();
    throw err;
  }
  if (!waiter) return taskStatus(task);
  if (!mine(task)) {
    waiter.giveBack();
    return taskStatus(task);
  }
  waiter.claimed(task);
  return taskStatus(whilePending(task, 0));
}

/** Task-row changes of dependency tracking, through the executor. */
function taskTracking(d: LifecycleDeps): Tracking {
  return {
    flagRequired: async (requiredId, known) => {
      const r = await execute(d, requiredId, dependentAdded, known);
      return r && 'task' in r ? r.task : undefined;
    },
    schedule: async (id) => {
      const input = { hintId: slugid.nice() };
      const at = d.now();
      await execute(d, id, (t) => schedule(t, input, at));
    },
  };
}

function refusedDependencies(tracked: { missing: string[]; expiring: string[] }): ApiError {
  const parts: string[] = [];
  if (tracked.missing.length) parts.push(`these dependencies do not exist: ${tracked.missing.join(', ')}`);
  if (tracked.expiring.length) parts.push(`these dependencies expire before the task's deadline: ${tracked.expiring.join(', ')}`);
  return new ApiError('InputError', `createTask: ${parts.join('; ')}`);
}

/**
 * Many dependencies (checked already, `found`): the requirement rows (100 per transaction) before
 * answering `unscheduled`; the dependent rows, flags and scheduling after. If this instance dies
 * midway, `net` fires and `finishTracking` redoes it.
 */
async function trackInBackground(d: LifecycleDeps, task: TaskRecord, net: TriggerRef, found: Map<string, TaskRecord>): Promise<TaskStatus> {
  await writeRequirements(d, task);
  const tracking = taskTracking(d);
  const work = (async () => {
    await linkRequired(d, task, tracking, found);
    if (!(await isBlocked(d, task.taskId))) await tracking.schedule(task.taskId);
    await d.triggers.done(net);
  })().catch((err) => d.log.warn('dependency-tracking-interrupted', { taskId: task.taskId, error: String(err?.message ?? err) }));
  d.background?.add(work);
  void work.finally(() => d.background?.delete(work));
  return taskStatus(task);
}

/**
 * The reaper's side of `trackInBackground` (its safety net fired): tracks a still unscheduled task's
 * dependencies again from the start, idempotently. A task whose create was refused (or never
 * finished checking and has a missing dependency) is removed, as createTask would have.
 */
export async function finishTracking(d: LifecycleDeps, taskId: string): Promise<void> {
  const t = await d.tasks.load(taskId);
  if (!t || t.runs.length > 0) return;
  const tracked = await trackDependencies(d, t, taskTracking(d));
  if (tracked.missing.length || tracked.expiring.length) await d.groups.removeMember(t.definition.taskGroupId, taskId, true, t.definition.created);
}
