/**
 * Operator endpoints: Taskcluster's task-queue, provisioner, worker-type and worker calls (as
 * taskcluster-client v87 names and routes them), the health check, and this queue's own queries
 * (task history, tasks by state and time, latest tasks, counts by state) plus the dashboard.
 */
import { ApiRequest, ApiResponse, RouteDef, ok } from '../types';
import { heartbeatRoute } from './health';
import { badArgs, badUrlParam, notFound } from '../../errors';
import { pageLimit } from '../continuation';
import { registerSchema, TASK_QUEUE_ID } from '../schemas';
import { taskStatus } from '../../tasks/model';
import { readHistory } from '../../ops/history';
import {
  ActiveState,
  ResolvedState,
  countActive,
  indexedQueues,
  listActive,
  listLatest,
  listResolved,
  queueStateCounts,
  workerStateCounts,
  IndexRow,
} from '../../ops/indexes';
import { QueueInfo } from '../../ops/workers';
import { readChart } from '../../ops/rollups';
import { LIVE_LOG_NAME, createLiveLog, readLog } from '../../artifacts/live-log';
import { DASHBOARD_HEADERS, dashboardConfig, dashboardFile } from '../../ops/dashboard';
import { OPS_QUERIES, REFERENCES, apiReference } from '../references';

registerSchema('quarantine-worker-request', {
  type: 'object',
  additionalProperties: false,
  properties: {
    quarantineUntil: { type: 'string', format: 'date-time' },
    quarantineInfo: { type: 'string', maxLength: 4000, default: '' },
  },
  required: ['quarantineUntil'],
});
registerSchema('update-worker-request', {
  type: 'object',
  additionalProperties: false,
  properties: { expires: { type: 'string', format: 'date-time' } },
  required: ['expires'],
});

const STABILITY = { type: 'string', enum: ['experimental', 'stable', 'deprecated'] };
registerSchema('update-provisioner-request', {
  type: 'object',
  additionalProperties: false,
  properties: { stability: STABILITY, description: { type: 'string' }, expires: { type: 'string', format: 'date-time' }, actions: { type: 'array' } },
});
registerSchema('update-workertype-request', {
  type: 'object',
  additionalProperties: false,
  properties: { stability: STABILITY, description: { type: 'string' }, expires: { type: 'string', format: 'date-time' } },
});

/** Operator queries that load a task per item page by this much at most. */
const MAX_LOADED_PAGE = 100;
/** The windows the charts offer, in hours (per-minute rollups are kept 25 h). */
const CHART_HOURS = ['1', '24'];

/** A chart's minutes over the last `hours` (1 by default), for one task queue or all of them. */
async function chart(req: ApiRequest, taskQueueId: string | undefined) {
  const hours = req.query.hours ?? '1';
  if (!CHART_HOURS.includes(hours)) throw badArgs(`hours must be one of ${CHART_HOURS.join(', ')}, got '${hours}'`);
  const svc = req.services;
  // This instance's tallies of the running minute, so a caller sees its own work at once.
  await svc.rollups.flush(true);
  const storage = await indexed(req);
  const now = svc.now();
  const since = new Date(now.getTime() - Number(hours) * 3600_000);
  const queues = taskQueueId === undefined ? (await indexedQueues(storage)).map((q) => q.taskQueueId) : [taskQueueId];
  const counts = await Promise.all(queues.map((q) => Promise.all([countActive(storage, q, 'pending', now), countActive(storage, q, 'running', now)])));
  const current = counts.reduce((a, [p, r]) => ({ pending: a.pending + p, running: a.running + r }), { pending: 0, running: 0 });
  const minutes = await readChart(storage, taskQueueId, since, now, current);
  return ok({ ...(taskQueueId === undefined ? {} : { taskQueueId }), since: since.toJSON(), minutes });
}

/** Default window of resolved counts: the last day. */
const DEFAULT_COUNT_WINDOW_MS = 24 * 3600 * 1000;

const ACTIVE: ActiveState[] = ['unscheduled', 'pending', 'running'];
const RESOLVED: ResolvedState[] = ['completed', 'failed', 'exception'];

const page = (continuation: string | undefined) => (continuation ? { continuationToken: continuation } : {});
const queueOf = (req: ApiRequest) => `${req.params.provisionerId}/${req.params.workerType}`;

