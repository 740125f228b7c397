/**
 * The consumer side of event subscriptions: a taskcluster-client class built from the route table
 * (so requests are Hawk-signed like any other client's), and a reader that drains a subscription
 * queue through its SAS URLs with plain HTTP.
 */
import { clock, type TestService } from './service';
import { eventsApiReference } from '../../shared/api/routes/events';
import { EXCHANGE_PREFIX } from '../../shared/events/exchanges';
import { poll, deleteMessage } from './azure-queue';
import { passTime } from './work';

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

/**
 * A subscription to task-group-resolved alone (a create's own events then have no listener).
 * Returns a reader of the event ids of one group delivered so far: it runs `passes` reaper passes
 * `stepMs` apart (late triggers and sweeps), draining the subscription after each.
 */
export async function groupResolvedListener(svc: TestService, name: string): Promise<(g: string, passes?: number, stepMs?: number) => Promise<string[]>> {
  const bindings = [{ exchange: `${EXCHANGE_PREFIX}task-group-resolved`, routingKeyPattern: '#' }];
  const urls = await eventsClient(svc).createSubscription(name, { bindings, expires: new Date(clock.ms() + 3600_000).toJSON() });
  const delivered = new Set<string>();
  return async (g, passes = 3, stepMs = 200) => {
    for (let i = 0; i < passes; i++) {
      await svc.runReaper();
      for (const e of await drainSubscription(urls)) delivered.add(e.id);
      await passTime(stepMs);
    }
    return [...delivered].filter((id) => id.startsWith(`${g}.resolved.`));
  };
}
