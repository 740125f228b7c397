/**
 * Scheduling controls beyond Taskcluster's lifecycle: priority changes (Taskcluster's
 * changeTaskPriority / changeTaskGroupPriority, RFC 190) and declaring a worker gone.
 */
import { RouteDef, ApiRequest, ok } from '../types';
import { notFound } from '../../errors';
import { TaskRecord, isResolved, taskState } from '../../tasks/model';
import { changeTaskPriority, suspendRun } from '../../lifecycle/resolve';
import { mapLimit } from '../../limit';
import { pagesOf } from '../../storage/storage';
import type { Priority } from '../../tasks/vocabulary';
import { declareWorkerGone } from '../../work/worker-gone';
import { describeKey, heldKeys } from '../../tasks/concurrency-keys';
import { pageLimit } from '../continuation';
import { CONCURRENCY_KEY } from '../../tasks/vocabulary';
import { badArgs, inputError } from '../../errors';
import { groupPriorityChangedEvent } from '../../events/exchanges';
import * as slugid from 'slugid';

/** Task rows changed at once in a group-wide change. */
const GROUP_CONCURRENCY = 32;
/** Largest continuation a suspension may carry (UTF-8 JSON): it lives in the task row, beside the definition and runs. */
export const MAX_CONTINUATION_BYTES = 16 * 1024;
/** Waiting tasks listed for a concurrency key. */
const KEY_WAITERS_SHOWN = 100;
/** Member rows read per page of a group-wide change. */
const GROUP_PAGE = 1000;

async function loadTask(req: ApiRequest): Promise<TaskRecord> {
  const t = await req.services.tasks.load(req.params.taskId);
  if (!t) throw notFound(`task ${req.params.taskId} not found`);
  return t;
}

const statusOf = (err: unknown) => (err as { status?: number }).status;