/**
 * The storage to read the operator index from, once this instance's queued index writes are
 * written: a client reads its own writes through the same instance (others lag by at most
 * INDEX_LINGER_MS and one call, see shared/ops/indexes.ts).
 */
async function indexed(req: ApiRequest) {
  await req.services.indexes.settled();
  return req.services.storage;
}

/** Counts echo the queue they count, so a malformed one is a 400 rather than zero counts of nothing. */
function checkedQueue(taskQueueId: string): string {
  if (!new RegExp(TASK_QUEUE_ID).test(taskQueueId)) throw badUrlParam('taskQueueId', taskQueueId, new RegExp(TASK_QUEUE_ID));
  return taskQueueId;
}

function date(req: ApiRequest, name: string): string | undefined {
  const raw = req.query[name];
  if (raw === undefined) return undefined;
  const t = Date.parse(raw);
  if (Number.isNaN(t)) throw badArgs(`${name} must be a date-time, got '${raw}'`);
  return new Date(t).toJSON();
}

function sinceOrDefault(req: ApiRequest): string {
  return date(req, 'since') ?? new Date(req.services.now().getTime() - DEFAULT_COUNT_WINDOW_MS).toJSON();
}

function resolvedState(raw: string | undefined): ResolvedState | undefined {
  if (raw === undefined) return undefined;
  if (!(RESOLVED as string[]).includes(raw)) throw badArgs(`state must be one of ${RESOLVED.join(', ')}, got '${raw}'`);
  return raw as ResolvedState;
}

function queueResponse(q: QueueInfo) {
  return { taskQueueId: q.taskQueueId, description: q.description, stability: q.stability, expires: q.expires, lastDateActive: q.lastDateActive };
}

function workerTypeResponse(q: QueueInfo) {
  return {
    workerType: q.workerType,
    provisionerId: q.provisionerId,
    taskQueueId: q.taskQueueId,
    description: q.description,
    stability: q.stability,
    expires: q.expires,
    lastDateActive: q.lastDateActive,
  };
}

/** Provisioners synthesized from their task queues. */
function provisioners(queues: QueueInfo[]) {
  const byId = new Map<
    string,
    { provisionerId: string; stability: string; description: string; expires: string; lastDateActive: string; actions: unknown[] }
  >();
  for (const q of queues) {
    const p = byId.get(q.provisionerId);
    if (!p)
      byId.set(q.provisionerId, {
        provisionerId: q.provisionerId,
        stability: 'experimental',
        description: '',
        expires: q.expires,
        lastDateActive: q.lastDateActive,
        actions: [],
      });
    else {
      if (q.expires > p.expires) p.expires = q.expires;
      if (q.lastDateActive > p.lastDateActive) p.lastDateActive = q.lastDateActive;
    }
  }
  return [...byId.values()];
}

/** In-memory paging over a sorted list, keyed by the last id returned. */
function slice<T>(items: T[], id: (t: T) => string, req: ApiRequest) {
  const after = req.query.continuationToken;
  const limit = pageLimit(req.query.limit);
  const rest = after ? items.filter((x) => id(x) > after) : items;
  const out = rest.slice(0, limit);
  return { items: out, continuationToken: rest.length > limit ? id(out[out.length - 1]) : undefined };
}

/**
 * Loads the task of each index row and keeps those whose run is still in `state`; a row the task
 * contradicts is deleted (it was left by a crash or is about to be replaced by its writer).
 */
async function withTasks(req: ApiRequest, rows: IndexRow[], state: 'pending' | 'running') {
  const svc = req.services;
  const loaded = await Promise.all(rows.map(async (r) => ({ r, t: await svc.tasks.load(r.taskId) })));
  const keep: { r: IndexRow; t: NonNullable<(typeof loaded)[number]['t']> }[] = [];
  for (const { r, t } of loaded) {
    const run = t?.runs[r.runId!];
    if (t && run && run.state === state) keep.push({ r, t });
    else await svc.storage.table('Indexes').delete(r.partitionKey, r.rowKey);
  }
  return keep;
}

function indexEntry(r: IndexRow) {
  const { partitionKey: _p, rowKey: _k, deadline: _d, ...rest } = r;
  void _p;
  void _k;
  void _d;
  return rest;
}

