/**
 * The Index service (/api/index/v1): tasks found by name, namespaces browsed level by level.
 */
import '../index-schemas';
import { ApiRequest, ApiResponse, RouteDef, ok } from '../types';
import { ApiError } from '../../errors';
import { decodeToken, encodeToken, isOffset, isPageToken, pageLimit } from '../continuation';
import { checkNamespace, deleteIndexedTask, findIndexedTask, insertIndexedTask } from '../../index/index';
import { IndexStore, IndexedTask } from '../../index/store';
import { redirectToArtifact } from './artifacts';
import { registerSchema } from '../schemas';
import { heartbeatRoute, lbheartbeatRoute } from './health';
import { satisfies } from '../../auth/scopes';
import { signedUrl } from '../../auth/signed-url';

/** What clients see of an entry (the tie-break order stays internal). */
const view = (t: IndexedTask) => ({ namespace: t.namespace, taskId: t.taskId, rank: t.rank, data: t.data, expires: t.expires });

/** Paging arguments from the query (GET) or the body (the older POST forms). */
function paging(req: ApiRequest): { limit: number; continuation?: string } {
  const src = req.route.method === 'POST' ? { limit: req.body?.limit?.toString(), continuationToken: req.body?.continuationToken } : req.query;
  return { limit: pageLimit(src.limit), continuation: decodeToken(src.continuationToken, isPageToken)?.c };
}

/**
 * 303 to the queue's getLatestArtifact URL: plain for a name anonymous callers may read, else
 * signed for that name only (the caller proved `queue:get-artifact:<name>` to get here).
 */
async function redirectToQueue(req: ApiRequest, taskId: string, name: string): Promise<ApiResponse> {
  const svc = req.services;
  // The name as one escaped segment (`a/b` is `a%2Fb`), as Taskcluster's index builds this URL.
  const plain = `${svc.config.publicUrl}/api/queue/v1/task/${taskId}/artifacts/${encodeURIComponent(name)}`;
  const scope = `queue:get-artifact:${name}`;
  const isPublic = satisfies((await svc.authenticator.anonymous()).scopes, scope);
  const url = isPublic ? plain : signedUrl(plain, { issuer: svc.clients.issuer, clientId: 'index/find-artifact', scopes: [scope], now: svc.now() });
  // The body as for a reference artifact: the URL to follow.
  return { status: 303, headers: { location: url }, body: { storageType: 'reference', url } };
}

/** The root namespace has its own (parameterless) routes. */
const nsOf = (req: ApiRequest): string => req.params.namespace ?? '';

function validNamespace(ns: string): void {
  if (ns !== '') checkNamespace(ns);
}

async function listNamespaces(req: ApiRequest): Promise<ApiResponse> {
  validNamespace(nsOf(req));
  const { limit, continuation } = paging(req);
  const now = req.services.now().toJSON();
  const page = await new IndexStore(req.services.storage).listNamespaces(nsOf(req), limit, continuation);
  const body: Record<string, unknown> = {
    namespaces: page.items.filter((n) => n.expires > now).map((n) => ({ namespace: n.namespace, name: n.name, expires: n.expires })),
  };
  if (page.continuation) body.continuationToken = encodeToken({ c: page.continuation });
  return ok(body);
}

async function listTasks(req: ApiRequest): Promise<ApiResponse> {
  validNamespace(nsOf(req));
  const { limit, continuation } = paging(req);
  const now = req.services.now().toJSON();
  const page = await new IndexStore(req.services.storage).listTasks(nsOf(req), limit, continuation);
  const body: Record<string, unknown> = { tasks: page.items.filter((t) => t.expires > now).map(view) };
  if (page.continuation) body.continuationToken = encodeToken({ c: page.continuation });
  return ok(body);
}

const pagingBody = 'list-request';
registerSchema(pagingBody, {
  type: 'object',
  additionalProperties: false,
  properties: { limit: { type: 'integer', minimum: 1, maximum: 1000 }, continuationToken: { type: 'string' } },
});

