/**
 * A schedule tick claimed by an instance that then dies is fired by another instance within the
 * claim's lease plus one reaper interval (not minutes later), exactly once; a fire slower than
 * the lease keeps its claim by renewing it. Both instances read a controllable clock.
 */
import { startTestService, startSecondInstance, TestService, slugid, clock } from '../helpers/service';
import { uniqueQueue } from '../helpers/work';
import { fireDueHooks } from '../../shared/hooks/schedule';
import { HookStore } from '../../shared/hooks/store';
import { HOOK_LEASE_S } from '../../shared/services';
import type { Services } from '../../shared/services';
import { Sweep } from '../../shared/storage/counter';

/** The reaper runs every 10 s (shared/config.ts DEFAULT_REAPER_SCHEDULE). */
const REAPER_INTERVAL_S = 10;

let a: TestService;
let b: TestService;
beforeAll(async () => {
  a = await startTestService();
  b = await startSecondInstance(a);
  await a.auth().createRole('hook-id:lease/*', { description: 'lease hooks', scopes: ['queue:create-task:*', 'queue:scheduler-id:*'] });
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

/** The instance's services reading `clock` instead of the real time. */
const at = (svc: TestService, clock: () => number): Services => ({ ...svc.services, now: () => new Date(clock()) });

async function dueHook(): Promise<{ hookId: string; taskGroupId: string; tick: string; t0: number }> {
  const hooks = new a.tc.Hooks({ rootUrl: a.rootUrl, credentials: a.root, retries: 0 });
  const hookId = `h${Math.random().toString(36).slice(2, 10)}`;
  const taskGroupId = slugid();
  await hooks.createHook('lease', hookId, {
    metadata: { name: 'lease', description: 'lease test hook', owner: 'tester@example.com' },
    schedule: ['0 0 * * *'],
    task: {
      taskQueueId: uniqueQueue(),
      taskGroupId,
      payload: {},
      metadata: { name: 'scheduled', description: 'by a hook', owner: 'tester@example.com', source: 'https://example.com/hook' },
    },
  });
  const store = new HookStore(a.services.storage);
  const h = (await store.get('lease', hookId))!;
  const t0 = Math.floor(clock.ms() / 1000) * 1000;
  const tick = new Date(t0 - 1000).toJSON();
  await store.replace({ ...h, nextScheduledDate: tick });
  return { hookId, taskGroupId, tick, t0 };
}

test('a tick claimed by a crashed instance fires within the lease plus one reaper interval, once', async () => {
  const { hookId, taskGroupId, t0 } = await dueHook();
  const store = new HookStore(a.services.storage);

  // Instance a queries the due hooks, writes its claim, and dies right after (its next call fails).
  a.services.storage.meter.failAfterCall(2);
  await Sweep.run(() => fireDueHooks(at(a, () => t0)));
  a.services.storage.meter.disarm();
  const claimed = (await store.get('lease', hookId))!;
  expect(claimed.pendingFire).toBeDefined();
  expect(
    (
      await b
        .queue()
        .listTaskGroup(taskGroupId)
        .catch(() => ({ tasks: [] }))
    ).tasks,
  ).toHaveLength(0);

  // Within the lease the claim is respected; one reaper interval after it ends, b has fired the tick.
  await fireDueHooks(at(b, () => t0 + (HOOK_LEASE_S - 1) * 1000));
  expect((await store.get('lease', hookId))!.pendingFire).toBeDefined();
  await fireDueHooks(at(b, () => t0 + (HOOK_LEASE_S + REAPER_INTERVAL_S) * 1000));
  const after = (await store.get('lease', hookId))!;
  expect(after.pendingFire).toBeUndefined();
  expect(after.lastFire).toEqual(expect.objectContaining({ result: 'success', taskId: claimed.pendingFire!.taskId }));

  // Another pass on either instance creates nothing more.
  await fireDueHooks(at(a, () => t0 + (HOOK_LEASE_S + REAPER_INTERVAL_S + 1) * 1000));
  const group = await b.queue().listTaskGroup(taskGroupId);
  expect(group.tasks.map((t: any) => t.status.taskId)).toEqual([claimed.pendingFire!.taskId]);
});
