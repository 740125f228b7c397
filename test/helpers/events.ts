/**
 * The consumer side of event subscriptions: a taskcluster-client class built from the route table
 * (so requests are Hawk-signed like any other client's), and a reader that drains a subscription
 * queue through its SAS URLs with plain HTTP.
 */
import type { TestService } from './service';
import { eventsApiReference } from '../../shared/api/routes/events';
import { poll, deleteMessage } from './azure-queue';

export function eventsClient(svc: TestService, credentials?: { clientId: string; accessToken: string } | null): any {
  const Cls = svc.tc.createClient(eventsApiReference());
  return new Cls({ rootUrl: svc.rootUrl, credentials: credentials === null ? undefined : (credentials ?? svc.root), retries: 0 });
}

export interface DeliveredEvent {
  id: string;
  seq: number;
  exchange: string;
  routingKey: string;
  routes: string[];
  payload: any;
}

/** Receives and deletes everything currently visible in the subscription's queue. */
export async function drainSubscription(urls: { signedPollUrl: string; signedDeleteUrl: string }): Promise<DeliveredEvent[]> {
  const out: DeliveredEvent[] = [];
  for (;;) {
    const r = await poll(urls.signedPollUrl, 32);
    if (r.status !== 200) throw new Error(`subscription poll gave ${r.status}: ${r.xml}`);
    if (!r.messages.length) return out;
    for (const m of r.messages) {
      out.push(m.body as unknown as DeliveredEvent);
      const s = await deleteMessage(urls.signedDeleteUrl, m);
      if (s !== 204) throw new Error(`delete gave ${s}`);
    }
  }
}

/** Short name of an exchange, e.g. `task-completed`. */
export const short = (exchange: string) => exchange.replace('exchange/taskcluster-queue/v1/', '');
