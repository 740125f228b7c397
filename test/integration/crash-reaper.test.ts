/**
 * Crash safety of the reaper's handlers: a failure after each storage call of a reaper pass that
 * handles a claim expiry (with a retry, and without one but with a dependent) or a deadline (with a
 * dependent). The next passes, on another instance, must finish the work: one retry run, the
 * dependent scheduled once, nothing resolved twice.
 */
import { startTestService, startSecondInstance, TestService, taskDef, slugid } from '../helpers/service';
import { CHECK_POLL_S, claim, claimAny, passTime, reapUntil, runSummary, status, uniqueQueue, waitUntil, W1, W2 } from '../helpers/work';
import { eachStorageCall } from '../helpers/crash';
import { runReaper } from '../../shared/reaper/reaper';
import { triggerShardNames } from '../../shared/storage/trigger-shards';
import { EXCHANGE_PREFIX } from '../../shared/events/exchanges';

/** How long a trigger may take to show: its visibility is whole seconds. */
const TRIGGER_SHOWS_MS = 5000;
const STEP_MS = 50;

/** Lets time pass until a trigger message is visible in any shard (peeked through B: leases nothing, outside A's sweep). */
async function triggerVisible(queue: 'claim'): Promise<void> {
  const shards = triggerShardNames(b.services.storage.prefix, queue).map((name) => b.services.storage.queueNamed(name, queue));
  const visible = async () => (await Promise.all(shards.map((q) => q.peek(1)))).some((p) => p.length > 0);
  for (let waited = 0; !(await visible()); waited += STEP_MS) {
    if (waited > TRIGGER_SHOWS_MS) throw new Error(`no ${queue} trigger became visible`);
    await passTime(STEP_MS);
  }
}

let a: TestService;
let b: TestService;
/** Claims made only to check claimability: a long claim timeout, so they leave no trigger that fires during the test. */
let c: TestService;
beforeAll(async () => {
  const env = { QUEUE_CLAIM_WORK_POLL_S: '1', QUEUE_CLAIM_TIMEOUT_S: '1', QUEUE_DEADLINE_DELAY_S: '0' };
  a = await startTestService(env, { tuning: { hintLeaseS: 4, triggerLeaseS: 2 } });
  b = await startSecondInstance(a, { QUEUE_CLAIM_WORK_POLL_S: CHECK_POLL_S });
  c = await startSecondInstance(a, { QUEUE_CLAIM_WORK_POLL_S: CHECK_POLL_S, QUEUE_CLAIM_TIMEOUT_S: '600' });
});
afterAll(async () => {
  await c?.close();
  await b?.close();
  await a?.close();
});

const sweep = (scenario: Parameters<typeof eachStorageCall>[1]) =>
  eachStorageCall(a.services.storage.meter, scenario, { warm: () => a.services.events.dispatcher.subscriptions.refresh() });
const reaperPassOnA = () => runReaper(a.services);

async function claimableOnce(tq: string, taskId: string, runId = 0) {
  const claims = await claimAny(c, tq, W1, 32);
  expect(claims.map((x) => `${x.status.taskId}/${x.runId}`)).toEqual([`${taskId}/${runId}`]);
  expect(await claim(c, tq, W2, 32)).toEqual([]);
}

/** A task claimed through B, optionally with an all-resolved dependent. */
async function claimed(retries: number, withDependent: boolean) {
  const tq = uniqueQueue();
  const taskId = slugid();
  await b.queue().createTask(taskId, taskDef(tq, { retries }));
  const dependent = slugid();
  const depQueue = uniqueQueue();
  if (withDependent) await b.queue().createTask(dependent, taskDef(depQueue, { dependencies: [taskId], requires: 'all-resolved' }));
  const [first] = await claimAny(b, tq, W1, 1);
  return { tq, taskId, dependent, depQueue, takenUntil: first.takenUntil as string };
}

/**
 * A run's claim-expiry trigger is a row of the expiry index, or a message when someone listens to
 * the run's events (shared/tasks/triggers.ts `claim`): each kind through the same sweeps.
 */
