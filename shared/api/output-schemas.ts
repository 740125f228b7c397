/**
 * Response schemas of every JSON endpoint (Taskcluster v1 shapes where Taskcluster has the call),
 * named by the routes' `output`. They are served with the API references and the conformance suite
 * validates every response against them. Self-contained (no $ref), so each can be served alone.
 */
import Ajv, { ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { registerSchema, schemaById, SLUGID, TASK_QUEUE_ID } from './schemas';

const str = { type: 'string' };
const int = { type: 'integer' };
const bool = { type: 'boolean' };
const dateTime = { type: 'string', format: 'date-time' };
const slugid = { type: 'string', pattern: SLUGID };
const taskQueueId = { type: 'string', pattern: TASK_QUEUE_ID };
const runId = { type: 'integer', minimum: 0, maximum: 1000 };
const strings = { type: 'array', items: str };
const continuationToken = { type: 'string', description: 'Present when there are more results: pass it back to get them.' };

/** An object with exactly these properties allowed, `required` among them. */
const obj = (properties: Record<string, object>, required: string[] = Object.keys(properties), extra = false) => ({
  type: 'object',
  properties,
  required,
  additionalProperties: extra,
});
/** A page of `items` under `key`, with the continuation token. */
const pageOf = (key: string, item: object, more: Record<string, object> = {}) =>
  obj({ ...more, [key]: { type: 'array', items: item }, continuationToken }, [...Object.keys(more), key]);

const RUN_STATES = ['pending', 'running', 'completed', 'failed', 'exception'];
const TASK_STATES = ['unscheduled', ...RUN_STATES];

const run = obj(
  {
    runId,
    state: { type: 'string', enum: RUN_STATES },
    reasonCreated: { type: 'string', enum: ['scheduled', 'retry', 'task-retry', 'rerun', 'exception', 'resumed'] },
    reasonResolved: {
      type: 'string',
      enum: [
        'completed',
        'failed',
        'deadline-exceeded',
        'canceled',
        'superseded',
        'suspended',
        'claim-expired',
        'worker-shutdown',
        'malformed-payload',
        'resource-unavailable',
        'internal-error',
        'intermittent-task',
      ],
    },
    workerGroup: str,
    workerId: str,
    takenUntil: dateTime,
    scheduled: dateTime,
    started: dateTime,
    resolved: dateTime,
  },
  ['runId', 'state', 'reasonCreated', 'scheduled'],
);

const taskStatus = obj(
  {
    taskId: slugid,
    provisionerId: str,
    workerType: str,
    taskQueueId,
    schedulerId: str,
    projectId: str,
    taskGroupId: slugid,
    priority: str,
    deadline: dateTime,
    expires: dateTime,
    retriesLeft: { type: 'integer', minimum: 0 },
    state: { type: 'string', enum: TASK_STATES },
    runs: { type: 'array', items: run },
  },
  ['taskId', 'provisionerId', 'workerType', 'taskQueueId', 'schedulerId', 'projectId', 'taskGroupId', 'deadline', 'expires', 'retriesLeft', 'state', 'runs'],
);

/** Every field of a definition is always there, except the extensions `notBefore` and `concurrencyKey`. */
const TASK_FIELDS = [
  'provisionerId',
  'workerType',
  'taskQueueId',
  'schedulerId',
  'projectId',
  'taskGroupId',
  'dependencies',
  'requires',
  'routes',
  'priority',
  'retries',
  'created',
  'deadline',
  'expires',
  'scopes',
  'payload',
  'metadata',
  'tags',
  'extra',
];
/** The normalized definition, as `task(taskId)` returns it. */
const task = obj(
  {
    provisionerId: str,
    workerType: str,
    taskQueueId,
    schedulerId: str,
    projectId: str,
    taskGroupId: slugid,
    dependencies: { type: 'array', items: slugid },
    requires: { type: 'string', enum: ['all-completed', 'all-resolved'] },
    routes: strings,
    priority: str,
    retries: int,
    created: dateTime,
    deadline: dateTime,
    expires: dateTime,
    scopes: strings,
    payload: { type: 'object' },
    metadata: obj({ name: str, description: str, owner: str, source: str }),
    tags: { type: 'object', additionalProperties: str },
    extra: { type: 'object' },
    notBefore: dateTime,
    concurrencyKey: str,
  },
  TASK_FIELDS,
);

const credentials = obj({ clientId: str, accessToken: str, certificate: str });

const claim = obj(
  {
    status: taskStatus,
    runId,
    workerGroup: str,
    workerId: str,
    takenUntil: dateTime,
    task,
    credentials,
    continuation: {},
  },
  ['status', 'runId', 'workerGroup', 'workerId', 'takenUntil', 'task', 'credentials'],
);

const taskGroup = obj({ taskGroupId: slugid, schedulerId: str, expires: dateTime, sealed: dateTime }, ['taskGroupId', 'schedulerId', 'expires']);
const statusAndTask = obj({ status: taskStatus, task });

const STORAGE_TYPES = ['s3', 'object', 'reference', 'link', 'error'];
const artifact = obj(
  { storageType: { type: 'string', enum: STORAGE_TYPES }, name: str, expires: dateTime, contentType: str, contentLength: { type: 'integer', minimum: 0 } },
  ['storageType', 'name', 'expires', 'contentType'],
);
/** Where an artifact's bytes are: a URL to fetch, or the error a worker recorded. */
const artifactContent = {
  oneOf: [
    obj({ storageType: { type: 'string', enum: ['s3', 'reference'] }, url: { type: 'string', format: 'uri' } }),
    obj({ storageType: { type: 'string', enum: ['error'] }, reason: str, message: str }),
    { type: 'object', properties: { storageType: { type: 'string', enum: ['object'] } }, required: ['storageType'] },
  ],
};

/**
 * The task queue of a worker-type or worker route (`<provisionerId>/<workerType>`): those routes take
 * any `[a-zA-Z0-9-_]{1,38}` worker type, as Taskcluster's do, so the id a declared queue or worker
 * gets is not always the task queue pattern createTask holds tasks to.
 */
const declaredTaskQueueId = str;

const queueInfo = {
  taskQueueId: declaredTaskQueueId,
  description: str,
  stability: { type: 'string', enum: ['experimental', 'stable', 'deprecated'] },
  expires: dateTime,
  lastDateActive: dateTime,
};
const taskQueue = obj(queueInfo);
const workerType = obj({ workerType: str, provisionerId: str, ...queueInfo });
const provisioner = obj({
  provisionerId: str,
  stability: queueInfo.stability,
  description: str,
  expires: dateTime,
  lastDateActive: dateTime,
  actions: { type: 'array' },
});
const taskRun = obj({ taskId: slugid, runId });
const worker = obj(
  {
    provisionerId: str,
    workerType: str,
    taskQueueId: declaredTaskQueueId,
    workerGroup: str,
    workerId: str,
    recentTasks: { type: 'array', items: taskRun },
    expires: dateTime,
    firstClaim: dateTime,
    lastDateActive: dateTime,
    quarantineUntil: dateTime,
    quarantineDetails: { type: 'array', items: obj({ updatedAt: dateTime, clientId: str, quarantineUntil: dateTime, quarantineInfo: str }) },
    actions: { type: 'array' },
  },
  ['provisionerId', 'workerType', 'taskQueueId', 'workerGroup', 'workerId', 'recentTasks', 'expires', 'firstClaim', 'actions'],
);
/** `delayed` (not due yet: a delayed start or a resumption) and `suspended` (resumed runs) are parts of `pending`. */
const counts = obj({ unscheduled: int, pending: int, delayed: int, suspended: int, running: int, completed: int, failed: int, exception: int }, [
  'running',
  'completed',
  'failed',
  'exception',
]);
/** A row of the operator indexes: a run (or task) in a state, with when it got there. */
const indexEntry = obj(
  {
    taskId: slugid,
    runId,
    taskQueueId,
    taskGroupId: slugid,
    name: str,
    state: { type: 'string', enum: TASK_STATES },
    at: dateTime,
    reasonCreated: str,
    reasonResolved: str,
    workerGroup: str,
    workerId: str,
    scheduled: dateTime,
    started: dateTime,
    resolved: dateTime,
    created: dateTime,
  },
  ['taskId', 'taskQueueId', 'state', 'at'],
);

const client = {
  clientId: str,
  description: str,
  expires: dateTime,
  created: dateTime,
  lastModified: dateTime,
  lastDateUsed: dateTime,
  lastRotated: dateTime,
  deleteOnExpiration: bool,
  scopes: strings,
  expandedScopes: strings,
  disabled: bool,
};
const role = obj({ roleId: str, description: str, scopes: strings, expandedScopes: strings, created: dateTime, lastModified: dateTime });

// ---- the Index and Hooks services ----
const indexedTask = obj({ namespace: str, taskId: slugid, rank: { type: 'number' }, data: { type: 'object' }, expires: dateTime });
const hookDefinition = obj(
  {
    hookGroupId: str,
    hookId: str,
    metadata: obj({ name: str, description: str, owner: str, emailOnError: bool }),
    schedule: strings,
    task: { type: 'object' },
    triggerSchema: { type: 'object' },
    bindings: { type: 'array', items: obj({ exchange: str, routingKeyPattern: str }) },
    overlap: { type: 'string', enum: ['allow', 'skip'] },
  },
  ['hookGroupId', 'hookId', 'metadata', 'schedule', 'task', 'triggerSchema', 'bindings'],
);
const lastFire = {
  oneOf: [
    obj({ result: { type: 'string', enum: ['success'] }, taskId: slugid, time: dateTime }),
    obj({ result: { type: 'string', enum: ['error'] }, error: { type: 'object' }, time: dateTime }),
    obj({ result: { type: 'string', enum: ['no-fire'] } }),
  ],
};
const fire = obj({
  hookGroupId: str,
  hookId: str,
  firedBy: { type: 'string', enum: ['schedule', 'triggerHook', 'triggerHookWithToken', 'pulseMessage'] },
  taskId: slugid,
  taskCreateTime: dateTime,
  result: { type: 'string', enum: ['success', 'error'] },
  error: str,
});

export const OUTPUT_SCHEMAS: Record<string, object> = {
  'ping-response': obj({ alive: bool, uptime: { type: 'number' } }),
  'empty-response': { type: 'object', additionalProperties: false },
  'heartbeat-response': obj({
    healthy: bool,
    problems: strings,
    storage: { type: 'string', enum: ['ok', 'unreachable'] },
    reaper: obj({ lastRun: dateTime, ageS: { type: 'number' }, staleAfterS: { type: 'number' } }, ['staleAfterS']),
  }),
  'json-schema': { type: 'object', required: ['$schema', '$id'] },
  'api-reference': {
    type: 'object',
    required: ['$schema', 'apiVersion', 'serviceName', 'title', 'description', 'entries'],
    properties: {
      serviceName: str,
      apiVersion: str,
      entries: { type: 'array', items: { type: 'object', required: ['type', 'name', 'method', 'route', 'args'] } },
    },
  },

  // ---- tasks ----
  task,
  'task-status-response': obj({ status: taskStatus }),
  'tasks-response': pageOf('tasks', obj({ taskId: slugid, task })),
  'tasks-statuses-response': pageOf('statuses', obj({ taskId: slugid, status: taskStatus })),
  'claim-work-response': obj({ tasks: { type: 'array', items: claim } }),
  'task-claim-response': { oneOf: [claim, { type: 'object', additionalProperties: false, description: 'A quarantined worker gets {}.' }] },
  'task-reclaim-response': obj({ status: taskStatus, runId, workerGroup: str, workerId: str, takenUntil: dateTime, credentials }),
  'poll-task-urls-response': obj({
    queues: { type: 'array', items: obj({ signedPollUrl: { type: 'string', format: 'uri' }, signedDeleteUrl: str }) },
    expires: dateTime,
  }),

  // ---- task groups and dependents ----
  'task-group-response': taskGroup,
  'list-task-group-response': obj({ ...taskGroup.properties, tasks: { type: 'array', items: statusAndTask }, continuationToken }, [
    'taskGroupId',
    'schedulerId',
    'expires',
    'tasks',
  ]),
  'cancel-task-group-response': obj({ taskGroupId: slugid, taskGroupSize: int, cancelledCount: int, taskIds: { type: 'array', items: slugid } }),
  'change-task-group-priority-response': obj({
    taskGroupId: slugid,
    schedulerId: str,
    newPriority: str,
    tasksAffected: int,
    taskIds: { type: 'array', items: slugid },
  }),
  'concurrency-key-response': obj(
    {
      concurrencyKey: str,
      holder: obj(
        {
          taskId: slugid,
          runId: int,
          since: dateTime,
          state: { type: 'string', enum: ['pending', 'running', 'completed', 'failed', 'exception'] },
          workerGroup: str,
          workerId: str,
        },
        ['taskId', 'runId', 'since'],
      ),
      waiting: { type: 'array', items: obj({ taskId: slugid, runId: int, priority: str, created: dateTime }) },
    },
    ['concurrencyKey', 'waiting'],
  ),
  'list-concurrency-keys-response': pageOf('concurrencyKeys', obj({ concurrencyKey: str, holder: obj({ taskId: slugid, runId: int, since: dateTime }) })),
  'worker-gone-response': obj({
    taskQueueId: declaredTaskQueueId,
    workerGroup: str,
    workerId: str,
    resolved: { type: 'array', items: obj({ taskId: slugid, runId: int }) },
  }),
  'list-dependent-tasks-response': pageOf('tasks', statusAndTask, { taskId: slugid }),

  // ---- artifacts ----
  'post-artifact-response': {
    oneOf: [
      obj({ storageType: { type: 'string', enum: ['s3'] }, contentType: str, expires: dateTime, putUrl: { type: 'string', format: 'uri' } }),
      obj({ storageType: { type: 'string', enum: ['reference', 'link', 'error'] } }),
      { type: 'object', properties: { storageType: { type: 'string', enum: ['object'] } }, required: ['storageType'] },
    ],
  },
  'get-artifact-response': artifactContent,
  // ---- the Object API ----
  'create-upload-response': obj({
    projectId: str,
    uploadId: str,
    expires: dateTime,
    uploadMethod: {
      oneOf: [
        obj({ dataInline: { const: true } }),
        obj({ putUrl: obj({ url: { type: 'string', format: 'uri' }, headers: { type: 'object', additionalProperties: str }, expires: dateTime }) }),
        { type: 'object', additionalProperties: false, description: 'No proposed method was acceptable.' },
      ],
    },
  }),
  'download-object-response': {
    oneOf: [
      obj({ method: { const: 'simple' }, url: { type: 'string', format: 'uri' } }),
      obj({ method: { const: 'getUrl' }, url: { type: 'string', format: 'uri' }, expires: dateTime, hashes: { type: 'object', additionalProperties: str } }),
    ],
  },
  'get-object-response': obj({ projectId: str, expires: dateTime, hashes: { type: 'object', additionalProperties: str } }),
  'object-download-redirect-response': obj({ url: { type: 'string', format: 'uri' } }),
  'dashboard-config-response': obj({ rootUrl: { type: 'string', format: 'uri' } }),
  'artifact-content-response': artifactContent,
  'artifact-response': artifact,
  'list-artifacts-response': pageOf('artifacts', artifact),

  // ---- task queues, provisioners, workers ----
  'taskqueue-response': taskQueue,
  'list-taskqueues-response': pageOf('taskQueues', taskQueue),
  'pending-tasks-response': obj({ provisionerId: str, workerType: str, taskQueueId, pendingTasks: int }),
  'task-queue-counts-response': obj({ provisionerId: str, workerType: str, taskQueueId, pendingTasks: int, claimedTasks: int }),
  'list-pending-tasks-response': pageOf('tasks', obj({ taskId: slugid, runId, inserted: dateTime, task })),
  'list-claimed-tasks-response': pageOf('tasks', obj({ taskId: slugid, runId, workerGroup: str, workerId: str, claimed: dateTime, task })),
  'provisioner-response': provisioner,
  'list-provisioners-response': pageOf('provisioners', provisioner),
  'workertype-response': obj({ ...workerType.properties, actions: { type: 'array' } }),
  'list-workertypes-response': pageOf('workerTypes', workerType),
  'worker-response': worker,
  'list-workers-response': pageOf(
    'workers',
    obj({ workerGroup: str, workerId: str, firstClaim: dateTime, lastDateActive: dateTime, quarantineUntil: dateTime, latestTask: taskRun }, [
      'workerGroup',
      'workerId',
      'firstClaim',
    ]),
  ),

  // ---- operator queries ----
  'task-history-response': pageOf(
    'history',
    obj(
      {
        seq: { type: 'integer', minimum: 1 },
        time: dateTime,
        event: { type: 'string', enum: ['created', 'scheduled', 'claimed', 'reclaimed', 'resolved', 'prioritized'] },
        runId,
        from: { type: ['string', 'null'] },
        to: str,
        reason: str,
        actor: str,
        workerGroup: str,
        workerId: str,
        takenUntil: dateTime,
      },
      ['seq', 'time', 'event', 'from', 'to', 'reason'],
    ),
    { taskId: slugid },
  ),
  'list-task-queue-tasks-response': pageOf('tasks', indexEntry, { taskQueueId, state: str }),
  'list-resolved-tasks-response': pageOf('tasks', indexEntry),
  'latest-tasks-response': pageOf('tasks', obj({ taskId: slugid, name: str, taskQueueId, taskGroupId: slugid, created: dateTime, status: taskStatus })),
  'task-queue-state-counts-response': obj({ taskQueueId, since: dateTime, counts }),
  'worker-state-counts-response': obj({ taskQueueId, workerGroup: str, workerId: str, since: dateTime, counts }),
  'live-log-url-response': obj({ url: str, expires: dateTime, maxBytes: int }),
  'live-log-response': obj({
    taskId: slugid,
    runId,
    state: str,
    offset: int,
    next: int,
    size: int,
    text: str,
    source: { type: 'string', enum: ['live', 'artifact', 'none'] },
  }),
  'chart-minutes-response': obj(
    {
      taskQueueId,
      since: dateTime,
      minutes: {
        type: 'array',
        items: obj({
          minute: dateTime,
          pending: int,
          running: int,
          completed: int,
          failed: int,
          exception: int,
          started: int,
          waitP50Ms: { type: ['integer', 'null'] },
          waitP95Ms: { type: ['integer', 'null'] },
        }),
      },
    },
    ['since', 'minutes'],
  ),

  // ---- index ----
  'indexed-task-response': indexedTask,
  'list-tasks-response': pageOf('tasks', indexedTask),
  'list-namespaces-response': pageOf('namespaces', obj({ namespace: str, name: str, expires: dateTime })),

  // ---- hooks ----
  'hook-definition': hookDefinition,
  'list-hooks-response': obj({ hooks: { type: 'array', items: hookDefinition } }),
  'list-hook-groups-response': obj({ groups: strings }),
  'hook-status': obj({ lastFire, nextScheduledDate: dateTime }, ['lastFire']),
  'trigger-hook-response': {
    anyOf: [
      obj({ taskId: slugid, status: obj({ taskId: slugid }, []) }, ['taskId']),
      { type: 'object', additionalProperties: false, description: 'The template rendered null: no task.' },
    ],
  },
  'trigger-token-response': obj({ token: str }),
  'list-lastFires-response': pageOf('lastFires', fire),

  // ---- auth ----
  'get-client-response': obj(client),
  'create-client-response': obj({ ...client, accessToken: str }),
  'list-clients-response': pageOf('clients', obj(client)),
  'get-role-response': role,
  'list-roles-response': { type: 'array', items: role },
  'list-roles2-response': pageOf('roles', role),
  'list-role-ids-response': pageOf('roleIds', strings.items),
  'test-authenticate-response': obj({ clientId: str, scopes: strings }, ['scopes']),
  // Taskcluster's: getEntityHistory and listAuditHistory answer the same shape.
  'get-entity-history-response': pageOf('auditHistory', obj({ clientId: str, actionType: str, created: dateTime, entityId: str, entityType: str })),

  'azure-account-list-response': obj({ accounts: strings }),
  'azure-table-list-response': obj({ tables: strings, continuationToken: str }, ['tables']),
  'azure-table-access-response': obj({ sas: str, expiry: dateTime }),
  'azure-container-list-response': obj({ containers: strings, continuationToken: str }, ['containers']),
  'azure-container-response': obj({ sas: str, expiry: dateTime }),

  // ---- secrets ----
  // `secret` is also the request's (shared/api/routes/secrets.ts), as in Taskcluster.
  'secret-list': obj({ secrets: strings, continuationToken: str }, ['secrets']),
  'secret-expiry-list': pageOf('secrets', obj({ name: str, expires: dateTime, expired: bool })),
  'authenticate-hawk-response': {
    oneOf: [
      obj({ status: { enum: ['auth-success'] }, scopes: strings, scheme: { enum: ['hawk'] }, hash: str, clientId: str, expires: dateTime }, [
        'status',
        'scopes',
        'scheme',
        'clientId',
        'expires',
      ]),
      obj({ status: { enum: ['auth-failed'] }, message: str }),
      obj({ status: { enum: ['no-auth'] }, scheme: { enum: ['none'] }, scopes: strings, expires: dateTime }),
    ],
  },
};

for (const [id, schema] of Object.entries(OUTPUT_SCHEMAS)) registerSchema(id, schema);

/** Checking responses must not change them: no defaults filled in, unlike request validation. */
const ajv = new Ajv({ allErrors: true, strict: false });
addFormats(ajv);
const compiled = new Map<string, ValidateFunction>();

/** Why `body` breaks the schema `id` (empty when it conforms). */
export function outputErrors(id: string, body: unknown): string[] {
  let fn = compiled.get(id);
  if (!fn) {
    const schema = schemaById(id);
    if (!schema) return [`unknown schema ${id}`];
    fn = ajv.compile(schema);
    compiled.set(id, fn);
  }
  if (fn(body)) return [];
  return (fn.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message}${e.params ? ' ' + JSON.stringify(e.params) : ''}`);
}
