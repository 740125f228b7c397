/**
 * API references generated from the route table, one per service, in Taskcluster's format, so
 * `taskcluster-client`'s `createClient(reference)` builds a working client from any of them. The
 * app serves them and the schemas they name (the platform's `api` route prefix puts Taskcluster's
 * `<rootUrl>/references/...` and `/schemas/...` under `<rootUrl>/api/`).
 */
import './output-schemas';
import { ok, RouteDef } from './types';
import { schemaById } from './schemas';
import { notFound } from '../errors';

/** The category of this queue's own operator queries; they get a reference of their own. */
export const OPS_QUERIES = 'Operator queries';
/** The category of event subscriptions and task events (shared/api/routes/events.ts); a reference of their own. */
export const EVENTS = 'Events';

export interface ReferenceSpec {
  /** Served as `/api/references/<name>/v1/api.json`. */
  name: string;
  /** The service whose URLs the client builds (`/api/<serviceName>/v1/...`). */
  serviceName: 'queue' | 'auth' | 'object' | 'index' | 'hooks' | 'secrets';
  title: string;
  description: string;
  includes(r: RouteDef): boolean;
}

export const REFERENCES: ReferenceSpec[] = [
  {
    name: 'queue',
    serviceName: 'queue',
    title: 'Queue Service',
    description:
      'The queue service is responsible for accepting tasks and tracking their state as they are executed by workers, in order to ensure they are eventually resolved.',
    includes: (r) => r.service === 'queue' && r.category !== OPS_QUERIES && r.category !== EVENTS,
  },
  {
    name: 'auth',
    serviceName: 'auth',
    title: 'Authentication API',
    description: 'The subset of the Taskcluster Auth API this deployment serves: clients, roles and scopes.',
    includes: (r) => r.service === 'auth',
  },
  {
    name: 'object',
    serviceName: 'object',
    title: 'Object Service',
    description: 'Object artifacts on Blob storage: uploads (dataInline, putUrl) and downloads (getUrl, simple) with hashes.',
    includes: (r) => r.service === 'object',
  },
  {
    name: 'index',
    serviceName: 'index',
    title: 'Index Service',
    description:
      "Tasks found by name: a hierarchy of namespaces, each entry pointing at a task (inserted by call or by a completed task's `index.<namespace>` route).",
    includes: (r) => r.service === 'index',
  },
  {
    name: 'hooks',
    serviceName: 'hooks',
    title: 'Hooks Service',
    description: 'Hooks create tasks from a JSON-e template on a schedule, on a call (with credentials or a trigger token) or on queue events.',
    includes: (r) => r.service === 'hooks',
  },
  {
    name: 'secrets',
    serviceName: 'secrets',
    title: 'Secrets Service',
    description:
      'The secrets service provides a simple key/value store for small bits of secret data. Access is limited by scopes, so values can be ' +
      'considered secret from those who do not have the relevant scopes. Secrets also have an expiration date, and once a secret has ' +
      'expired it can no longer be read.',
    includes: (r) => r.service === 'secrets',
  },
  {
    name: 'queue-ops',
    serviceName: 'queue',
    title: 'Queue operator queries',
    description: 'Task history, tasks by state and time, latest tasks and counts by state.',
    includes: (r) => r.service === 'queue' && r.category === OPS_QUERIES,
  },
  {
    name: 'queue-events',
    serviceName: 'queue',
    title: 'Queue events: subscriptions',
    description: "Subscriptions to the queue's events, each delivered into its own storage queue, and a task's recorded events.",
    includes: (r) => r.service === 'queue' && r.category === EVENTS,
  },
];

const spec = (name: string) => REFERENCES.find((s) => s.name === name);

/** Where a reference's schemas are served, and so their `$id`s. */
export function schemaPath(reference: string, schemaId: string): string {
  return `/api/schemas/${reference}/v1/${schemaId}.json`;
}

export function apiReference(s: ReferenceSpec, routes: RouteDef[]) {
  return {
    $schema: '/schemas/common/api-reference-v0.json#',
    apiVersion: 'v1',
    serviceName: s.serviceName,
    title: s.title,
    description: s.description,
    entries: routes.filter(s.includes).map((r) => ({
      type: 'function',
      name: r.name,
      title: r.title,
      description: r.description,
      stability: r.stability,
      method: r.method.toLowerCase(),
      route: r.route.replace(/\*>/g, '>'),
      args: [...r.route.matchAll(/<([a-zA-Z0-9_]+)\*?>/g)].map((m) => m[1]),
      query: r.query ?? [],
      ...(r.input && !r.legacyInput ? { input: `${schemaPath(s.name, r.input)}#` } : {}),
      ...(r.output ? { output: `${schemaPath(s.name, r.output)}#` } : {}),
      ...(r.scopes !== null ? { scopes: r.scopes } : {}),
      category: r.category ?? s.title,
    })),
  };
}

/** The served schema: the registered one with its `$id` where it is served. */
export function servedSchema(reference: string, schemaId: string, routes: RouteDef[]): object | undefined {
  const s = spec(reference);
  const schema = schemaById(schemaId);
  if (!s || !schema || !routes.some((r) => s.includes(r) && (r.input === schemaId || r.output === schemaId))) return undefined;
  return { $schema: 'http://json-schema.org/draft-07/schema#', $id: `${schemaPath(reference, schemaId)}#`, ...schema };
}

/** The routes serving the references and their schemas; `table` is the whole route table. */
export function referenceRoutes(table: () => RouteDef[]): RouteDef[] {
  return [
    {
      name: 'apiReference',
      service: 'web',
      method: 'GET',
      route: '/references/<reference>/v1/api.json',
      scopes: null,
      title: 'API Reference',
      description: `The API reference of a service (${REFERENCES.map((s) => s.name).join(', ')}), generated from the route table.`,
      stability: 'experimental',
      output: 'api-reference',
      handler: async (req) => {
        const s = spec(req.params.reference);
        if (!s) throw notFound(`no API reference ${req.params.reference}`);
        return ok(apiReference(s, table()));
      },
    },
    {
      name: 'apiSchema',
      service: 'web',
      method: 'GET',
      route: '/schemas/<reference>/v1/<schema>',
      scopes: null,
      title: 'JSON Schema',
      description: 'A request or response schema named by an API reference, under its `$id`.',
      stability: 'experimental',
      output: 'json-schema',
      handler: async (req) => {
        const schema = servedSchema(req.params.reference, req.params.schema.replace(/\.json$/, ''), table());
        if (!schema) throw notFound(`no schema ${req.params.schema} in ${req.params.reference}`);
        return ok(schema);
      },
    },
  ];
}
