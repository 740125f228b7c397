/**
 * Crash safety of scheduled hook fires: a failure after each storage call of a reaper's fire,
 * then later passes (on another instance), must converge to exactly one task for the tick, created
 * at the scheduled time, one recorded fire, and the hook advanced to its next tick.
 */
import { startTestService, startSecondInstance, TestService, slugid, clock } from '../helpers/service';
import { passTime, uniqueQueue } from '../helpers/work';
import { sweeperFor } from '../helpers/crash';
import { fireDueHooks } from '../../shared/hooks/schedule';
import { HookStore } from '../../shared/hooks/store';

/** The claim's lease: a crashed fire is taken over this long after its claim. */
const LEASE_S = 1;

let a: TestService;
let b: TestService;
beforeAll(async () => {
  a = await startTestService({}, { tuning: { triggerLeaseS: LEASE_S, hookLeaseS: LEASE_S } });
  b = await startSecondInstance(a);
  await a.auth().createRole('hook-id:crash/*', { description: 'crash hooks', scopes: ['queue:create-task:*', 'queue:scheduler-id:*'] });
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

test('a scheduled fire crashed after any storage call is retried without a duplicate task', async () => {
  const hooks = new a.tc.Hooks({ rootUrl: a.rootUrl, credentials: a.root, retries: 0 });
  const store = new HookStore(a.services.storage);
  const ops = await sweeperFor(a)(async (faulty) => {
    const hookId = `h${Math.random().toString(36).slice(2, 10)}`;
    const taskGroupId = slugid();
    await hooks.createHook('crash', hookId, {
      metadata: { name: 'crash', description: 'crash test hook', owner: 'tester@example.com' },
      schedule: ['0 0 * * *'],
      task: {
        taskQueueId: uniqueQueue(),
        taskGroupId,
        payload: { at: { $eval: 'now' } },
        metadata: { name: 'scheduled', description: 'by a hook', owner: 'tester@example.com', source: 'https://example.com/hook' },
      },
    });
    // Make the tick due now instead of at midnight.
    const h = (await store.get('crash', hookId))!;
    const tick = new Date(Math.floor(clock.ms() / 1000) * 1000 - 1000).toJSON();
    await store.replace({ ...h, nextScheduledDate: tick });

    await faulty(() => fireDueHooks(a.services));

    // Recovery: later passes, on the other instance, once the crashed claim's lease is over.
    const end = clock.ms() + 15_000;
    for (;;) {
      const cur = (await store.get('crash', hookId))!;
      if (!cur.pendingFire && cur.nextScheduledDate > new Date().toJSON()) break;
      if (clock.ms() > end) throw new Error(`hook never advanced: ${JSON.stringify(cur)}`);
      await passTime(LEASE_S * 1000 + 100);
      await fireDueHooks(b.services);
    }

    const group = await b.queue().listTaskGroup(taskGroupId);
    expect(group.tasks).toHaveLength(1);
    const task = group.tasks[0].task;
    expect(task.created).toBe(tick);
    expect(task.payload).toEqual({ at: tick });
    const fires = (await hooks.listLastFires('crash', hookId)).lastFires;
    expect(fires).toEqual([expect.objectContaining({ result: 'success', taskId: group.tasks[0].status.taskId, taskCreateTime: tick, firedBy: 'schedule' })]);
    expect((await hooks.getHookStatus('crash', hookId)).lastFire).toEqual({ result: 'success', taskId: group.tasks[0].status.taskId, time: tick });
  });
  expect(ops).toEqual(expect.arrayContaining(['Hooks.query', 'Hooks.update', 'Tasks.transaction', 'HookFires.upsert']));
});
