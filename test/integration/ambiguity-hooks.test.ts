/**
 * Ambiguous writes in a scheduled hook fire: each write of a reaper's fire in turn applies and
 * loses its answer, and the SDK-style retry meets its own success. The fire must come out as
 * without the fault: one task for the tick, one recorded fire, the hook advanced to its next tick.
 */
import { startTestService, TestService, slugid, clock } from '../helpers/service';
import { uniqueQueue } from '../helpers/work';
import { eachWrite } from '../helpers/ambiguity';
import { fireDueHooks } from '../../shared/hooks/schedule';
import { HookStore } from '../../shared/hooks/store';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_STORAGE_CONNECTION: 'memory:', QUEUE_STORAGE_FAULTS: 'seed=1 backoff-ms=0' });
  await svc.auth().createRole('hook-id:amb/*', { description: 'ambiguity hooks', scopes: ['queue:create-task:*', 'queue:scheduler-id:*'] });
});
afterAll(async () => svc?.close());

test('a scheduled fire', async () => {
  const hooks = new svc.tc.Hooks({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
  const store = new HookStore(svc.services.storage);
  const ops = await eachWrite(svc.services.storage, async (ambiguous) => {
    const hookId = `h${Math.random().toString(36).slice(2, 10)}`;
    const taskGroupId = slugid();
    await hooks.createHook('amb', hookId, {
      metadata: { name: 'amb', description: 'ambiguity test hook', owner: 'tester@example.com' },
      schedule: ['0 0 * * *'],
      task: {
        taskQueueId: uniqueQueue(),
        taskGroupId,
        payload: { at: { $eval: 'now' } },
        metadata: { name: 'scheduled', description: 'by a hook', owner: 'tester@example.com', source: 'https://example.com/hook' },
      },
    });
    const h = (await store.get('amb', hookId))!;
    const tick = new Date(Math.floor(clock.ms() / 1000) * 1000 - 1000).toJSON();
    await store.replace({ ...h, nextScheduledDate: tick });

    const r = await ambiguous(() => fireDueHooks(svc.services));
    expect(r.error).toBeUndefined();

    const cur = (await store.get('amb', hookId))!;
    expect(cur.pendingFire).toBeFalsy();
    expect(cur.nextScheduledDate > new Date().toJSON()).toBe(true);
    const group = await svc.queue().listTaskGroup(taskGroupId);
    expect(group.tasks).toHaveLength(1);
    expect(group.tasks[0].task.created).toBe(tick);
    const fires = (await hooks.listLastFires('amb', hookId)).lastFires;
    expect(fires).toEqual([expect.objectContaining({ result: 'success', taskId: group.tasks[0].status.taskId, taskCreateTime: tick, firedBy: 'schedule' })]);
  });
  expect(ops).toEqual(expect.arrayContaining(['Hooks.update', 'Tasks.transaction', 'HookFires.upsert']));
});