export const indexRoutes: RouteDef[] = [
  {
    name: 'ping',
    title: 'Ping Server',
    stability: 'stable',
    output: 'ping-response',
    service: 'index',
    method: 'GET',
    route: '/ping',
    scopes: null,
    description: 'Whether the service is up.',
    handler: async (req) => ok({ alive: true, uptime: (Date.now() - req.services.startedAt.getTime()) / 1000 }),
  },
  lbheartbeatRoute('index'),
  heartbeatRoute('index'),
  {
    name: 'findTasksAtIndex',
    title: 'Find tasks at indexes',
    stability: 'experimental',
    output: 'list-tasks-response',
    service: 'index',
    method: 'POST',
    route: '/tasks/indexes',
    query: ['continuationToken', 'limit'],
    scopes: { AllOf: [{ for: 'indexPath', in: 'indexPaths', each: 'index:find-task:<indexPath>' }] },
    input: 'list-tasks-at-index',
    description: 'The live entries at each of several index paths (missing ones are left out), paged.',
    handler: async (req) => {
      const paths: string[] = req.body.indexes;
      await req.authorize({ indexPaths: paths });
      const start = decodeToken(req.query.continuationToken, isOffset) ?? 0;
      const limit = pageLimit(req.query.limit);
      const slice = paths.slice(start, start + limit);
      const found = await Promise.all(
        slice.map((p) =>
          findIndexedTask(req.services, p).catch((err) => {
            if (err instanceof ApiError && err.code === 'ResourceNotFound') return undefined;
            throw err;
          }),
        ),
      );
      const body: Record<string, unknown> = { tasks: found.filter((t): t is IndexedTask => !!t).map(view) };
      if (start + limit < paths.length) body.continuationToken = encodeToken(start + limit);
      return ok(body);
    },
  },
  {
    name: 'listRootNamespaces',
    title: 'List Root Namespaces',
    stability: 'stable',
    output: 'list-namespaces-response',
    service: 'index',
    method: 'GET',
    route: '/namespaces',
    query: ['continuationToken', 'limit'],
    scopes: 'index:list-namespaces:',
    description: 'listNamespaces of the root namespace.',
    handler: listNamespaces,
  },
  {
    name: 'listRootTasks',
    title: 'List Root Tasks',
    stability: 'stable',
    output: 'list-tasks-response',
    service: 'index',
    method: 'GET',
    route: '/tasks',
    query: ['continuationToken', 'limit'],
    scopes: 'index:list-tasks:',
    description: 'listTasks of the root namespace.',
    handler: listTasks,
  },
  {
    name: 'listNamespaces',
    title: 'List Namespaces',
    stability: 'stable',
    output: 'list-namespaces-response',
    service: 'index',
    method: 'GET',
    route: '/namespaces/<namespace>',
    query: ['continuationToken', 'limit'],
    scopes: 'index:list-namespaces:<namespace>',
    description: 'The namespaces directly under a namespace (one partition query), paged.',
    handler: listNamespaces,
  },
  {
    name: 'listNamespacesPost',
    title: 'List Namespaces (POST)',
    stability: 'deprecated',
    output: 'list-namespaces-response',
    service: 'index',
    method: 'POST',
    route: '/namespaces/<namespace>',
    scopes: 'index:list-namespaces:<namespace>',
    input: pagingBody,
    description: 'listNamespaces with paging in the body (the older POST form).',
    handler: listNamespaces,
  },
  {
    name: 'listTasks',
    title: 'List Tasks',
    stability: 'stable',
    output: 'list-tasks-response',
    service: 'index',
    method: 'GET',
    route: '/tasks/<namespace>',
    query: ['continuationToken', 'limit'],
    scopes: 'index:list-tasks:<namespace>',
    description: 'The tasks indexed directly under a namespace, paged.',
    handler: listTasks,
  },
  {
    name: 'listTasksPost',
    title: 'List Tasks (POST)',
    stability: 'deprecated',
    output: 'list-tasks-response',
    service: 'index',
    method: 'POST',
    route: '/tasks/<namespace>',
    scopes: 'index:list-tasks:<namespace>',
    input: pagingBody,
    description: 'listTasks with paging in the body (the older POST form).',
    handler: listTasks,
  },
  {
    name: 'findArtifactFromTask',
    title: 'Get Artifact From Indexed Task',
    stability: 'stable',
    output: 'get-artifact-response',
    service: 'index',
    method: 'GET',
    route: '/task/<indexPath>/artifacts/<name*>',
    scopes: 'queue:get-artifact:<name>',
    description: "Redirects (303) to an artifact of the indexed task's latest run, with the queue's artifact read rules.",
    handler: async (req) => {
      const entry = await findIndexedTask(req.services, req.params.indexPath);
      const t = await req.services.tasks.load(entry.taskId);
      // No run here (a task of another queue, or not started): as Taskcluster's index, send the
      // caller to the queue's latest-artifact URL and let the queue answer.
      if (!t || t.runs.length === 0) return redirectToQueue(req, entry.taskId, req.params.name);
      // Links are followed with the same per-name scope the route asks for.
      const authorizeNames = async (names: string[]) => {
        for (const name of names) await req.authorize({ name });
      };
      return redirectToArtifact(req, entry.taskId, t.runs.length - 1, req.params.name, authorizeNames);
    },
  },
  {
    name: 'findTask',
    title: 'Find Indexed Task',
    stability: 'stable',
    output: 'indexed-task-response',
    service: 'index',
    method: 'GET',
    route: '/task/<indexPath>',
    scopes: 'index:find-task:<indexPath>',
    description: 'The task indexed at a path.',
    handler: async (req) => ok(view(await findIndexedTask(req.services, req.params.indexPath))),
  },
  {
    name: 'insertTask',
    title: 'Insert Task into Index',
    stability: 'stable',
    output: 'indexed-task-response',
    service: 'index',
    method: 'PUT',
    route: '/task/<namespace>',
    scopes: 'index:insert-task:<namespace>',
    input: 'insert-task-request',
    description: 'Indexes a task at a path; an existing entry of higher rank is kept.',
    handler: async (req) => ok(view(await insertIndexedTask(req.services, req.params.namespace, req.body, req.services.now().toJSON()))),
  },
  {
    name: 'deleteTask',
    title: 'Remove Task from Index',
    stability: 'stable',
    output: 'empty-response',
    service: 'index',
    method: 'DELETE',
    route: '/task/<namespace>',
    scopes: 'index:delete-task:<namespace>',
    description: 'Removes the entry at a path (a missing one is fine).',
    handler: async (req) => {
      checkNamespace(req.params.namespace);
      await deleteIndexedTask(req.services, req.params.namespace);
      return ok({});
    },
  },
];