describe.each([
  ['an expiry-index row', false],
  ['a message (someone listens to task-running)', true],
])('claim expiry by %s', (_kind, listened) => {
  const SUBSCRIPTION = 'crash-reaper-running';
  const refreshAll = () => Promise.all([a, b, c].map((s) => s.services.events.dispatcher.subscriptions.refresh()));
  beforeAll(async () => {
    if (!listened) return;
    const bindings = [{ exchange: `${EXCHANGE_PREFIX}task-running`, routingKeyPattern: '#' }];
    await a.services.events.dispatcher.subscriptions.create({ subscriptionId: SUBSCRIPTION, bindings, expires: new Date(a.clock.ms() + 3600_000).toJSON() });
    await refreshAll();
  });
  afterAll(async () => {
    if (!listened) return;
    await a.services.events.dispatcher.subscriptions.delete(SUBSCRIPTION);
    await refreshAll();
  });
  /** Until the trigger is due: the message visible, or the row's takenUntil passed. */
  const due = async (takenUntil: string) => {
    await waitUntil(takenUntil, STEP_MS);
    if (listened) await triggerVisible('claim');
  };

  test('with a retry', async () => {
    const ops = await sweep(async (faulty) => {
      const t = await claimed(2, false);
      await due(t.takenUntil);
      await faulty(reaperPassOnA);
      await reapUntil(b, async () => (await status(b, t.taskId)).runs.length === 2);
      // More passes change nothing.
      await b.runReaper();
      const s = await status(b, t.taskId);
      expect(await runSummary(b, t.taskId)).toEqual(['exception/claim-expired', 'pending']);
      expect(s.retriesLeft).toBe(1);
      await claimableOnce(t.tq, t.taskId, 1);
    });
    const trigger = listened ? ['claim.get', 'claim.delete'] : ['Expiry.query', 'Expiry.delete'];
    expect(ops).toEqual(expect.arrayContaining([...trigger, 'Tasks.get', 'pending.put', 'Tasks.merge', 'deadline.get', 'resolved.get', 'Expiry.query']));
  }, 180_000);

  test('without retries: the dependent is scheduled once', async () => {
    await sweep(async (faulty) => {
      const t = await claimed(0, true);
      await due(t.takenUntil);
      await faulty(reaperPassOnA);
      await reapUntil(b, async () => (await status(b, t.dependent)).state === 'pending');
      expect(await runSummary(b, t.taskId)).toEqual(['exception/claim-expired']);
      expect((await status(b, t.dependent)).runs).toHaveLength(1);
      await claimableOnce(t.depQueue, t.dependent);
    });
  }, 180_000);
});

test('deadline of a pending task: resolved once, the dependent scheduled once', async () => {
  const ops = await sweep(async (faulty) => {
    const tq = uniqueQueue();
    const taskId = slugid();
    const deadline = new Date(a.clock.ms() + 1000).toJSON();
    await b.queue().createTask(taskId, taskDef(tq, { deadline }));
    const dependent = slugid();
    const depQueue = uniqueQueue();
    await b.queue().createTask(dependent, taskDef(depQueue, { dependencies: [taskId], requires: 'all-resolved' }));
    // Its deadline is a row of the expiry index, due once the deadline has passed.
    await waitUntil(deadline, STEP_MS);
    await faulty(reaperPassOnA);
    await reapUntil(b, async () => (await status(b, dependent)).state === 'pending');
    expect(await runSummary(b, taskId)).toEqual(['exception/deadline-exceeded']);
    await claimableOnce(depQueue, dependent);
    expect(await claim(c, tq, W2, 32)).toEqual([]);
  });
  expect(ops).toEqual(
    expect.arrayContaining(['Expiry.query', 'Tasks.get', 'Tasks.merge', 'TaskDeps.query', 'TaskDeps.delete', 'pending.put', 'Expiry.delete']),
  );
}, 180_000);
