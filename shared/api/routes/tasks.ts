/**
 * Task creation and inspection endpoints.
 */
import { lbheartbeatRoute } from './health';
import { RouteDef, ok } from '../types';
import { notFound } from '../../errors';
import { createTask, CREATE_TASK_SCOPES } from '../../lifecycle/create';
import { definitionOf, taskStatus } from '../../tasks/model';
import { decodeToken, encodeToken, isOffset, pageLimit } from '../continuation';

async function batch<T>(req: Parameters<RouteDef['handler']>[0], each: (taskId: string) => Promise<T | undefined>) {
  const ids: string[] = req.body.taskIds;
  await req.authorize({ taskIds: ids });
  const start = decodeToken(req.query.continuationToken, isOffset) ?? 0;
  const limit = pageLimit(req.query.limit);
  const slice = ids.slice(start, start + limit);
  const found = await Promise.all(slice.map(async (taskId) => ({ taskId, v: await each(taskId) })));
  const next = start + limit < ids.length ? encodeToken(start + limit) : undefined;
  return { found: found.filter((f) => f.v !== undefined) as { taskId: string; v: T }[], continuationToken: next };
}

export const taskRoutes: RouteDef[] = [
  {
    name: 'ping',
    title: 'Ping Server',
    description: 'Respond without doing anything. This endpoint is used to check that the service is up.',
    stability: 'stable',
    output: 'ping-response',
    service: 'queue',
    method: 'GET',
    route: '/ping',
    scopes: null,
    handler: async (req) => ok({ alive: true, uptime: (Date.now() - req.services.startedAt.getTime()) / 1000 }),
  },
  lbheartbeatRoute('queue'),
  {
    name: 'createTask',
    title: 'Create New Task',
    description:
      'Create a new task with the given taskId and definition; it is pending at once unless it has unresolved dependencies. Repeating the call with the same definition is a no-op.',
    stability: 'stable',
    output: 'task-status-response',
    service: 'queue',
    method: 'PUT',
    route: '/task/<taskId>',
    scopes: CREATE_TASK_SCOPES,
    input: 'create-task-request',
    handler: async (req) => ok({ status: await createTask(req.services, req.params.taskId, req.body, req.authorize) }),
  },
  {
    name: 'task',
    title: 'Get Task Definition',
    description: 'The task definition, normalized (defaults filled in), as stored at creation.',
    stability: 'stable',
    output: 'task',
    service: 'queue',
    method: 'GET',
    route: '/task/<taskId>',
    scopes: 'queue:get-task:<taskId>',
    handler: async (req) => {
      const t = await req.services.tasks.load(req.params.taskId);
      if (!t) throw notFound(`task ${req.params.taskId} not found`);
      return ok(definitionOf(t));
    },
  },
  {
    name: 'status',
    title: 'Get task status',
    description: 'The status of a task: its state and its runs.',
    stability: 'stable',
    output: 'task-status-response',
    service: 'queue',
    method: 'GET',
    route: '/task/<taskId>/status',
    scopes: 'queue:status:<taskId>',
    handler: async (req) => {
      const t = await req.services.tasks.load(req.params.taskId);
      if (!t) throw notFound(`task ${req.params.taskId} not found`);
      return ok({ status: taskStatus(t) });
    },
  },
  {
    name: 'tasks',
    title: 'Get Multiple Task Definitions',
    description: 'The definitions of the given tasks; tasks that do not exist are left out.',
    stability: 'stable',
    output: 'tasks-response',
    service: 'queue',
    method: 'POST',
    route: '/tasks',
    query: ['continuationToken', 'limit'],
    scopes: { AllOf: [{ for: 'taskId', in: 'taskIds', each: 'queue:get-task:<taskId>' }] },
    input: 'task-ids-request',
    handler: async (req) => {
      const r = await batch(req, async (id) => {
        const t = await req.services.tasks.load(id);
        return t ? definitionOf(t) : undefined;
      });
      return ok({ tasks: r.found.map((f) => ({ taskId: f.taskId, task: f.v })), ...(r.continuationToken ? { continuationToken: r.continuationToken } : {}) });
    },
  },
  {
    name: 'statuses',
    title: 'Get Multiple Task Statuses',
    description: 'The statuses of the given tasks; tasks that do not exist are left out.',
    stability: 'stable',
    output: 'tasks-statuses-response',
    service: 'queue',
    method: 'POST',
    route: '/tasks/status',
    query: ['continuationToken', 'limit'],
    scopes: { AllOf: [{ for: 'taskId', in: 'taskIds', each: 'queue:status:<taskId>' }] },
    input: 'task-ids-request',
    handler: async (req) => {
      const r = await batch(req, async (id) => {
        const t = await req.services.tasks.load(id);
        return t ? taskStatus(t) : undefined;
      });
      return ok({
        statuses: r.found.map((f) => ({ taskId: f.taskId, status: f.v })),
        ...(r.continuationToken ? { continuationToken: r.continuationToken } : {}),
      });
    },
  },
];
