/**
 * Event subscriptions: create, get, list, delete. A subscription's events arrive in its own Azure
 * storage queue, read through the SAS URLs these calls return (like pollTaskUrls).
 */
import { RouteDef, ApiRequest, ok } from '../types';
import { notFound } from '../../errors';
import { decodeToken, encodeToken, isString, pageLimit } from '../continuation';
import { definitionOf, parseDefinition, queueIdOf, Subscription } from '../../events/subscriptions';
import { signedSubscriptionUrls } from '../../storage/subscription-queues';
import { readTaskEvents } from '../../events/outbox';
import { SAS_BACKDATE_MS, publicQueueEndpoint, sasProtocol } from '../../work/poll-urls';
import { EVENTS, REFERENCES, apiReference } from '../references';
import { registerSchema } from '../schemas';

const str = { type: 'string' };
const dateTime = { type: 'string', format: 'date-time' };
const binding = {
  type: 'object',
  properties: { exchange: str, routingKeyPattern: str },
  required: ['exchange', 'routingKeyPattern'],
  additionalProperties: false,
};
const bindings = { type: 'array', items: binding };
const event = {
  type: 'object',
  properties: { id: str, seq: { type: 'integer' }, exchange: str, routingKey: str, routes: { type: 'array', items: str }, payload: { type: 'object' } },
  required: ['id', 'seq', 'exchange', 'routingKey', 'routes', 'payload'],
  additionalProperties: false,
};
const continuationToken = { type: 'string' };
const subscription = { subscriptionId: str, bindings, expires: dateTime };

// The definition's details are checked by parseDefinition, whose messages say which binding is wrong.
registerSchema('create-subscription-request', { type: 'object', properties: { bindings: { type: 'array' }, expires: str } });
const OUTPUT_SCHEMAS: Record<string, object> = {
  'subscription-response': {
    type: 'object',
    properties: { ...subscription, signedPollUrl: str, signedDeleteUrl: str, urlsExpire: dateTime },
    required: ['subscriptionId', 'bindings', 'expires', 'signedPollUrl', 'signedDeleteUrl', 'urlsExpire'],
    additionalProperties: false,
  },
  'list-subscriptions-response': {
    type: 'object',
    properties: {
      subscriptions: { type: 'array', items: { type: 'object', properties: subscription, required: Object.keys(subscription), additionalProperties: false } },
      continuationToken,
    },
    required: ['subscriptions'],
    additionalProperties: false,
  },
  'task-events-response': {
    type: 'object',
    properties: { taskId: str, events: { type: 'array', items: event }, continuationToken },
    required: ['taskId', 'events'],
    additionalProperties: false,
  },
};
for (const [id, schema] of Object.entries(OUTPUT_SCHEMAS)) registerSchema(id, schema);

/** Consumers fetch fresh URLs with `subscription` before these run out. */
export const SUBSCRIPTION_URL_LIFETIME_MS = 60 * 60 * 1000;
/** A received event stays invisible this long while the consumer handles and deletes it. */
export const SUBSCRIPTION_POLL_VISIBILITY_S = 60;

function withUrls(req: ApiRequest, s: Subscription) {
  const svc = req.services;
  const now = svc.now().getTime();
  // Whole seconds, as the SAS `se` field carries it; never past the subscription itself.
  const expiresOn = new Date(Math.floor(Math.min(now + SUBSCRIPTION_URL_LIFETIME_MS, new Date(s.expires).getTime()) / 1000) * 1000);
  const endpoint = publicQueueEndpoint(svc);
  const urls = signedSubscriptionUrls(svc.storage, queueIdOf(s), {
    endpoint,
    startsOn: new Date(now - SAS_BACKDATE_MS),
    expiresOn,
    httpAllowed: sasProtocol(svc, endpoint) !== 'https',
    visibilityS: SUBSCRIPTION_POLL_VISIBILITY_S,
  });
  return { subscriptionId: s.subscriptionId, bindings: s.bindings, expires: s.expires, ...urls, urlsExpire: expiresOn.toJSON() };
}

async function existing(req: ApiRequest): Promise<Subscription> {
  const s = await req.services.events.dispatcher.subscriptions.get(req.params.subscriptionId);
  if (!s) throw notFound(`subscription ${req.params.subscriptionId} not found`);
  return s;
}