async function latest(req: ApiRequest, by: { name?: string; taskGroupId?: string }) {
  const limit = Math.min(MAX_LOADED_PAGE, pageLimit(req.query.limit, 20));
  const r = await listLatest(await indexed(req), by, limit, req.query.continuationToken, req.services.groups);
  const tasks = await Promise.all(
    r.rows.map(async (row) => {
      const t = await req.services.tasks.load(row.taskId);
      // A row a refused or lost create left behind names a task that is gone or another one.
      if (!t || Date.parse(t.definition.created) !== Date.parse(row.created)) return undefined;
      if (by.taskGroupId !== undefined && t.definition.taskGroupId !== by.taskGroupId) return undefined;
      const d = t.definition;
      return { taskId: row.taskId, name: d.metadata.name, taskQueueId: d.taskQueueId, taskGroupId: d.taskGroupId, created: d.created, status: taskStatus(t) };
    }),
  );
  return ok({ tasks: tasks.filter((x) => x !== undefined), ...page(r.continuation) });
}

const workerRoute = '/provisioners/<provisionerId>/worker-types/<workerType>/workers/<workerGroup>/<workerId>';

/** This queue's own operator queries (served, as a taskcluster-client reference, by opsReference). */
export const opsQueryRoutes: RouteDef[] = [
  {
    name: 'taskHistory',
    title: 'Task History',
    stability: 'experimental',
    category: OPS_QUERIES,
    output: 'task-history-response',
    service: 'queue',
    method: 'GET',
    route: '/task/<taskId>/history',
    query: ['continuationToken', 'limit'],
    scopes: 'queue:status:<taskId>',
    description: 'Every run transition of a task (who, when, from which state, why), newest first.',
    handler: async (req) => {
      const r = await readHistory(req.services.storage, req.params.taskId, pageLimit(req.query.limit), req.query.continuationToken);
      if (!r.entries.length && !req.query.continuationToken && !(await req.services.tasks.load(req.params.taskId))) {
        throw notFound(`task ${req.params.taskId} not found`);
      }
      return ok({ taskId: req.params.taskId, history: r.entries, ...page(r.continuation) });
    },
  },
  {
    name: 'listTaskQueueTasks',
    title: 'List Tasks of a Task Queue by State',
    stability: 'experimental',
    category: OPS_QUERIES,
    output: 'list-task-queue-tasks-response',
    service: 'queue',
    method: 'GET',
    route: '/task-queues/<taskQueueId*>/tasks',
    query: ['state', 'since', 'until', 'continuationToken', 'limit'],
    scopes: 'queue:list-tasks:<taskQueueId>',
    description:
      "A task queue's tasks in one state: unscheduled, pending, running (oldest first) or completed/failed/exception runs resolved in [since, until] (newest first).",
    handler: async (req) => {
      const storage = await indexed(req);
      const state = req.query.state ?? 'pending';
      const { taskQueueId } = req.params;
      const limit = pageLimit(req.query.limit);
      const r = (ACTIVE as string[]).includes(state)
        ? await listActive(storage, taskQueueId, state as ActiveState, req.services.now(), limit, req.query.continuationToken)
        : await listResolved(
            storage,
            taskQueueId,
            { state: resolvedState(state), since: date(req, 'since'), until: date(req, 'until') },
            limit,
            req.query.continuationToken,
          );
      return ok({ taskQueueId, state, tasks: r.rows.map(indexEntry), ...page(r.continuation) });
    },
  },
  {
    name: 'taskQueueStateCounts',
    title: 'Task Queue State Counts',
    stability: 'experimental',
    category: OPS_QUERIES,
    output: 'task-queue-state-counts-response',
    service: 'queue',
    method: 'GET',
    route: '/task-queues/<taskQueueId*>/state-counts',
    query: ['since'],
    scopes: 'queue:list-tasks:<taskQueueId>',
    description:
      "A task queue's tasks by state: unscheduled, pending and running exactly; completed, failed and exception runs resolved since `since` (default: the last 24 hours). " +
      'Of the pending, `delayed` are not due yet (a delayed start or a resumption waiting for its time) and `suspended` are resumed runs of suspended tasks.',
    handler: async (req) => {
      const storage = await indexed(req);
      const since = sinceOrDefault(req);
      const svc = req.services;
      const tq = checkedQueue(req.params.taskQueueId);
      const now = svc.now();
      const [c, delayed, suspended] = await Promise.all([
        queueStateCounts(storage, tq, since, now),
        countActive(storage, tq, 'pending', now, [{ prop: 'at', op: 'gt', value: now.toJSON() }]),
        countActive(storage, tq, 'pending', now, [{ prop: 'reasonCreated', op: 'eq', value: 'resumed' }]),
      ]);
      return ok({ taskQueueId: tq, since, counts: { unscheduled: c.unscheduled, pending: c.pending, delayed, suspended, ...c } });
    },
  },
  {
    name: 'createLiveLog',
    title: 'Stream a Run Log',
    stability: 'experimental',
    output: 'live-log-url-response',
    service: 'queue',
    method: 'POST',
    route: '/task/<taskId>/runs/<runId>/live-log',
    scopes: 'queue:create-artifact:<taskId>/<runId>',
    description:
      'For the worker of a running run: a URL to stream the run log to as it is written, appending to the append blob the queue ' +
      'created there (`PUT ?comp=appendblock`, at most 4 MiB each), up to `maxBytes` in all. Appends are refused once the run ' +
      `resolves. Readers follow it with \`liveLog\`; the complete log is still uploaded as the artifact \`${LIVE_LOG_NAME}\`.`,
    handler: async (req) => ok(await createLiveLog(req.services, req.params.taskId, Number(req.params.runId))),
  },
  {
    name: 'liveLog',
    title: 'Read a Run Log',
    stability: 'experimental',
    category: OPS_QUERIES,
    output: 'live-log-response',
    service: 'queue',
    method: 'GET',
    route: '/task/<taskId>/runs/<runId>/live-log',
    query: ['offset'],
    scopes: `queue:get-artifact:${LIVE_LOG_NAME}`,
    description:
      `A run's log from byte \`offset\` (default 0): up to 256 KiB as text, ending at a line end unless it reaches the end, and the offset to ask for next. ` +
      `While the run is running, what its worker streamed so far; once resolved, the uploaded \`${LIVE_LOG_NAME}\` artifact.`,
    handler: async (req) => {
      const raw = req.query.offset ?? '0';
      if (!/^\d{1,15}$/.test(raw)) throw badArgs(`offset must be a non-negative integer, got '${raw}'`);
      return ok(await readLog(req.services.storage, await req.services.tasks.load(req.params.taskId), Number(req.params.runId), Number(raw)));
    },
  },
  {
    name: 'taskQueueChart',
    title: 'Task Queue Chart Data',
    stability: 'experimental',
    category: OPS_QUERIES,
    output: 'chart-minutes-response',
    service: 'queue',
    method: 'GET',
    route: '/task-queues/<taskQueueId*>/minutes',
    query: ['hours'],
    scopes: 'queue:list-tasks:<taskQueueId>',
    description:
      "A task queue's last hour (`hours=1`, the default) or day (`hours=24`) by minute: pending and running runs at each minute's end, " +
      'runs completed, failed and exception, runs started and their wait (scheduled to started) p50 and p95 in ms (a histogram bucket bound). From per-minute rollups: one partition read.',
    handler: async (req) => chart(req, checkedQueue(req.params.taskQueueId)),
  },
  {
    name: 'allQueuesChart',
    title: 'Chart Data of All Task Queues',
    stability: 'experimental',
    category: OPS_QUERIES,
    output: 'chart-minutes-response',
    service: 'queue',
    method: 'GET',
    route: '/minutes',
    query: ['hours'],
    scopes: 'queue:list-tasks:*',
    description: 'As `taskQueueChart`, for all task queues together.',
    handler: async (req) => chart(req, undefined),
  },
  {
    name: 'listResolvedTasks',
    title: 'List Resolved Tasks',
    stability: 'experimental',
    category: OPS_QUERIES,
    output: 'list-resolved-tasks-response',
    service: 'queue',
    method: 'GET',
    route: '/resolved-tasks',
    query: ['state', 'since', 'until', 'continuationToken', 'limit'],
    scopes: 'queue:list-resolved-tasks',
    description: 'Runs of every task queue resolved in [since, until], newest first, optionally of one state (completed, failed, exception).',
    handler: async (req) => {
      const storage = await indexed(req);
      const r = await listResolved(
        storage,
        undefined,
        { state: resolvedState(req.query.state), since: date(req, 'since'), until: date(req, 'until') },
        pageLimit(req.query.limit),
        req.query.continuationToken,
      );
      return ok({ tasks: r.rows.map(indexEntry), ...page(r.continuation) });
    },
  },
  {
    name: 'listTasksByName',
    title: 'List Tasks by Name',
    stability: 'experimental',
    category: OPS_QUERIES,
    output: 'latest-tasks-response',
    service: 'queue',
    method: 'GET',
    route: '/tasks-by-name',
    query: ['name', 'continuationToken', 'limit'],
    scopes: 'queue:list-tasks-by-name',
    description: 'Tasks whose metadata.name is `name`, newest created first, with their status (the first is the latest).',
    handler: async (req) => {
      if (req.query.name === undefined) throw badArgs('query parameter name is required');
      return latest(req, { name: req.query.name });
    },
  },
  {
    name: 'listTaskGroupLatest',
    title: 'Latest Tasks of a Task Group',
    stability: 'experimental',
    category: OPS_QUERIES,
    output: 'latest-tasks-response',
    service: 'queue',
    method: 'GET',
    route: '/task-group/<taskGroupId>/latest',
    query: ['continuationToken', 'limit'],
    scopes: 'queue:list-task-group:<taskGroupId>',
    description: 'Tasks of a task group, newest created first, with their status (the first is the latest).',
    handler: async (req) => latest(req, { taskGroupId: req.params.taskGroupId }),
  },
  {
    name: 'workerStateCounts',
    title: 'Worker State Counts',
    stability: 'experimental',
    category: OPS_QUERIES,
    output: 'worker-state-counts-response',
    service: 'queue',
    method: 'GET',
    route: `${workerRoute}/counts`,
    query: ['since'],
    scopes: 'queue:get-worker:<provisionerId>/<workerType>/<workerGroup>/<workerId>',
    description:
      "A worker's runs by state: running exactly; completed, failed and exception among the runs it claimed since `since` (default: the last 24 hours).",
    handler: async (req) => {
      const storage = await indexed(req);
      const { workerGroup, workerId } = req.params;
      const since = sinceOrDefault(req);
      const counts = await workerStateCounts(storage, checkedQueue(queueOf(req)), workerGroup, workerId, since, req.services.now());
      return ok({ taskQueueId: queueOf(req), workerGroup, workerId, since, counts });
    },
  },
];

