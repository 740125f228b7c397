/**
 * Request schemas (Taskcluster v1 shapes), validated with Ajv using defaults, as the real queue does.
 */
import Ajv, { ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { fullFormats } from 'ajv-formats/dist/formats';

import { CONCURRENCY_KEY, EXCEPTION_REASONS, IDENTIFIER, PRIORITIES, SLUGID, TASK_QUEUE_ID, WORKER_TYPE } from '../tasks/vocabulary';

export { EXCEPTION_REASONS, IDENTIFIER, PRIORITIES, SLUGID, TASK_QUEUE_ID, WORKER_TYPE, type Priority } from '../tasks/vocabulary';
export const PRINTABLE = '^[\\x20-\\x7e]*$';

const identifier = { type: 'string', minLength: 1, maxLength: 38, pattern: IDENTIFIER };
const slugid = { type: 'string', pattern: SLUGID };
const scope = { type: 'string', pattern: PRINTABLE };
const dateTime = { type: 'string', format: 'date-time' };

/** RFC 3339 as ajv-formats reads it (time zone required). */
const RFC3339 = fullFormats['date-time'] as { validate: (s: string) => boolean };

/**
 * Every `date-time` of every request: RFC 3339 that JavaScript's Date can represent. A leap second
 * (`23:59:60`) is valid RFC 3339 but no instant Date (or Azure Table Storage) holds; like
 * Taskcluster, it is refused (400) rather than moved to the next second.
 */
export function isDateTime(s: string): boolean {
  return RFC3339.validate(s) && !Number.isNaN(Date.parse(s));
}

const schemas: Record<string, object> = {
  'create-task-request': {
    type: 'object',
    additionalProperties: false,
    properties: {
      taskQueueId: { type: 'string', pattern: TASK_QUEUE_ID },
      provisionerId: identifier,
      workerType: { type: 'string', minLength: 1, maxLength: 38, pattern: WORKER_TYPE },
      schedulerId: { ...identifier, default: '-' },
      projectId: { type: 'string', minLength: 1, maxLength: 500, pattern: '^([a-zA-Z0-9._/-]*)$', default: 'none' },
      taskGroupId: slugid,
      dependencies: { type: 'array', items: slugid, uniqueItems: true, maxItems: 10000, default: [] },
      requires: { type: 'string', enum: ['all-completed', 'all-resolved'], default: 'all-completed' },
      routes: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 249 }, uniqueItems: true, maxItems: 64, default: [] },
      priority: { type: 'string', enum: [...PRIORITIES], default: 'lowest' },
      retries: { type: 'integer', minimum: 0, maximum: 49, default: 5 },
      created: dateTime,
      deadline: dateTime,
      expires: dateTime,
      scopes: { type: 'array', items: scope, default: [] },
      payload: { type: 'object' },
      metadata: {
        type: 'object',
        additionalProperties: false,
        required: ['name', 'description', 'owner', 'source'],
        properties: {
          name: { type: 'string', maxLength: 255 },
          description: { type: 'string', maxLength: 32768 },
          owner: { type: 'string', maxLength: 255 },
          source: { type: 'string', maxLength: 4096, pattern: '^(https?|ssh)://|^git@' },
        },
      },
      tags: { type: 'object', additionalProperties: { type: 'string', maxLength: 4096 }, default: {} },
      extra: { type: 'object', default: {} },
      notBefore: dateTime,
      concurrencyKey: { type: 'string', pattern: CONCURRENCY_KEY },
    },
    required: ['created', 'deadline', 'payload', 'metadata'],
  },
  'task-ids-request': {
    type: 'object',
    additionalProperties: false,
    properties: { taskIds: { type: 'array', items: slugid, maxItems: 1000 } },
    required: ['taskIds'],
  },
  'claim-work-request': {
    type: 'object',
    additionalProperties: false,
    properties: {
      workerGroup: identifier,
      workerId: identifier,
      tasks: { type: 'integer', minimum: 1, maximum: 32, default: 1 },
      xmlMessage: { type: 'string', maxLength: 1048576 },
    },
    required: ['workerGroup', 'workerId'],
  },
  'claim-task-request': {
    type: 'object',
    additionalProperties: false,
    properties: { workerGroup: identifier, workerId: identifier },
    required: ['workerGroup', 'workerId'],
  },
  'task-exception-request': {
    type: 'object',
    additionalProperties: false,
    properties: { reason: { type: 'string', enum: [...EXCEPTION_REASONS] } },
    required: ['reason'],
  },
  'report-completed-request': {
    type: 'object',
    properties: { success: { type: 'boolean' } },
  },
  'create-client-request': {
    type: 'object',
    additionalProperties: false,
    properties: {
      expires: dateTime,
      description: { type: 'string', maxLength: 10240, default: '' },
      // No default: updateClient without scopes keeps the client's (createClient reads none as []).
      scopes: { type: 'array', items: scope, uniqueItems: true },
      deleteOnExpiration: { type: 'boolean', default: false },
    },
    required: ['expires', 'description'],
  },
  'create-role-request': {
    type: 'object',
    additionalProperties: false,
    properties: {
      description: { type: 'string', maxLength: 10240 },
      scopes: { type: 'array', items: scope, uniqueItems: true },
    },
    required: ['description', 'scopes'],
  },
  'suspend-run-request': {
    type: 'object',
    additionalProperties: false,
    properties: { continuation: {}, resumeAt: dateTime },
    required: ['continuation'],
  },
  'change-priority-request': {
    type: 'object',
    additionalProperties: false,
    properties: { newPriority: { type: 'string', enum: [...PRIORITIES] } },
    required: ['newPriority'],
  },
  'authenticate-hawk-request': {
    type: 'object',
    additionalProperties: false,
    properties: {
      method: { type: 'string', minLength: 1, maxLength: 16 },
      resource: { type: 'string', minLength: 1, maxLength: 8192 },
      host: { type: 'string', minLength: 1, maxLength: 255 },
      port: { type: 'integer', minimum: 0, maximum: 65535 },
      authorization: { type: 'string', maxLength: 16384 },
      sourceIp: { type: 'string', maxLength: 45 },
    },
    required: ['method', 'resource', 'host', 'port'],
  },
  'test-authenticate-request': {
    type: 'object',
    additionalProperties: false,
    properties: {
      clientScopes: { type: 'array', items: scope, uniqueItems: true },
      requiredScopes: { type: 'array', items: scope, uniqueItems: true },
    },
  },
  scopeset: {
    type: 'object',
    additionalProperties: false,
    properties: { scopes: { type: 'array', items: scope } },
    required: ['scopes'],
  },
};

const ajv = new Ajv({ useDefaults: true, allErrors: true, strict: false });
addFormats(ajv);
ajv.addFormat('date-time', { validate: isDateTime });
const compiled = new Map<string, ValidateFunction>();

/** Validates (and fills defaults into) `value`; returns error lines, empty when valid. */
export function validate(schemaId: string, value: unknown): string[] {
  let fn = compiled.get(schemaId);
  if (!fn) {
    const schema = schemas[schemaId];
    if (!schema) throw new Error(`unknown schema ${schemaId}`);
    fn = ajv.compile(schema);
    compiled.set(schemaId, fn);
  }
  if (fn(value)) return [];
  return (fn.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message}${e.params ? ' ' + JSON.stringify(e.params) : ''}`);
}

export function registerSchema(id: string, schema: object): void {
  schemas[id] = schema;
}

/** The schema registered under `id` (request and response schemas alike), for serving. */
export function schemaById(id: string): object | undefined {
  return schemas[id];
}