export const eventRoutes: RouteDef[] = [
  {
    name: 'createSubscription',
    title: 'Create Subscription',
    stability: 'experimental',
    category: EVENTS,
    input: 'create-subscription-request',
    output: 'subscription-response',
    service: 'queue',
    method: 'PUT',
    route: '/subscriptions/<subscriptionId>',
    scopes: 'queue:create-subscription:<subscriptionId>',
    description:
      'Create a subscription to queue and hooks events: `{bindings: [{exchange, routingKeyPattern}], expires}`, with AMQP topic patterns matched against ' +
      'the primary routing key and every `route.<route>` CC (the bindings `QueueEvents` and `HooksEvents` build work as they are). Idempotent for the same ' +
      'definition; a different one under the same id is a 409. Answers SAS URLs to receive and delete the messages of its own queue.',
    handler: async (req) => {
      const svc = req.services;
      const def = parseDefinition(req.params.subscriptionId, req.body, svc.now());
      return ok(withUrls(req, await svc.events.dispatcher.subscriptions.create(def, (await req.caller()).clientId ?? '')));
    },
  },
  {
    name: 'subscription',
    title: 'Get Subscription',
    stability: 'experimental',
    category: EVENTS,
    output: 'subscription-response',
    service: 'queue',
    method: 'GET',
    route: '/subscriptions/<subscriptionId>',
    scopes: 'queue:get-subscription:<subscriptionId>',
    description:
      'A subscription with fresh SAS poll/delete URLs for its queue (each message is base64 JSON `{id, seq, exchange, routingKey, routes, payload}`).',
    handler: async (req) => ok(withUrls(req, await existing(req))),
  },
  {
    name: 'deleteSubscription',
    title: 'Delete Subscription',
    stability: 'experimental',
    category: EVENTS,
    output: 'empty-response',
    service: 'queue',
    method: 'DELETE',
    route: '/subscriptions/<subscriptionId>',
    scopes: 'queue:delete-subscription:<subscriptionId>',
    description: 'Delete a subscription and its queue, with any events still in it. Deleting a missing subscription succeeds.',
    handler: async (req) => {
      await req.services.events.dispatcher.subscriptions.delete(req.params.subscriptionId);
      return { status: 200, body: {} };
    },
  },
  {
    name: 'taskEvents',
    title: 'Task Events',
    stability: 'experimental',
    category: EVENTS,
    output: 'task-events-response',
    service: 'queue',
    method: 'GET',
    route: '/task/<taskId>/events',
    query: ['continuationToken', 'limit'],
    scopes: 'queue:status:<taskId>',
    description: 'The events recorded for a task (the Taskcluster messages with their ids, seqs, routing keys and CCs), newest first.',
    handler: async (req) => {
      const svc = req.services;
      const r = await readTaskEvents(svc.storage, req.params.taskId, pageLimit(req.query.limit), decodeToken(req.query.continuationToken, isString));
      if (!r.events.length && !req.query.continuationToken && !(await svc.tasks.load(req.params.taskId))) throw notFound(`task ${req.params.taskId} not found`);
      const token = encodeToken(r.continuation);
      return ok({ taskId: req.params.taskId, events: r.events, ...(token ? { continuationToken: token } : {}) });
    },
  },
  {
    name: 'listSubscriptions',
    title: 'List Subscriptions',
    stability: 'experimental',
    category: EVENTS,
    output: 'list-subscriptions-response',
    service: 'queue',
    method: 'GET',
    route: '/subscriptions',
    query: ['continuationToken', 'limit'],
    scopes: 'queue:list-subscriptions',
    description: 'The active subscriptions (without URLs), paged.',
    handler: async (req) => {
      const page = await req.services.events.dispatcher.subscriptions.page(pageLimit(req.query.limit), decodeToken(req.query.continuationToken, isString));
      const token = encodeToken(page.continuation);
      return ok({ subscriptions: page.items.map(definitionOf), ...(token ? { continuationToken: token } : {}) });
    },
  },
];

/** The subscription endpoints as a taskcluster-client API reference: `new (tc.createClient(ref))({rootUrl, credentials})`. */
export function eventsApiReference() {
  return apiReference(
    REFERENCES.find((r) => r.name === 'queue-events')!,
    eventRoutes,
  );
}

eventRoutes.push({
  name: 'eventsReference',
  title: 'Events API Reference',
  description: 'The subscription endpoints as a taskcluster-client API reference (also served under /api/references/queue-events/v1/api.json).',
  stability: 'experimental',
  output: 'api-reference',
  service: 'queue',
  method: 'GET',
  route: '/events/reference',
  scopes: null,
  handler: async () => ok(eventsApiReference()),
});