/** A taskcluster-client API reference for opsQueryRoutes: `new (tc.createClient(ref))({rootUrl, credentials})`. */
export function opsReference() {
  return apiReference(
    REFERENCES.find((s) => s.name === 'queue-ops')!,
    opsQueryRoutes,
  );
}

export const opsRoutes: RouteDef[] = [
  // ---- task queues (specific routes before getTaskQueue, whose wildcard matches them too) ----
  {
    name: 'taskQueueCounts',
    title: 'Get Number of Pending and Claimed Tasks',
    description: 'How many tasks of a task queue are pending and how many are claimed.',
    stability: 'experimental',
    output: 'task-queue-counts-response',
    service: 'queue',
    method: 'GET',
    route: '/task-queues/<taskQueueId*>/counts',
    scopes: { AllOf: ['queue:pending-count:<taskQueueId>', 'queue:claimed-count:<taskQueueId>'] },
    handler: async (req) => {
      const storage = await indexed(req);
      const { taskQueueId } = req.params;
      const now = req.services.now();
      const [pendingTasks, claimedTasks] = await Promise.all([
        countActive(storage, taskQueueId, 'pending', now),
        countActive(storage, taskQueueId, 'running', now),
      ]);
      const [provisionerId, workerType] = taskQueueId.split('/');
      return ok({ provisionerId, workerType, taskQueueId, pendingTasks, claimedTasks });
    },
  },
  {
    name: 'listPendingTasks',
    title: 'List Pending Tasks',
    description: 'The pending tasks of a task queue, oldest first, a page at a time.',
    stability: 'experimental',
    output: 'list-pending-tasks-response',
    service: 'queue',
    method: 'GET',
    route: '/task-queues/<taskQueueId*>/pending',
    query: ['continuationToken', 'limit'],
    scopes: 'queue:pending-list:<taskQueueId>',
    handler: async (req) => {
      const storage = await indexed(req);
      const limit = Math.min(MAX_LOADED_PAGE, pageLimit(req.query.limit));
      const r = await listActive(storage, req.params.taskQueueId, 'pending', req.services.now(), limit, req.query.continuationToken);
      const tasks = (await withTasks(req, r.rows, 'pending')).map(({ r: row, t }) => ({
        taskId: row.taskId,
        runId: row.runId!,
        inserted: row.at,
        task: t.definition,
      }));
      return ok({ tasks, ...page(r.continuation) });
    },
  },
  {
    name: 'listClaimedTasks',
    title: 'List Claimed Tasks',
    description: 'The claimed (running) tasks of a task queue, with their workers, a page at a time.',
    stability: 'experimental',
    output: 'list-claimed-tasks-response',
    service: 'queue',
    method: 'GET',
    route: '/task-queues/<taskQueueId*>/claimed',
    query: ['continuationToken', 'limit'],
    scopes: 'queue:claimed-list:<taskQueueId>',
    handler: async (req) => {
      const storage = await indexed(req);
      const limit = Math.min(MAX_LOADED_PAGE, pageLimit(req.query.limit));
      const r = await listActive(storage, req.params.taskQueueId, 'running', req.services.now(), limit, req.query.continuationToken);
      const tasks = (await withTasks(req, r.rows, 'running')).map(({ r: row, t }) => {
        const run = t.runs[row.runId!];
        return { taskId: row.taskId, runId: row.runId!, workerGroup: run.workerGroup!, workerId: run.workerId!, claimed: run.started!, task: t.definition };
      });
      return ok({ tasks, ...page(r.continuation) });
    },
  },
  ...opsQueryRoutes,
  {
    name: 'listTaskQueues',
    title: 'Get a list of all active task queues',
    description: 'The task queues that have been active recently, a page at a time.',
    stability: 'stable',
    output: 'list-taskqueues-response',
    service: 'queue',
    method: 'GET',
    route: '/task-queues',
    query: ['continuationToken', 'limit'],
    scopes: 'queue:list-task-queues',
    handler: async (req) => {
      const r = slice(await req.services.workers.allQueues(), (q) => q.taskQueueId, req);
      return ok({ taskQueues: r.items.map(queueResponse), ...page(r.continuationToken) });
    },
  },
  {
    name: 'getTaskQueue',
    title: 'Get a task queue',
    description: 'A task queue: its description, stability and when it was last active.',
    stability: 'stable',
    output: 'taskqueue-response',
    service: 'queue',
    method: 'GET',
    route: '/task-queues/<taskQueueId*>',
    scopes: 'queue:get-task-queue:<taskQueueId>',
    handler: async (req) => ok(queueResponse(await req.services.workers.queue(req.params.taskQueueId))),
  },
  {
    name: 'pendingTasks',
    title: 'Get Number of Pending Tasks',
    description: 'How many tasks of a task queue are pending.',
    stability: 'stable',
    output: 'pending-tasks-response',
    service: 'queue',
    method: 'GET',
    route: '/pending/<taskQueueId*>',
    scopes: 'queue:pending-count:<taskQueueId>',
    handler: async (req) => {
      const storage = await indexed(req);
      const { taskQueueId } = req.params;
      const [provisionerId, workerType] = taskQueueId.split('/');
      return ok({ provisionerId, workerType, taskQueueId, pendingTasks: await countActive(storage, taskQueueId, 'pending', req.services.now()) });
    },
  },

  // ---- provisioners and worker types, derived from task queues ----
  {
    name: 'listProvisioners',
    title: 'Get a list of all active provisioners',
    description: 'The provisioners (the first half of task queue ids) that have been active recently.',
    stability: 'deprecated',
    output: 'list-provisioners-response',
    service: 'queue',
    method: 'GET',
    route: '/provisioners',
    query: ['continuationToken', 'limit'],
    scopes: 'queue:list-provisioners',
    handler: async (req) => {
      const r = slice(provisioners(await req.services.workers.allQueues()), (p) => p.provisionerId, req);
      return ok({ provisioners: r.items, ...page(r.continuationToken) });
    },
  },
  {
    name: 'getProvisioner',
    title: 'Get an active provisioner',
    description: 'A provisioner, derived from its task queues.',
    stability: 'deprecated',
    output: 'provisioner-response',
    service: 'queue',
    method: 'GET',
    route: '/provisioners/<provisionerId>',
    scopes: 'queue:get-provisioner:<provisionerId>',
    handler: async (req) => {
      const p = provisioners(await req.services.workers.allQueues(`${req.params.provisionerId}!2f`))[0];
      if (!p) throw notFound(`provisioner ${req.params.provisionerId} not found`);
      return ok(p);
    },
  },
  {
    // Deprecated in Taskcluster (removed in v106) but still in taskcluster-client v87: after the
    // scope check it changes nothing and answers the provisioner, as Taskcluster does.
    name: 'declareProvisioner',
    title: 'Update a provisioner',
    stability: 'deprecated',
    output: 'provisioner-response',
    service: 'queue',
    method: 'PUT',
    route: '/provisioners/<provisionerId>',
    scopes: { AllOf: [{ for: 'property', in: 'properties', each: 'queue:declare-provisioner:<provisionerId>#<property>' }] },
    input: 'update-provisioner-request',
    description: 'Deprecated: checks `queue:declare-provisioner:<provisionerId>#<property>` per given property and returns the provisioner unchanged.',
    handler: async (req) => {
      await req.authorize({ provisionerId: req.params.provisionerId, properties: Object.keys(req.body ?? {}) });
      const p = provisioners(await req.services.workers.allQueues(`${req.params.provisionerId}!2f`))[0];
      if (!p) throw notFound(`Provisioner \`${req.params.provisionerId}\` not found. Are you sure it was created?`);
      return ok(p);
    },
  },
  {
    name: 'listWorkerTypes',
    title: 'Get a list of all active worker-types',
    description: 'The worker types of a provisioner that have been active recently.',
    stability: 'deprecated',
    output: 'list-workertypes-response',
    service: 'queue',
    method: 'GET',
    route: '/provisioners/<provisionerId>/worker-types',
    query: ['continuationToken', 'limit'],
    scopes: 'queue:list-worker-types:<provisionerId>',
    handler: async (req) => {
      const r = slice(await req.services.workers.allQueues(`${req.params.provisionerId}!2f`), (q) => q.workerType, req);
      return ok({ workerTypes: r.items.map(workerTypeResponse), ...page(r.continuationToken) });
    },
  },
  {
    name: 'getWorkerType',
    title: 'Get a worker-type',
    description: 'A worker type: the task queue `provisionerId/workerType`.',
    stability: 'deprecated',
    output: 'workertype-response',
    service: 'queue',
    method: 'GET',
    route: '/provisioners/<provisionerId>/worker-types/<workerType>',
    scopes: 'queue:get-worker-type:<provisionerId>/<workerType>',
    handler: async (req) => ok({ ...workerTypeResponse(await req.services.workers.queue(queueOf(req))), actions: [] }),
  },
  {
    // Deprecated, still in taskcluster-client v87: creates or updates the task queue as Taskcluster does.
    name: 'declareWorkerType',
    title: 'Update a worker-type',
    stability: 'deprecated',
    output: 'workertype-response',
    service: 'queue',
    method: 'PUT',
    route: '/provisioners/<provisionerId>/worker-types/<workerType>',
    scopes: { AllOf: [{ for: 'property', in: 'properties', each: 'queue:declare-worker-type:<provisionerId>/<workerType>#<property>' }] },
    input: 'update-workertype-request',
    description:
      'Deprecated: creates or updates the task queue `<provisionerId>/<workerType>` (description, stability; expires only moves later, default 5 days from now).',
    handler: async (req) => {
      const { provisionerId, workerType } = req.params;
      const body = req.body ?? {};
      await req.authorize({ provisionerId, workerType, properties: Object.keys(body) });
      const expires = body.expires === undefined ? undefined : new Date(body.expires).toJSON();
      await req.services.workers.declareQueue(queueOf(req), { expires, description: body.description, stability: body.stability });
      return ok({ ...workerTypeResponse(await req.services.workers.queue(queueOf(req))), actions: [] });
    },
  },

  // ---- workers ----
  {
    name: 'listWorkers',
    title: 'Get a list of all active workers of a workerType',
    description: 'The workers of a task queue that have claimed work recently (or only quarantined ones), each with its latest claim.',
    stability: 'experimental',
    output: 'list-workers-response',
    service: 'queue',
    method: 'GET',
    route: '/provisioners/<provisionerId>/worker-types/<workerType>/workers',
    query: ['continuationToken', 'limit', 'quarantined'],
    scopes: 'queue:list-workers:<provisionerId>/<workerType>',
    handler: async (req) => {
      const q = req.query.quarantined;
      if (q !== undefined && q !== 'true' && q !== 'false') throw badArgs(`quarantined must be true or false, got '${q}'`);
      const r = await req.services.workers.list(
        queueOf(req),
        q === undefined ? undefined : q === 'true',
        pageLimit(req.query.limit),
        req.query.continuationToken,
      );
      return ok({ workers: r.workers, ...page(r.continuation) });
    },
  },
  {
    name: 'getWorker',
    title: 'Get a worker',
    description: 'A worker: when it was first and last seen, its recent claims and its quarantine.',
    stability: 'experimental',
    output: 'worker-response',
    service: 'queue',
    method: 'GET',
    route: workerRoute,
    scopes: 'queue:get-worker:<provisionerId>/<workerType>/<workerGroup>/<workerId>',
    handler: async (req) => ok(await req.services.workers.describe(queueOf(req), req.params.workerGroup, req.params.workerId)),
  },
  {
    name: 'quarantineWorker',
    title: 'Quarantine a worker',
    description: 'Quarantine a worker until the given time: its claimWork calls get no tasks.',
    stability: 'experimental',
    output: 'worker-response',
    service: 'queue',
    method: 'PUT',
    route: workerRoute,
    scopes: { AllOf: ['queue:quarantine-worker:<provisionerId>/<workerType>/<workerGroup>/<workerId>'] },
    input: 'quarantine-worker-request',
    handler: async (req) => {
      const { workerGroup, workerId } = req.params;
      const until = new Date(req.body.quarantineUntil).toJSON();
      const caller = await req.caller();
      const w = req.services.workers;
      await w.quarantine(queueOf(req), workerGroup, workerId, until, req.body.quarantineInfo, caller.clientId ?? '');
      return ok(await w.describe(queueOf(req), workerGroup, workerId));
    },
  },
  {
    name: 'declareWorker',
    title: 'Declare a worker',
    description: 'Declare a worker (its expiry) before or while it claims work.',
    stability: 'experimental',
    output: 'worker-response',
    service: 'queue',
    method: 'PUT',
    route: '/provisioners/<provisionerId>/worker-types/<workerType>/<workerGroup>/<workerId>',
    scopes: { AllOf: [{ for: 'property', in: 'properties', each: 'queue:declare-worker:<provisionerId>/<workerType>/<workerGroup>/<workerId>#<property>' }] },
    input: 'update-worker-request',
    handler: async (req) => {
      const { provisionerId, workerType, workerGroup, workerId } = req.params;
      await req.authorize({ provisionerId, workerType, workerGroup, workerId, properties: Object.keys(req.body) });
      const w = req.services.workers;
      await w.declare(queueOf(req), workerGroup, workerId, new Date(req.body.expires).toJSON());
      return ok(await w.describe(queueOf(req), workerGroup, workerId));
    },
  },

  // ---- monitoring and the dashboard ----
  heartbeatRoute('queue'),
  {
    name: 'opsReference',
    title: 'Operator API Reference',
    description: 'The API reference of the operator queries (also served under /api/references/queue-ops/v1/api.json).',
    stability: 'experimental',
    output: 'api-reference',
    service: 'queue',
    method: 'GET',
    route: '/ops/reference',
    scopes: null,
    handler: async () => ok(opsReference()),
  },
  {
    name: 'dashboard',
    title: 'Dashboard',
    description: 'The operator dashboard (HTML).',
    stability: 'experimental',
    service: 'web',
    method: 'GET',
    route: '/dashboard',
    scopes: null,
    handler: async () => dashboardResponse('index.html'),
  },
  {
    name: 'dashboardFile',
    title: 'Dashboard file',
    description: "The dashboard's static files, and `config.json` (the root URL the page talks to).",
    stability: 'experimental',
    output: 'dashboard-config-response',
    service: 'web',
    method: 'GET',
    route: '/dashboard/<file>',
    scopes: null,
    handler: async (req) =>
      req.params.file === 'config.json'
        ? { ...ok(dashboardConfig(req.services.config.publicUrl)), headers: { ...DASHBOARD_HEADERS } }
        : dashboardResponse(req.params.file),
  },
];

function dashboardResponse(name: string): ApiResponse {
  const file = dashboardFile(name);
  if (!file) throw notFound(`the dashboard has no file ${name}`);
  return { status: 200, headers: { ...DASHBOARD_HEADERS, 'content-type': file.contentType }, raw: file.body };
}
