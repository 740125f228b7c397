/**
 * Hooks fired by queue events (`fireForEvent`, which the reaper's consumer step calls; the whole
 * path from a completion is in test/conformance/consumers.test.ts) and the expiry of recorded
 * fires. Events are delivered at least once: a redelivery must not create a second task.
 */
import { startTestService, TestService, slugid, clock } from '../helpers/service';
import { uniqueQueue } from '../helpers/work';
import { fireForEvent, eventTime } from '../../shared/hooks/bindings';
import type { QueueEvent } from '../../shared/events/exchanges';
import { loadHook, recordFire } from '../../shared/hooks/hooks';
import { HookStore } from '../../shared/hooks/store';

let svc: TestService;
let hooks: any;
beforeAll(async () => {
  svc = await startTestService();
  hooks = new svc.tc.Hooks({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
  await svc.auth().createRole('hook-id:events/*', { description: 'event hooks', scopes: ['queue:create-task:*', 'queue:scheduler-id:*'] });
});
afterAll(async () => svc?.close());

const COMPLETED = 'exchange/taskcluster-queue/v1/task-completed';

async function boundHook(taskGroupId: string) {
  const hookId = `h${Math.random().toString(36).slice(2, 10)}`;
  await hooks.createHook('events', hookId, {
    metadata: { name: 'on completion', description: 'fires when a task of a group completes', owner: 'tester@example.com' },
    bindings: [{ exchange: COMPLETED, routingKeyPattern: `primary.*.*.*.*.*.*.*.${taskGroupId}.#` }],
    triggerSchema: { type: 'object', required: ['status'] },
    task: {
      taskQueueId: uniqueQueue(),
      payload: { completed: { $eval: 'payload.status.taskId' }, by: { $eval: 'firedBy' } },
      metadata: { name: 'follow-up', description: 'after a completion', owner: 'tester@example.com', source: 'https://example.com/hook' },
    },
  });
  return (await loadHook(svc.services, 'events', hookId)).definition;
}

function completion(taskGroupId: string, taskId = slugid()): QueueEvent {
  const resolved = new Date().toJSON();
  return {
    id: `${taskId}.4`,
    seq: 4,
    exchange: COMPLETED,
    routingKey: `primary.${taskId}.0.wg.w1.prov.wt.-.${taskGroupId}._`,
    routes: [],
    payload: {
      version: 1,
      status: { taskId, taskGroupId, state: 'completed', runs: [{ runId: 0, state: 'completed', resolved }] },
      runId: 0,
      workerGroup: 'wg',
      workerId: 'w1',
    },
  };
}

/** The consumer's time for an event: the run's resolution, the same on every delivery. */
const fire = (def: any, e: QueueEvent) => fireForEvent(svc.services, def, e, new Date(eventTime(e)!));

test('a hook bound to task-completed of a group fires once per completion, even when the event is redelivered', async () => {
  const group = slugid();
  const def = await boundHook(group);
  const e1 = completion(group);
  const first = await fire(def, e1);
  expect(first?.state).toBe('pending');
  const again = await fire(def, e1); // redelivered
  expect(again?.taskId).toBe(first!.taskId);
  const second = await fire(def, completion(group));
  expect(second!.taskId).not.toBe(first!.taskId);

  expect((await svc.queue().task(first!.taskId)).payload).toEqual({ completed: (e1.payload.status as any).taskId, by: 'pulseMessage' });
  const fires = (await hooks.listLastFires('events', def.hookId)).lastFires;
  expect(fires.map((f: any) => f.taskId).sort()).toEqual([first!.taskId, second!.taskId].sort());
  expect(fires.every((f: any) => f.firedBy === 'pulseMessage' && f.result === 'success')).toBe(true);
});

test('events of other groups or exchanges, and payloads failing the triggerSchema, fire nothing', async () => {
  const group = slugid();
  const def = await boundHook(group);
  expect(await fire(def, completion(slugid()))).toBeUndefined();
  expect(await fire(def, { ...completion(group), exchange: 'exchange/taskcluster-queue/v1/task-failed' })).toBeUndefined();
  expect(await fire(def, { ...completion(group), payload: { version: 1 } })).toBeUndefined();
  expect((await hooks.listLastFires('events', def.hookId)).lastFires).toEqual([]);
});

test('a binding on a route matches the event of a task with that route (CC routing key)', async () => {
  const hookId = `h${Math.random().toString(36).slice(2, 10)}`;
  await hooks.createHook('events', hookId, {
    metadata: { name: 'on route', description: 'x', owner: 'tester@example.com' },
    bindings: [{ exchange: COMPLETED, routingKeyPattern: 'route.notify.release.#' }],
    triggerSchema: { type: 'object' },
    task: {
      taskQueueId: uniqueQueue(),
      payload: {},
      metadata: { name: 'x', description: 'x', owner: 'tester@example.com', source: 'https://example.com/hook' },
    },
  });
  const def = (await loadHook(svc.services, 'events', hookId)).definition;
  const e = completion(slugid());
  expect(await fire(def, e)).toBeUndefined();
  expect((await fire(def, { ...e, routes: ['route.notify.release.v1'] }))?.state).toBe('pending');
});

test('recorded fires are removed by the reaper a year later', async () => {
  const group = slugid();
  const def = await boundHook(group);
  const longAgo = new Date(clock.ms() - 366 * 24 * 3600_000).toJSON();
  await recordFire(svc.services, {
    hookGroupId: 'events',
    hookId: def.hookId,
    firedBy: 'schedule',
    taskId: slugid(),
    taskCreateTime: longAgo,
    result: 'success',
    error: '',
  });
  const store = new HookStore(svc.services.storage);
  expect((await store.listFires('events', def.hookId, 10)).items).toHaveLength(1);
  await svc.runReaper();
  expect((await store.listFires('events', def.hookId, 10)).items).toHaveLength(0);
});
