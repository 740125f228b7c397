/**
 * What subscribers cost a lifecycle's requests, in storage calls (deterministic, on the in-memory
 * store): with 100 subscriptions matching everything no more than with one. Up to INLINE_FANOUT
 * the requests put each event into each queue; beyond, each write leaves one fan-out message,
 * and the reaper's pass makes the queue puts. (Latency: bench phase (s).)
 */
import { startTestService, TestService, taskDef, slugid } from '../helpers/service';
import { claimOne, uniqueQueue } from '../helpers/work';
import { eventsClient, drainSubscription, short } from '../helpers/events';
import { EXCHANGES, EXCHANGE_PREFIX } from '../../shared/events/exchanges';

type Counts = Record<string, number>;

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_STORAGE_CONNECTION: 'memory:' });
});
afterAll(async () => svc?.close());

const bindings = EXCHANGES.map((e) => ({ exchange: EXCHANGE_PREFIX + e, routingKeyPattern: '#' }));

/** Calls between two snapshots, without the subscription list's re-read (whichever call comes after its 5 s). */
function diff(after: Counts, before: Counts): Counts {
  const out: Counts = {};
  for (const [k, v] of Object.entries(after)) if (v !== (before[k] ?? 0) && k !== 'Subscriptions.query') out[k] = v - (before[k] ?? 0);
  return out;
}
const events = (c: Counts) => Object.fromEntries(Object.entries(c).filter(([k]) => /^(events|subscription)\./.test(k) || k === 'deadline.update'));
const total = (c: Counts) => Object.values(c).reduce((a, b) => a + b, 0);

async function lifecycle() {
  const at = async () => {
    await svc.services.indexes.settled();
    return svc.services.storage.meter.snapshot().byOp;
  };
  const tq = uniqueQueue();
  const taskId = slugid();
  const s0 = await at();
  await svc.queue().createTask(taskId, taskDef(tq));
  const s1 = await at();
  const c = await claimOne(svc, tq, taskId);
  const s2 = await at();
  await svc.queue(c.credentials).reportCompleted(taskId, c.runId);
  const s3 = await at();
  await svc.runReaper();
  const s4 = await at();
  const requests = { createTask: diff(s1, s0), claimWork: diff(s2, s1), reportCompleted: diff(s3, s2) };
  return { taskId, requests, total: total(requests.createTask) + total(requests.claimWork) + total(requests.reportCompleted), reaper: diff(s4, s3) };
}

async function subscribe(n: number): Promise<any[]> {
  const ev = eventsClient(svc);
  const subs = [];
  for (let i = 0; i < n; i++) subs.push(await ev.createSubscription(`cost-${slugid()}`, { bindings, expires: new Date(Date.now() + 3600_000).toJSON() }));
  await svc.services.events.dispatcher.subscriptions.refresh();
  return subs;
}

test('a lifecycle with 100 subscriptions matching everything costs its requests no more calls than with one', async () => {
  await lifecycle(); // warm: the task queue, the auth cache
  const none = await lifecycle();
  const [first] = await subscribe(1);
  const one = await lifecycle();
  // One put per event into the queue (task-group-resolved too), and the deadline trigger's re-arm.
  expect(events(one.requests.createTask)).toEqual({ 'subscription.put': 2, 'deadline.update': 1 });
  expect(events(one.requests.claimWork)).toEqual({ 'subscription.put': 1 });
  expect(events(one.requests.reportCompleted)).toEqual({ 'subscription.put': 2 });
  // And the deadline: a message of the task's own that guards the create's events (its report
  // deletes it), where without a listener it is an expiry-index row the report leaves alone; and so
  // the create's own expiry rows' write, which without a listener that row carries to its sweep.
  expect(one.total).toBe(none.total + 8);
  await drainSubscription(first);

  const subs = [first, ...(await subscribe(99))];
  const many = await lifecycle();
  // Each write leaves one fan-out message instead of its queue puts (createTask's deadline
  // trigger guarded its events, claimWork's and reportCompleted's the claim-expiry trigger).
  expect(events(many.requests.createTask)).toEqual({ 'events.put': 1, 'deadline.update': 1 });
  expect(events(many.requests.claimWork)).toEqual({ 'events.put': 1 });
  // task-completed's, and task-group-resolved's (which carries its event).
  expect(events(many.requests.reportCompleted)).toEqual({ 'events.put': 2 });
  expect(many.total).toBeLessThanOrEqual(one.total);
  // The reaper's pass: five events into each of the 100 queues, each fan-out message deleted.
  expect(many.reaper['subscription.put']).toBe(500);
  expect(many.reaper['events.delete']).toBe(4);
  for (const s of subs) {
    const got = [...new Map((await drainSubscription(s)).map((e) => [e.id, e])).values()];
    expect(got.map((e) => short(e.exchange))).toEqual(['task-defined', 'task-pending', 'task-running', 'task-completed', 'task-group-resolved']);
  }
}, 120_000);
