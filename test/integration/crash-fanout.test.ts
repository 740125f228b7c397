/**
 * Events are never lost with more subscribers than a request delivers to: a failure after each
 * storage call of createTask, claimWork and reportCompleted (their fan-out messages included), and
 * of the reaper's pass that expands them, nobody retrying, still ends with every committed
 * transition's event in every subscription's queue.
 */
import { startTestService, TestService, taskDef, slugid } from '../helpers/service';
import { claimOne, uniqueQueue, sleep } from '../helpers/work';
import { eachStorageCall, sweeperFor } from '../helpers/crash';
import { eventsClient, drainSubscription } from '../helpers/events';
import { readHistory } from '../../shared/ops/history';
import { EXCHANGES, EXCHANGE_PREFIX } from '../../shared/events/exchanges';
import { INLINE_FANOUT } from '../../shared/events/dispatch';

let svc: TestService;
const subs: { signedPollUrl: string; signedDeleteUrl: string }[] = [];
/** Event ids each subscription received (repeats dropped, as consumers do). */
let received: Set<string>[] = [];

beforeAll(async () => {
  svc = await startTestService(
    { QUEUE_CLAIM_WORK_POLL_S: '1', QUEUE_CLAIM_TIMEOUT_S: '5' },
    { tuning: { triggerLeaseS: 2, eventSweepDelayS: 1, resolvedNetDelayS: 1 } },
  );
  const bindings = EXCHANGES.map((e) => ({ exchange: EXCHANGE_PREFIX + e, routingKeyPattern: '#' }));
  const expires = new Date(Date.now() + 3600_000).toJSON();
  for (let i = 0; i <= INLINE_FANOUT; i++) subs.push(await eventsClient(svc).createSubscription(`fan-${i}`, { bindings, expires }));
  received = subs.map(() => new Set());
}, 60_000);
afterAll(async () => svc?.close());

const sweep = (scenario: Parameters<typeof eachStorageCall>[1]) => sweeperFor(svc)(scenario);
const noRetry = (c?: any) => svc.queue(c, { retries: 0 });

/** Runs reaper passes until every subscription has the event of each committed transition of the task. */
async function expectEverywhere(taskId: string): Promise<void> {
  const end = Date.now() + 20_000;
  for (;;) {
    const { entries } = await readHistory(svc.services.storage, taskId, 1000);
    const expected = entries.filter((e) => e.event !== 'reclaimed').map((e) => `${taskId}.${e.seq}`);
    for (const [i, s] of subs.entries()) for (const e of await drainSubscription(s)) received[i].add(e.id);
    const missing = received.map((r) => expected.filter((id) => !r.has(id)).length).reduce((a, b) => a + b, 0);
    if (!missing) return;
    if (Date.now() > end) throw new Error(`${missing} events of ${taskId} never reached a subscription`);
    await svc.runReaper();
    await sleep(200);
  }
}

test('a lifecycle failed after each storage call', async () => {
  const ops = await sweep(async (faulty) => {
    const tq = uniqueQueue();
    const taskId = slugid();
    await faulty(() => noRetry().createTask(taskId, taskDef(tq)));
    await expectEverywhere(taskId);
  });
  // The deadline trigger guarded createTask's events until its fan-out message was put.
  expect(ops).toEqual(expect.arrayContaining(['deadline.put', 'Tasks.transaction', 'events.put', 'deadline.update']));
  const reportOps = await sweep(async (faulty) => {
    const tq = uniqueQueue();
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(tq));
    const c = await claimOne(svc, tq, taskId);
    await faulty(() => noRetry(c.credentials).reportCompleted(taskId, c.runId));
    await expectEverywhere(taskId);
  });
  expect(reportOps).toEqual(expect.arrayContaining(['Tasks.merge', 'events.put', 'claim.delete']));
  // The reaper's expansion of a fan-out message, failed after each of its calls.
  await sweep(async (faulty) => {
    const tq = uniqueQueue();
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(tq));
    await faulty(() => svc.runReaper());
    await expectEverywhere(taskId);
  });
}, 600_000);
