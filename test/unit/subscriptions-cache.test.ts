/**
 * The subscription list each instance caches for event dispatch: requests that find it missing or
 * stale at the same moment (a claimWork batch dispatches one event per claimed task) share one
 * read of the table instead of each making its own.
 */
import { MemoryStorage } from '../../shared/storage/memory';
import { ExpiryIndex } from '../../shared/tasks/expiry';
import { Subscriptions } from '../../shared/events/subscriptions';

async function setup() {
  const storage = new MemoryStorage('sc');
  await storage.ensureAll();
  const subs = new Subscriptions(storage, new ExpiryIndex(storage), () => new Date());
  const queries = () => storage.meter.byOp.get('Subscriptions.query') ?? 0;
  return { storage, subs, queries };
}

test('32 dispatches that find no cached list read the subscriptions once', async () => {
  const { subs, queries } = await setup();
  const lists = await Promise.all(Array.from({ length: 32 }, () => subs.active()));
  expect(queries()).toBe(1);
  // Each gets the system subscription (there are no others).
  for (const l of lists) expect(l.map((s) => s.subscriptionId)).toEqual(['~system-consumers']);
  await subs.active();
  expect(queries()).toBe(1); // cached now
});

test('a change made while a read is under way is seen by the next request', async () => {
  const { subs, queries } = await setup();
  const inFlight = subs.active();
  await subs.create({
    subscriptionId: 'late',
    bindings: [{ exchange: 'exchange/taskcluster-queue/v1/task-completed', routingKeyPattern: '#' }],
    expires: new Date(Date.now() + 3600_000).toJSON(),
  });
  await inFlight;
  const before = queries();
  const after = await subs.active();
  expect(queries()).toBe(before + 1);
  expect(after.map((s) => s.subscriptionId)).toContain('late');
});
