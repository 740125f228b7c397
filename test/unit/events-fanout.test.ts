/**
 * A request's delivery cost does not grow with the number of subscriptions: up to INLINE_FANOUT
 * matching subscriptions are delivered on the request path (in parallel), more are all left to a
 * fan-out message; the system subscription and the sinks are always delivered at once.
 */
import { EventDispatcher, INLINE_FANOUT } from '../../shared/events/dispatch';
import { SYSTEM_SUBSCRIPTION_ID, type Subscription, type Subscriptions } from '../../shared/events/subscriptions';
import type { QueueEvent } from '../../shared/events/exchanges';
import type { Storage } from '../../shared/storage/storage';

const everything = (id: string): Subscription => ({
  subscriptionId: id,
  bindings: [{ exchange: 'exchange/taskcluster-queue/v1/task-defined', routingKeyPattern: '#' }],
  expires: new Date(Date.now() + 3600_000).toJSON(),
  queueKey: `k${id}`,
});
const event: QueueEvent = {
  id: 'e.1',
  seq: 1,
  exchange: 'exchange/taskcluster-queue/v1/task-defined',
  routingKey: 'primary.t',
  routes: [],
  payload: { version: 1, status: {} } as never,
};

function setup(n: number) {
  const puts: string[] = [];
  const storage = { prefix: 't', queueNamed: (name: string) => ({ put: async () => void puts.push(name) }) } as unknown as Storage;
  const subs = [...Array.from({ length: n }, (_, i) => everything(`s${i}`)), { ...everything(SYSTEM_SUBSCRIPTION_ID), queueKey: undefined }];
  const published: number[] = [];
  const sink = { name: 'grid', publish: async (e: QueueEvent[]) => void published.push(e.length) };
  const d = new EventDispatcher(storage, { active: async () => subs } as unknown as Subscriptions, [sink], () => new Date());
  return { d, puts, published };
}

test.each([0, 1, INLINE_FANOUT])('%i matching subscriptions are delivered on the request path', async (n) => {
  const { d, puts, published } = setup(n);
  expect(await d.deliverBounded([event])).toBe(false);
  expect(puts).toHaveLength(n + 1);
  expect(published).toEqual([1]);
});

test.each([INLINE_FANOUT + 1, 100, 1000])('with %i, the request path puts one message (the system one); the fan-out puts the rest', async (n) => {
  const { d, puts, published } = setup(n);
  expect(await d.deliverBounded([event])).toBe(true);
  expect(puts).toHaveLength(1);
  expect(published).toEqual([1]);
  // The fan-out message's delivery: every subscription once, neither the system one nor the sinks again.
  await d.deliverToSubscriptions([event], new Date());
  expect(puts).toHaveLength(n + 1);
  expect(new Set(puts).size).toBe(n + 1);
  expect(published).toEqual([1]);
});