export const schedulingRoutes: RouteDef[] = [
  {
    name: 'changeTaskPriority',
    title: 'Change Task Priority',
    description: [
      'Change the priority of an unresolved task. A pending run moves to the new priority at once',
      '(behind the tasks already waiting at that priority); a running run keeps its claim, and a',
      'retry or rerun is queued at the new priority. `task` and `status` show the new priority.',
      'A resolved task, or one past its deadline, cannot change (409).',
    ].join(' '),
    stability: 'experimental',
    output: 'task-status-response',
    service: 'queue',
    method: 'POST',
    route: '/task/<taskId>/priority',
    scopes: { AnyOf: ['queue:change-task-priority:<taskId>', 'queue:change-task-priority-in-queue:<taskQueueId>'] },
    input: 'change-priority-request',
    handler: async (req) => {
      const t = await loadTask(req);
      await req.authorize({ taskId: t.taskId, taskQueueId: t.definition.taskQueueId });
      const { status } = await changeTaskPriority(req.services, t, req.body.newPriority as Priority);
      return ok({ status });
    },
  },
  {
    name: 'changeTaskGroupPriority',
    title: 'Change Task Group Priority',
    description: [
      'Change the priority of every unresolved task of a task group, as `changeTaskPriority` does for',
      'one task. Answers with the tasks whose priority this call changed.',
    ].join(' '),
    stability: 'experimental',
    output: 'change-task-group-priority-response',
    service: 'queue',
    method: 'POST',
    route: '/task-group/<taskGroupId>/priority',
    scopes: 'queue:change-task-group-priority:<schedulerId>/<taskGroupId>',
    input: 'change-priority-request',
    handler: async (req) => {
      const svc = req.services;
      const meta = await svc.groups.meta(req.params.taskGroupId);
      if (!meta || new Date(meta.expires) < svc.now()) throw notFound(`task group ${req.params.taskGroupId} not found`);
      await req.authorize({ schedulerId: meta.schedulerId, taskGroupId: meta.taskGroupId });
      const newPriority = req.body.newPriority as Priority;
      const taskIds: string[] = [];
      const members = (c?: string) => svc.groups.memberPage(meta.taskGroupId, GROUP_PAGE, svc.now(), c);
      for await (const page of pagesOf(members)) {
        await mapLimit(page.taskIds, GROUP_CONCURRENCY, async (id) => {
          const t = await svc.tasks.load(id);
          if (!t || t.definition.taskGroupId !== meta.taskGroupId || isResolved(taskState(t))) return;
          try {
            if ((await changeTaskPriority(svc, t, newPriority)).changed) taskIds.push(id);
          } catch (err) {
            // Resolved or past its deadline meanwhile, or gone: not ours to change.
            if (statusOf(err) !== 409 && statusOf(err) !== 404) throw err;
          }
        });
      }
      // Taskcluster's summary of the call; each task's own change is its task-priority-changed.
      await svc.events.publish(groupPriorityChangedEvent(meta, newPriority, taskIds.length, slugid.nice()));
      return ok({ taskGroupId: meta.taskGroupId, schedulerId: meta.schedulerId, newPriority, tasksAffected: taskIds.length, taskIds });
    },
  },
  {
    name: 'declareWorkerGone',
    title: 'Declare a Worker Gone',
    description: [
      'Tell the queue that a worker is gone for good (its instance was terminated or its machine died),',
      'as an operator or a provisioner knows before any claim expires. Every run the worker still holds',
      'resolves at once as `exception/worker-shutdown` and is retried while the task has retries left,',
      'instead of waiting for its claim to expire. Answers with the runs this call resolved; repeating',
      'it resolves nothing more.',
    ].join(' '),
    stability: 'experimental',
    output: 'worker-gone-response',
    service: 'queue',
    method: 'POST',
    route: '/provisioners/<provisionerId>/worker-types/<workerType>/workers/<workerGroup>/<workerId>/gone',
    scopes: 'queue:declare-worker-gone:<provisionerId>/<workerType>/<workerGroup>/<workerId>',
    handler: async (req) => {
      const { provisionerId, workerType, workerGroup, workerId } = req.params;
      return ok(await declareWorkerGone(req.services, `${provisionerId}/${workerType}`, workerGroup, workerId));
    },
  },
  {
    name: 'concurrencyKey',
    title: 'Concurrency Key',
    description: [
      'Who holds a concurrency key and who waits for it. A task names its key in the `concurrencyKey`',
      'field of its definition (an extension of this queue); at most one task per key runs at a time,',
      'and the others wait, in priority then creation order. `holder` is absent while the key is free;',
      '`waiting` lists up to 100 waiting tasks, next first (a task resolved meanwhile may still be listed).',
      "`holder` carries its run's current state and worker.",
    ].join(' '),
    stability: 'experimental',
    output: 'concurrency-key-response',
    service: 'queue',
    method: 'GET',
    route: '/concurrency-keys/<concurrencyKey>',
    scopes: 'queue:get-concurrency-key:<concurrencyKey>',
    handler: async (req) => {
      const key = req.params.concurrencyKey;
      if (!new RegExp(CONCURRENCY_KEY).test(key)) throw badArgs(`concurrencyKey must match ${CONCURRENCY_KEY}`);
      return ok(await describeKey(req.services, key, KEY_WAITERS_SHOWN));
    },
  },
  {
    name: 'listConcurrencyKeys',
    title: 'List Concurrency Keys',
    description: [
      'The concurrency keys held right now, in key order, each with the task run holding it (see',
      '`concurrencyKey` for who waits). A key whose holder resolved is listed until its release or',
      'the next task asking for it clears it.',
    ].join(' '),
    stability: 'experimental',
    output: 'list-concurrency-keys-response',
    service: 'queue',
    method: 'GET',
    route: '/concurrency-keys',
    query: ['continuationToken', 'limit'],
    scopes: 'queue:list-concurrency-keys',
    handler: async (req) => {
      const r = await heldKeys(req.services, pageLimit(req.query.limit), req.query.continuationToken);
      return ok({ concurrencyKeys: r.concurrencyKeys, ...(r.continuation ? { continuationToken: r.continuation } : {}) });
    },
  },
  {
    name: 'suspendRun',
    title: 'Suspend a Run',
    description: [
      'End a running run as `exception/suspended`, leaving a `continuation` (any JSON value, at most',
      '16 KiB as UTF-8 JSON) and an optional `resumeAt` (default now; at most the task deadline). The',
      'queue adds a run with `reasonCreated: resumed` that becomes pending at `resumeAt`; the claim of',
      'that run (by any worker), and of its retries, carries the `continuation`. Retries are not used up; a task has at',
      'most 50 runs. The worker that holds the run calls this with its run credentials.',
    ].join(' '),
    stability: 'experimental',
    output: 'task-status-response',
    service: 'queue',
    method: 'POST',
    route: '/task/<taskId>/runs/<runId>/suspend',
    scopes: 'queue:resolve-task:<taskId>/<runId>',
    input: 'suspend-run-request',
    handler: async (req) => {
      const t = await loadTask(req);
      const continuation = JSON.stringify(req.body.continuation);
      const bytes = Buffer.byteLength(continuation, 'utf8');
      if (bytes > MAX_CONTINUATION_BYTES) throw inputError(`continuation is ${bytes} bytes of JSON; at most ${MAX_CONTINUATION_BYTES} are accepted`);
      const resumeAt = new Date(req.body.resumeAt ?? req.services.now()).toJSON();
      if (resumeAt > t.definition.deadline) throw inputError(`resumeAt (${resumeAt}) must not be after the task deadline (${t.definition.deadline})`);
      return ok({ status: await suspendRun(req.services, t, Number(req.params.runId), continuation, resumeAt) });
    },
  },
];
