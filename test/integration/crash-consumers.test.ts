/**
 * Crash safety of the reaper's consumer step (index and hooks fed by the event stream): the step
 * fails after each of its storage calls in turn, then later passes on another instance (once the
 * crashed message's lease is over) must converge on exactly one follow-up task from the bound hook,
 * one recorded fire, and the completed task indexed at its route.
 */
import { startTestService, startSecondInstance, TestService, slugid, taskDef, clock } from '../helpers/service';
import { claimOne, passTime, uniqueQueue } from '../helpers/work';
import { sweeperFor } from '../helpers/crash';
import { consumeEvents } from '../../shared/reaper/consumers';
import { IndexStore } from '../../shared/index/store';
import { subscriptionQueue } from '../../shared/storage/subscription-queues';
import { SYSTEM_SUBSCRIPTION_ID } from '../../shared/events/subscriptions';

/** The consumer's lease: a crashed message comes back this long after it was received. */
const LEASE_S = 1;
const binding = (b: any) => ({ exchange: b.exchange, routingKeyPattern: b.routingKeyPattern });
const noDelay = () => 0;

let a: TestService;
let b: TestService;
beforeAll(async () => {
  a = await startTestService({}, { tuning: { triggerLeaseS: LEASE_S } });
  b = await startSecondInstance(a);
  await a.auth().createRole('hook-id:crash-consumers/*', { description: 'crash hooks', scopes: ['queue:create-task:*', 'queue:scheduler-id:*'] });
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

test('a consumer step crashed after any storage call is retried without a duplicate task or a lost index entry', async () => {
  const hooks = new a.tc.Hooks({ rootUrl: a.rootUrl, credentials: a.root, retries: 0 });
  const qe = new a.tc.QueueEvents({ rootUrl: a.rootUrl });
  const taskGroupId = slugid();
  const hookId = 'follow-up';
  await hooks.createHook('crash-consumers', hookId, {
    metadata: { name: 'follow-up', description: 'after every completion', owner: 'tester@example.com' },
    bindings: [binding(qe.taskCompleted({ taskGroupId }))],
    triggerSchema: { type: 'object' },
    task: {
      taskQueueId: uniqueQueue(),
      taskGroupId: { $eval: 'payload.status.taskId' },
      payload: { after: { $eval: 'payload.status.taskId' } },
      metadata: { name: 'follow-up', description: 'by a hook', owner: 'tester@example.com', source: 'https://example.com/hook' },
    },
  });
  const store = new IndexStore(a.services.storage);
  const systemQueue = subscriptionQueue(b.services.storage, SYSTEM_SUBSCRIPTION_ID);
  let completions = 0;

  const ops = await sweeperFor(a)(async (faulty) => {
    const ns = `crash${Math.random().toString(36).slice(2, 8)}.builds.latest`;
    const tq = uniqueQueue();
    const taskId = slugid();
    await a.queue().createTask(taskId, taskDef(tq, { taskGroupId, routes: [`index.${ns}`] }));
    const c = await claimOne(a, tq, taskId);
    await a.queue(c.credentials).reportCompleted(taskId, 0);
    completions++;

    await faulty(() => consumeEvents(a.services, noDelay));

    // Recovery: later steps on the other instance, until the message is gone.
    const end = clock.ms() + 15_000;
    for (;;) {
      await consumeEvents(b.services, noDelay);
      if ((await systemQueue.approximateCount()) === 0) break;
      if (clock.ms() > end) throw new Error('the consumer never drained its queue');
      await passTime(LEASE_S * 1000 + 100);
    }

    expect((await store.getTask(ns))?.taskId).toBe(taskId);
    const followUps = (await b.queue().listTaskGroup(taskId)).tasks.filter((t: any) => t.status.taskId !== taskId);
    expect(followUps).toHaveLength(1);
    expect(followUps[0].task.payload).toEqual({ after: taskId });
    const fires = (await hooks.listLastFires('crash-consumers', hookId)).lastFires;
    expect(fires).toHaveLength(completions);
    expect(fires.filter((f: any) => f.taskId === followUps[0].status.taskId)).toEqual([expect.objectContaining({ result: 'success' })]);
  });
  expect(ops).toEqual(
    expect.arrayContaining([
      'subscription.get',
      'Tasks.get',
      'IndexTasks.insert',
      'Hooks.get',
      'Tasks.transaction',
      'HookFires.upsert',
      'Hooks.update',
      'subscription.delete',
    ]),
  );
}, 180_000);

test('a hook update crashed after any storage call leaves every binding of the stored hook delivered', async () => {
  const hooks = new a.tc.Hooks({ rootUrl: a.rootUrl, credentials: a.root, retries: 0 });
  const qe = new a.tc.QueueEvents({ rootUrl: a.rootUrl });
  const subs = b.services.events.dispatcher.subscriptions;
  const key = (x: { exchange: string; routingKeyPattern: string }) => `${x.exchange} ${x.routingKeyPattern}`;
  /** What the dispatcher delivers to the consumers for this hook (read fresh on the other instance). */
  const delivered = async () => {
    await subs.refresh();
    const system = (await subs.active()).find((s) => s.subscriptionId === SYSTEM_SUBSCRIPTION_ID)!;
    return new Set(system.bindings.map(key));
  };
  const ops = await sweeperFor(a)(async (faulty) => {
    const hookId = `u${Math.random().toString(36).slice(2, 10)}`;
    const taskGroupId = slugid();
    const def = {
      metadata: { name: 'rebinding', description: 'x', owner: 'tester@example.com' },
      bindings: [binding(qe.taskFailed({ taskGroupId }))],
      triggerSchema: { type: 'object' },
      task: {
        taskQueueId: uniqueQueue(),
        payload: {},
        metadata: { name: 'x', description: 'x', owner: 'tester@example.com', source: 'https://example.com/hook' },
      },
    };
    await hooks.createHook('crash-consumers', hookId, def);
    await faulty(() => hooks.updateHook('crash-consumers', hookId, { ...def, bindings: [binding(qe.taskCompleted({ taskGroupId }))] }));
    // Whichever definition the crash left stored, its bindings reach the consumers.
    const stored = (await hooks.hook('crash-consumers', hookId)).bindings as { exchange: string; routingKeyPattern: string }[];
    const now = await delivered();
    for (const x of stored) expect(now.has(key(x))).toBe(true);
    // Removing the hook stops the delivery of what only it was bound to.
    await hooks.removeHook('crash-consumers', hookId);
    const after = await delivered();
    expect(after.has(key(binding(qe.taskCompleted({ taskGroupId }))))).toBe(false);
    expect(after.has(key(binding(qe.taskFailed({ taskGroupId }))))).toBe(false);
  });
  expect(ops).toEqual(expect.arrayContaining(['Subscriptions.get', 'Subscriptions.update', 'Hooks.update']));
}, 120_000);
