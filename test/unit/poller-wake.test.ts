/**
 * A local wake names the pending queue the new hint went to: with several shards, the poller's
 * next pass starts there instead of receiving empty shards first. A request whose window ends
 * while the poller sleeps between passes still gets a look before it is answered.
 */
import { HintPoller, MIN_BACKOFF_MS } from '../../shared/work/poller';
import { PendingQueues } from '../../shared/tasks/pending';
import { MemoryStorage } from '../../shared/storage/memory';
import type { Services } from '../../shared/services';

const TQ = 'prov/wake';
const SHARDS = 3;

async function setup() {
  const storage = new MemoryStorage('wake');
  await storage.table('TaskQueues').create();
  const pending = new PendingQueues(storage, 'key', { default: SHARDS, byQueue: {} });
  const received: number[] = [];
  const queue = pending.queue.bind(pending);
  const wrapped = new WeakSet<object>();
  // Records which shard each receive went to (a queue object is shared per name: wrapped once).
  pending.queue = (taskQueueId, priority, shard = 0) => {
    const q = queue(taskQueueId, priority, shard);
    if (wrapped.has(q)) return q;
    wrapped.add(q);
    const receive = q.receive.bind(q);
    q.receive = (count, visibilityS) => {
      received.push(shard);
      return receive(count, visibilityS);
    };
    return q;
  };
  const svc = { pending, tuning: { hintLeaseS: 60 }, log: { warn: () => undefined, error: () => undefined } } as unknown as Services;
  return { pending, received, poller: new HintPoller(svc, TQ) };
}

/** A taskId whose hints go to `shard`. */
function idIn(pending: PendingQueues, shard: number): string {
  for (let i = 0; ; i++) if (pending.shardOf(TQ, `task${i}`) === shard) return `task${i}`;
}

test.each([0, 1, 2])('woken for a hint in shard %i, the pass receives that shard first and no other', async (shard) => {
  const { pending, received, poller } = await setup();
  // Every shard is in use (a hint was put in each and consumed), as in a busy task queue.
  for (let s = 0; s < SHARDS; s++) await pending.ensure(TQ, 'lowest', s);
  const taskId = idIn(pending, shard);
  await pending.put(TQ, 'lowest', taskId, 0, 'h', new Date(Date.now() + 60_000).toJSON());
  poller.wake({ priority: 'lowest', shard });
  const got = await poller.request(1, Date.now() + 5_000);
  expect(got.map((l) => l.hint.taskId)).toEqual([taskId]);
  expect(received).toEqual([shard]);
});

test('without a wake, passes rotate their starting shard', async () => {
  const { pending, received, poller } = await setup();
  for (let s = 0; s < SHARDS; s++) await pending.ensure(TQ, 'lowest', s);
  const taskId = idIn(pending, 2);
  await pending.put(TQ, 'lowest', taskId, 0, 'h', new Date(Date.now() + 60_000).toJSON());
  const got = await poller.request(1, Date.now() + 5_000);
  expect(got.map((l) => l.hint.taskId)).toEqual([taskId]);
  // The first pass starts at shard 0 and reaches shard 2 after two empty receives.
  expect(received).toEqual([0, 1, 2]);
});

describe('a window shorter than the back-off', () => {
  // Inside the back-off that follows an empty pass.
  const ASLEEP_MS = MIN_BACKOFF_MS / 4;

  test('is answered after a pass that looked: a hint put while the poller sleeps is handed out', async () => {
    const { pending, received, poller } = await setup();
    await pending.ensure(TQ, 'lowest', 0);
    // A long-polling waiter: its first pass finds nothing and the poller sleeps.
    const long = poller.request(1, Date.now() + 5_000);
    await new Promise((r) => setTimeout(r, ASLEEP_MS));
    const passes = received.length;
    expect(passes).toBeGreaterThan(0);
    await pending.put(TQ, 'lowest', 'first', 0, 'h', new Date(Date.now() + 60_000).toJSON());
    await pending.put(TQ, 'lowest', 'second', 0, 'h', new Date(Date.now() + 60_000).toJSON());
    // A window that has already ended: answered only once a pass has looked for it.
    const short = await poller.request(1, Date.now());
    expect(received.length).toBeGreaterThan(passes);
    expect(short).toHaveLength(1);
    expect((await long).length).toBe(1);
  });

  test('an empty answer comes after a look', async () => {
    const { pending, received, poller } = await setup();
    await pending.ensure(TQ, 'lowest', 0);
    const long = poller.request(1, Date.now() + 300);
    await new Promise((r) => setTimeout(r, ASLEEP_MS));
    const passes = received.length;
    expect(await poller.request(1, Date.now())).toEqual([]);
    expect(received.length).toBeGreaterThan(passes);
    expect(await long).toEqual([]);
  });
});

describe("createTask's hand-over (HintPoller.take)", () => {
  const W = { workerGroup: 'wg', workerId: 'w' };

  test('takes a waiter only once a pass found the pending queues empty, and not after a local hint', async () => {
    const { pending, received, poller } = await setup();
    await pending.ensure(TQ, 'lowest', 0);
    const answer = poller.request(1, Date.now() + 5_000, undefined, W);
    // Nothing has looked yet: a run pending already would go first.
    expect(poller.take()).toBeUndefined();
    while (received.length === 0) await new Promise((r) => setImmediate(r));
    while (!poller.handsOver) await new Promise((r) => setImmediate(r));
    // A hint put here (its create woke the poller): pending again until a pass finds nothing.
    poller.wake();
    expect(poller.take()).toBeUndefined();
    await pending.put(TQ, 'lowest', idIn(pending, 0), 0, 'h', new Date(Date.now() + 60_000).toJSON());
    const got = (await answer) as { hint: { taskId?: string } }[];
    expect(got.map((l) => l.hint.taskId)).toEqual([idIn(pending, 0)]);
  });

  test('a waiter given back rejoins the head of the line', async () => {
    const { pending, poller } = await setup();
    await pending.ensure(TQ, 'lowest', 0);
    const first = poller.request(1, Date.now() + 5_000, undefined, { ...W, workerId: 'first' });
    void poller.request(1, Date.now() + 5_000, undefined, { ...W, workerId: 'second' });
    while (!poller.handsOver) await new Promise((r) => setImmediate(r));
    const taken = poller.take()!;
    expect(taken.worker.workerId).toBe('first');
    taken.giveBack();
    const again = poller.take()!;
    expect(again.worker.workerId).toBe('first');
    again.giveBack();
    poller.stop();
    expect(await first).toEqual([]);
  });
});
