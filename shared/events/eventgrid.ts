/**
 * Event Grid delivery: every event is also published to a custom topic as a CloudEvent 1.0 (type
 * per exchange, subject = the primary routing key, data = the Taskcluster message plus `routes`).
 * In Azure the app authenticates with its managed identity; a topic access key is accepted for
 * setups without one (and for the local test endpoint).
 */
import type * as EventGridSdk from '@azure/eventgrid';
import type * as IdentitySdk from '@azure/identity';
import type { EventSink } from './dispatch';
import type { QueueEvent } from './exchanges';
import { AUTH_EXCHANGE_PREFIX, EXCHANGE_PREFIX, HOOKS_EXCHANGE_PREFIX } from './exchanges';

/** Event Grid accepts at most 1 MB per publish request; a task write has a handful of events, so batches stay far below. */
const MAX_EVENTS_PER_REQUEST = 100;
/** CloudEvent types name the queue's exchanges, e.g. `taskcluster.queue.v1.task-completed`. */
export const CLOUDEVENT_TYPE_PREFIX = 'taskcluster.queue.v1.';
/** The hooks' exchanges likewise: `taskcluster.hooks.v1.hook-created`. */
export const HOOKS_CLOUDEVENT_TYPE_PREFIX = 'taskcluster.hooks.v1.';
/** Auth's likewise: `taskcluster.auth.v1.client-created`. */
export const AUTH_CLOUDEVENT_TYPE_PREFIX = 'taskcluster.auth.v1.';

export interface EventGridSettings {
  /** Topic endpoint, e.g. https://<topic>.<region>-1.eventgrid.azure.net/api/events */
  endpoint: string;
  /** Topic access key; without it the managed identity (DefaultAzureCredential) is used. */
  key?: string;
  /** Client id of a user-assigned managed identity. */
  managedIdentityClientId?: string;
  /** CloudEvents `source`: the queue's root URL. */
  source: string;
}

/** `exchange/taskcluster-<service>/v1/<name>` → `taskcluster.<service>.v1.<name>`. */
export function cloudEventType(exchange: string): string {
  if (exchange.startsWith(EXCHANGE_PREFIX)) return CLOUDEVENT_TYPE_PREFIX + exchange.slice(EXCHANGE_PREFIX.length);
  if (exchange.startsWith(HOOKS_EXCHANGE_PREFIX)) return HOOKS_CLOUDEVENT_TYPE_PREFIX + exchange.slice(HOOKS_EXCHANGE_PREFIX.length);
  if (exchange.startsWith(AUTH_EXCHANGE_PREFIX)) return AUTH_CLOUDEVENT_TYPE_PREFIX + exchange.slice(AUTH_EXCHANGE_PREFIX.length);
  return exchange;
}

export function cloudEventOf(e: QueueEvent, source: string) {
  return {
    id: e.id,
    type: cloudEventType(e.exchange),
    source,
    subject: e.routingKey,
    datacontenttype: 'application/json',
    data: { ...e.payload, routes: e.routes },
    extensionAttributes: { tcseq: e.seq },
  };
}

export function eventGridSink(s: EventGridSettings): EventSink {
  // Loaded only where a topic is configured: the SDKs add to every cold start otherwise.
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { AzureKeyCredential, EventGridPublisherClient } = require('@azure/eventgrid') as typeof EventGridSdk;
  const { DefaultAzureCredential } = require('@azure/identity') as typeof IdentitySdk;
  /* eslint-enable @typescript-eslint/no-require-imports */
  const credential = s.key ? new AzureKeyCredential(s.key) : new DefaultAzureCredential({ managedIdentityClientId: s.managedIdentityClientId });
  // Plain http only ever points at a local endpoint (tests); Azure topics are https.
  // No SDK retries: a failed publish is retried by the reaper's sweep, and the API call does not wait for back-offs.
  const client = new EventGridPublisherClient(s.endpoint, 'CloudEvent', credential, {
    allowInsecureConnection: s.endpoint.startsWith('http:'),
    retryOptions: { maxRetries: 0 },
  });
  return {
    name: 'eventgrid',
    async publish(events: QueueEvent[]): Promise<void> {
      for (let i = 0; i < events.length; i += MAX_EVENTS_PER_REQUEST) {
        await client.send(events.slice(i, i + MAX_EVENTS_PER_REQUEST).map((e) => cloudEventOf(e, s.source)));
      }
    },
  };
}
