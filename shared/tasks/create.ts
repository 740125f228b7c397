/**
 * createTask, following the reference order: schema (done by the caller), task-queue forms,
 * scopes, timestamps, `**` scopes, group, then an idempotent insert.
 */
import { isDeepStrictEqual } from 'node:util';
import * as slugid from 'slugid';
import { PRIORITIES, Priority } from './vocabulary';
import { ApiError, conflict, inputError } from '../errors';
import { TaskDeps } from './deps';
import { TaskDefinition, TaskStatus, encodeTask, isResolved, normalizeDate, taskState, taskStatus } from './model';
import { create, dependentAdded, schedule } from './transitions';
import { execute, executeCreate } from './executor';
import { trackDependencies } from './dependencies';

/** Clients' clocks may drift this far from ours when they stamp `created`. */
export const CREATED_DRIFT_MS = 15 * 60 * 1000;
const DAY_MS = 24 * 3600 * 1000;
/** Default `expires`: one year after the deadline. */
const DEFAULT_EXPIRY_MS = 365 * DAY_MS;

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
      throw inputError(`taskQueueId '${input.taskQueueId}' does not match provisionerId/workerType '${input.provisionerId}/${input.workerType}'`);
    }
    return { taskQueueId: input.taskQueueId, provisionerId, workerType };
  }
  if (!input.provisionerId || !input.workerType) {
    throw inputError('a task needs either taskQueueId or both provisionerId and workerType');
  }
  return { taskQueueId: `${input.provisionerId}/${input.workerType}`, provisionerId: input.provisionerId, workerType: input.workerType };
}

export async function createTask(d: TaskDeps, taskId: string, input: any, authorize: Authorize): Promise<TaskStatus> {
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
  const step = create({ taskId, definition, hintId: slugid.nice() }, now);
  encodeTask(step.next); // refuses oversized definitions before anything is written
  if (await executeCreate(d, step)) {
    if (step.next.runs.length > 0) return taskStatus(step.next);
  } else {
    const existing = await d.tasks.load(taskId);
    if (!existing) throw conflict(`task ${taskId} is being created or deleted concurrently; retry`);
    // Our group rows went in first: take back an open row the task does not have (read after it was written).
    if (existing.definition.taskGroupId !== taskGroupId) await d.groups.removeMember(taskGroupId, taskId, true);
    else if (isResolved(taskState(existing))) await d.groups.close(taskGroupId, taskId);
    if (!isDeepStrictEqual(existing.definition, definition)) {
      throw conflict(`taskId ${taskId} already used by another task with a different definition`);
    }
    // A retry of a create that may have stopped before its dependencies were tracked: redo that
    // (idempotently) while the task is still waiting for them.
    if (existing.runs.length > 0 || definition.dependencies.length === 0) return taskStatus(existing);
  }
  const task = step.next;
  const tracked = await trackDependencies(d, task, {
    flagRequired: async (requiredId) => {
      const r = await execute(d, requiredId, dependentAdded);
      return r && 'task' in r ? r.task : undefined;
    },
    schedule: async (id) => {
      const input = { hintId: slugid.nice() };
      const at = d.now();
      await execute(d, id, (t) => schedule(t, input, at));
    },
  });
  if (tracked.missing.length || tracked.expiring.length) {
    await d.groups.removeMember(taskGroupId, taskId, true);
    const parts: string[] = [];
    if (tracked.missing.length) parts.push(`these dependencies do not exist: ${tracked.missing.join(', ')}`);
    if (tracked.expiring.length) parts.push(`these dependencies expire before the task's deadline: ${tracked.expiring.join(', ')}`);
    throw new ApiError('InputError', `createTask: ${parts.join('; ')}`);
  }
  return taskStatus((await d.tasks.load(taskId)) ?? task);
}
