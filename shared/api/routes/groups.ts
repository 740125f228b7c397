/**
 * Task groups (list, get, seal, cancel) and the dependents listing. Listings page over member or
 * edge rows with opaque continuation tokens and load each listed task; rows whose task is gone
 * (expired, or left by a create that failed) are skipped, so a page may be short.
 */
import { RouteDef, ApiRequest, ok } from '../types';
import { conflict, notFound } from '../../errors';
import { decodeToken, encodeToken, isString, pageLimit } from '../continuation';
import { TaskRecord, definitionOf, isResolved, taskState, taskStatus } from '../../tasks/model';
import { cancelTaskOnce } from '../../lifecycle/resolve';
import { dependentPage } from '../../lifecycle/dependencies';
import { TaskGroupMeta } from '../../tasks/groups';
import { mapLimit } from '../../limit';
import { pagesOf } from '../../storage/storage';
import type { Services } from '../../services';

/** Task rows loaded at once for one listing page. */
const LOAD_CONCURRENCY = 32;
/** Member rows read per page while cancelling a whole group. */
const CANCEL_PAGE = 1000;

function groupInfo(m: TaskGroupMeta) {
  return { taskGroupId: m.taskGroupId, schedulerId: m.schedulerId, expires: m.expires, ...(m.sealed ? { sealed: m.sealed } : {}) };
}

async function loadAll(svc: Services, taskIds: string[], keep: (t: TaskRecord) => boolean): Promise<TaskRecord[]> {
  const loaded = await mapLimit(taskIds, LOAD_CONCURRENCY, (id) => svc.tasks.load(id));
  return loaded.filter((t): t is TaskRecord => !!t && keep(t));
}

const entry = (t: TaskRecord) => ({ status: taskStatus(t), task: definitionOf(t) });
const withToken = (c: string | undefined) => (c ? { continuationToken: encodeToken(c) } : {});

async function groupMeta(req: ApiRequest): Promise<TaskGroupMeta> {
  const meta = await req.services.groups.meta(req.params.taskGroupId);
  if (!meta || new Date(meta.expires) < req.services.now()) throw notFound(`task group ${req.params.taskGroupId} not found`);
  return meta;
}

export const groupRoutes: RouteDef[] = [
  {
    name: 'listTaskGroup',
    title: 'List Task Group',
    description: 'The tasks of a task group with their status, a page at a time.',
    stability: 'stable',
    output: 'list-task-group-response',
    service: 'queue',
    method: 'GET',
    route: '/task-group/<taskGroupId>/list',
    query: ['continuationToken', 'limit'],
    scopes: 'queue:list-task-group:<taskGroupId>',
    handler: async (req) => {
      const svc = req.services;
      const meta = await groupMeta(req);
      const page = await svc.groups.memberPage(meta.taskGroupId, pageLimit(req.query.limit), svc.now(), decodeToken(req.query.continuationToken, isString));
      const tasks = await loadAll(svc, page.taskIds, (t) => t.definition.taskGroupId === meta.taskGroupId);
      return ok({ ...groupInfo(meta), tasks: tasks.map(entry), ...withToken(page.continuation) });
    },
  },
  {
    name: 'getTaskGroup',
    title: 'Get Task Group',
    description: 'A task group: its scheduler, expiry and whether it is sealed.',
    stability: 'stable',
    output: 'task-group-response',
    service: 'queue',
    method: 'GET',
    route: '/task-group/<taskGroupId>',
    scopes: 'queue:list-task-group:<taskGroupId>',
    handler: async (req) => ok(groupInfo(await groupMeta(req))),
  },
  {
    name: 'sealTaskGroup',
    title: 'Seal Task Group',
    description: 'Seal a task group: no more tasks may be added to it.',
    stability: 'stable',
    output: 'task-group-response',
    service: 'queue',
    method: 'POST',
    route: '/task-group/<taskGroupId>/seal',
    scopes: 'queue:seal-task-group:<schedulerId>/<taskGroupId>',
    handler: async (req) => {
      const meta = await groupMeta(req);
      await req.authorize({ schedulerId: meta.schedulerId, taskGroupId: meta.taskGroupId });
      const now = req.services.now();
      // task-group-sealed: the sweep trigger exists before the seal, so a crash after it still delivers the event.
      const announce = meta.sealed ? undefined : await req.services.events.prepareGroupSealed(meta, now.toJSON());
      const sealed = await req.services.groups.seal(meta.taskGroupId, now);
      if (!sealed) throw notFound(`task group ${meta.taskGroupId} not found`);
      if (sealed.sealed === now.toJSON()) await req.services.events.delivered(announce);
      return ok(groupInfo(sealed));
    },
  },
  {
    name: 'cancelTaskGroup',
    title: 'Cancel Task Group',
    description: 'Cancel every unresolved task of a sealed task group.',
    stability: 'stable',
    output: 'cancel-task-group-response',
    service: 'queue',
    method: 'POST',
    route: '/task-group/<taskGroupId>/cancel',
    scopes: 'queue:cancel-task-group:<schedulerId>/<taskGroupId>',
    handler: async (req) => {
      const svc = req.services;
      const meta = await groupMeta(req);
      await req.authorize({ schedulerId: meta.schedulerId, taskGroupId: meta.taskGroupId });
      if (!meta.sealed) throw conflict(`task group ${meta.taskGroupId} must be sealed (sealTaskGroup) before it can be cancelled`);
      let taskGroupSize = 0;
      const taskIds: string[] = [];
      const members = (c?: string) => svc.groups.memberPage(meta.taskGroupId, CANCEL_PAGE, svc.now(), c);
      for await (const page of pagesOf(members)) {
        const tasks = await loadAll(svc, page.taskIds, (t) => t.definition.taskGroupId === meta.taskGroupId);
        taskGroupSize += tasks.length;
        const unresolved = tasks.filter((t) => !isResolved(taskState(t)) && new Date(t.definition.deadline) > svc.now());
        await mapLimit(unresolved, LOAD_CONCURRENCY, async (t) => {
          try {
            if ((await cancelTaskOnce(svc, t)).changed) taskIds.push(t.taskId);
          } catch (err) {
            // Past its deadline meanwhile (the deadline reaper resolves it) or gone: not ours to count.
            if ((err as { status?: number }).status !== 409 && (err as { status?: number }).status !== 404) throw err;
          }
        });
      }
      return ok({ taskGroupId: meta.taskGroupId, taskGroupSize, cancelledCount: taskIds.length, taskIds });
    },
  },
  {
    name: 'listDependentTasks',
    title: 'List Dependent Tasks',
    description: 'The tasks that depend on the given task, with their status, a page at a time.',
    stability: 'stable',
    output: 'list-dependent-tasks-response',
    service: 'queue',
    method: 'GET',
    route: '/task/<taskId>/dependents',
    query: ['continuationToken', 'limit'],
    scopes: 'queue:list-dependent-tasks:<taskId>',
    handler: async (req) => {
      const svc = req.services;
      const taskId = req.params.taskId;
      if (!(await svc.tasks.load(taskId))) throw notFound(`task ${taskId} not found`);
      const page = await dependentPage(svc, taskId, pageLimit(req.query.limit), decodeToken(req.query.continuationToken, isString));
      const tasks = await loadAll(svc, page.taskIds, (t) => t.definition.dependencies.includes(taskId));
      return ok({ taskId, tasks: tasks.map(entry), ...withToken(page.continuation) });
    },
  },
];
