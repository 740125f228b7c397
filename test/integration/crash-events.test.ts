/**
 * Events are never lost: a failure after each storage call of each transition (and of the reaper's
 * delivery of what a crash left), with nobody retrying, still ends with an event delivered for
 * every transition that committed, and none for one that did not.
 */
import { startTestService, TestService, taskDef, slugid, clock } from '../helpers/service';
import { claimOne, uniqueQueue, passTime, reapUntil, waitUntil } from '../helpers/work';
import { eachStorageCall, sweeperFor } from '../helpers/crash';
import { eventsClient, drainSubscription, DeliveredEvent } from '../helpers/events';
import { readHistory } from '../../shared/ops/history';
import { EXCHANGES, EXCHANGE_PREFIX, HOOK_EXCHANGES, HOOKS_EXCHANGE_PREFIX } from '../../shared/events/exchanges';

let svc: TestService;
let urls: { signedPollUrl: string; signedDeleteUrl: string };
const delivered = new Map<string, DeliveredEvent>();

beforeAll(async () => {
  // Short claims: the claim-expiry trigger guards the events of a report (no sweep trigger of its own) and fires within the test.
  svc = await startTestService(
    { QUEUE_CLAIM_WORK_POLL_S: '1', QUEUE_CLAIM_TIMEOUT_S: '5' },
    { tuning: { triggerLeaseS: 2, eventSweepDelayS: 1, resolvedNetDelayS: 1 } },
  );
  const all = EXCHANGES.map((e) => ({ exchange: EXCHANGE_PREFIX + e, routingKeyPattern: '#' }));
  urls = await eventsClient(svc).createSubscription('everything', { bindings: all, expires: new Date(clock.ms() + 3600_000).toJSON() });
});
afterAll(async () => svc?.close());

/** Fails each storage call in turn, after filling the auth and subscription caches so every armed sequence is the same. */
const sweep = (scenario: Parameters<typeof eachStorageCall>[1]) => sweeperFor(svc)(scenario);

/** Ids of the events of every committed transition of a task (history rows; reclaims have none). */
async function committedIds(taskId: string): Promise<string[]> {
  const { entries } = await readHistory(svc.services.storage, taskId, 1000);
  return entries.filter((e) => e.event !== 'reclaimed').map((e) => `${taskId}.${e.seq}`);
}

/** Runs reaper passes until every id in `expected()` was delivered; checks nothing else of the task was. */
async function expectDelivered(taskId: string, extra: string[] = []): Promise<void> {
  const end = clock.ms() + 15_000;
  let missing: string[];
  for (;;) {
    for (const e of await drainSubscription(urls)) delivered.set(e.id, e);
    const expected = [...(await committedIds(taskId)), ...extra];
    missing = expected.filter((id) => !delivered.has(id));
    if (!missing.length) {
      const ofTask = [...delivered.values()].filter((e) => e.payload.status?.taskId === taskId && !e.id.includes('.artifact.'));
      expect(ofTask.map((e) => e.id).sort()).toEqual(expected.filter((id) => !id.includes('.artifact.')).sort());
      return;
    }
    if (clock.ms() > end) throw new Error(`events never delivered: ${missing.join(', ')}`);
    await svc.runReaper();
    await passTime(200);
  }
}

const noRetry = (c?: any) => svc.queue(c, { retries: 0 });

test('createTask', async () => {
  const ops = await sweep(async (faulty) => {
    const taskId = slugid();
    await faulty(() => noRetry().createTask(taskId, taskDef(uniqueQueue())));
    await expectDelivered(taskId);
  });
  // The deadline trigger guards the events: put with the sweep delay, re-armed after their delivery.
  expect(ops).toEqual(expect.arrayContaining(['deadline.put', 'Tasks.transaction', 'subscription.put', 'deadline.update']));
}, 240_000);

test('claimWork and reportCompleted', async () => {
  await sweep(async (faulty) => {
    const tq = uniqueQueue();
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(tq));
    const r = await faulty(() => noRetry().claimWork(tq, { workerGroup: 'wg', workerId: 'w1', tasks: 1 }));
    await expectDelivered(taskId);
    if (r.value?.tasks?.length !== 1) return; // the claim did not reach the worker; the run may still be pending
    await noRetry(r.value.tasks[0].credentials).reportCompleted(taskId, 0);
    await expectDelivered(taskId);
  });
  const reportOps = await sweep(async (faulty) => {
    const tq = uniqueQueue();
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(tq));
    const c = await claimOne(svc, tq, taskId);
    await faulty(() => noRetry(c.credentials).reportCompleted(taskId, 0));
    await expectDelivered(taskId);
  });
  // The report puts no sweep trigger: the run's claim-expiry trigger, dropped after the delivery, guards it.
  expect(reportOps).toEqual(expect.arrayContaining(['subscription.put', 'claim.delete']));
  expect(reportOps).not.toContain('events.put');
}, 240_000);

test('reportException with a retry, and cancelTask', async () => {
  await sweep(async (faulty) => {
    const tq = uniqueQueue();
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(tq, { retries: 1 }));
    const c = await claimOne(svc, tq, taskId);
    await faulty(() => noRetry(c.credentials).reportException(taskId, 0, { reason: 'worker-shutdown' }));
    await expectDelivered(taskId);
  });
  await sweep(async (faulty) => {
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(uniqueQueue()));
    await faulty(() => noRetry().cancelTask(taskId));
    await expectDelivered(taskId);
  });
}, 240_000);

test("rerunTask: its new deadline trigger guards the new run's task-pending", async () => {
  const ops = await sweep(async (faulty) => {
    const tq = uniqueQueue();
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(tq));
    await svc.queue().cancelTask(taskId);
    await faulty(() => noRetry().rerunTask(taskId));
    await expectDelivered(taskId);
  });
  expect(ops).toEqual(expect.arrayContaining(['deadline.put', 'Tasks.merge', 'subscription.put', 'deadline.update']));
}, 240_000);

test('createArtifact and sealTaskGroup', async () => {
  await sweep(async (faulty) => {
    const tq = uniqueQueue();
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(tq));
    const c = await claimOne(svc, tq, taskId);
    const expires = new Date(clock.ms() + 3600_000).toJSON();
    const r = await faulty(() =>
      noRetry(c.credentials).createArtifact(taskId, 0, 'public/ref', { storageType: 'reference', url: 'https://example.com', expires }),
    );
    const committed = (await svc.queue().listArtifacts(taskId, 0)).artifacts.length === 1;
    if (!committed) expect(r.error).toBeDefined();
    await expectDelivered(taskId, committed ? [`${taskId}.0.artifact.public/ref`] : []);
    if (!committed) expect(delivered.has(`${taskId}.0.artifact.public/ref`)).toBe(false);
  });
  await sweep(async (faulty) => {
    const taskGroupId = slugid();
    await svc.queue().createTask(taskGroupId, taskDef(uniqueQueue(), { taskGroupId }));
    await faulty(() => noRetry().sealTaskGroup(taskGroupId));
    const sealed = !!(await svc.queue().getTaskGroup(taskGroupId)).sealed;
    const id = `${taskGroupId}.sealed`;
    const end = clock.ms() + 15_000;
    while (sealed && !delivered.has(id) && clock.ms() < end) {
      await svc.runReaper();
      for (const e of await drainSubscription(urls)) delivered.set(e.id, e);
    }
    expect(delivered.has(id)).toBe(sealed);
  });
}, 240_000);

test('task-group-resolved: the last report of a group, whatever call fails', async () => {
  const ops = await sweep(async (faulty) => {
    const tq = uniqueQueue();
    const taskGroupId = slugid();
    // A short deadline: when the report's bookkeeping was cut short, the deadline trigger (kept
    // until it succeeds) repeats it; a report that never committed ends at the deadline instead.
    const deadline = new Date(clock.ms() + 3000).toJSON();
    await svc.queue().createTask(taskGroupId, taskDef(tq, { taskGroupId, deadline }));
    const c = await claimOne(svc, tq, taskGroupId);
    await faulty(() => noRetry(c.credentials).reportCompleted(taskGroupId, 0));
    const id = `${taskGroupId}.resolved.${taskGroupId}.0`;
    const end = clock.ms() + 15_000;
    while (!delivered.has(id) && clock.ms() < end) {
      await svc.runReaper();
      for (const e of await drainSubscription(urls)) delivered.set(e.id, e);
      if (!delivered.has(id)) await passTime(300);
    }
    expect(delivered.has(id)).toBe(true);
    expect(delivered.get(id)!.payload).toEqual({ version: 1, taskGroupId, schedulerId: expect.any(String) });
    await expectDelivered(taskGroupId);
  });
  // A group of one: the resolution's write, under its row's ETag while the row says nobody joined,
  // proves it empty (no read; no group call of its own); a repeat reads.
  expect(ops).toEqual(expect.arrayContaining(['Tasks.merge', 'subscription.put', 'deadline.delete']));
  expect(ops.filter((op) => /^Tasks\.(query|delete)$/.test(op))).toEqual([]);
}, 240_000);

test('deadline resolved by the reaper', async () => {
  await sweep(async (faulty) => {
    const tq = uniqueQueue();
    const taskId = slugid();
    const deadline = new Date(clock.ms() + 1500).toJSON();
    await svc.queue().createTask(taskId, taskDef(tq, { deadline }));
    await claimOne(svc, tq, taskId);
    // Trigger visibility is whole seconds: wait until it surely shows.
    await waitUntil(deadline, 1100);
    await faulty(() => svc.runReaper());
    await reapUntil(svc, async () => (await svc.queue().status(taskId)).status.state === 'exception');
    await expectDelivered(taskId);
  });
}, 240_000);

test("the reaper's delivery of an interrupted dispatch", async () => {
  await sweep(async (faulty) => {
    const taskId = slugid();
    // Dispatch never happens: the event is left to the sweep, which itself fails after each call once.
    const q = svc.queue(undefined, { retries: 0 });
    const failingDispatch = jest.spyOn(svc.services.events.dispatcher, 'deliver').mockRejectedValueOnce(new Error('crash before delivery'));
    await q.createTask(taskId, taskDef(uniqueQueue()));
    failingDispatch.mockRestore();
    await passTime(1100); // the sweep trigger becomes visible
    await faulty(() => svc.runReaper());
    await expectDelivered(taskId);
  });
}, 240_000);

test('hook changes: hook-created, -updated and -deleted are delivered when the change committed, never when it did not', async () => {
  const bindings = HOOK_EXCHANGES.map((e) => ({ exchange: HOOKS_EXCHANGE_PREFIX + e, routingKeyPattern: '#' }));
  const hookUrls = await eventsClient(svc).createSubscription('hook-changes', { bindings, expires: new Date(clock.ms() + 3600_000).toJSON() });
  const hooks = new svc.tc.Hooks({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
  const metadata = { name: 'h', description: 'a hook', owner: 'tester@example.com' };
  const def = (schedule: string[] = []) => ({
    metadata,
    schedule,
    task: { taskQueueId: 'prov/crash-hooks', payload: {}, metadata: { ...metadata, source: 'https://example.com/h' } },
  });
  const seen: DeliveredEvent[] = [];
  const exists = (hookId: string) =>
    hooks.hook('crash', hookId).then(
      () => true,
      () => false,
    );
  /** Reaper passes until `change` of `hookId` arrived (if `committed`), or past the sweep delay (if not). */
  async function expectAnnounced(hookId: string, change: string, committed: boolean): Promise<void> {
    const has = () => seen.some((e) => e.payload.hookId === hookId && e.exchange === HOOKS_EXCHANGE_PREFIX + change);
    const end = clock.ms() + (committed ? 15_000 : 1500);
    while (!has() && clock.ms() < end) {
      await svc.runReaper();
      seen.push(...(await drainSubscription(hookUrls)));
      await passTime(200);
    }
    expect({ hookId, change, delivered: has() }).toEqual({ hookId, change, delivered: committed });
  }
  await sweep(async (faulty) => {
    const hookId = slugid();
    await faulty(() => hooks.createHook('crash', hookId, def()));
    await expectAnnounced(hookId, 'hook-created', await exists(hookId));
  });
  const updated = slugid();
  await hooks.createHook('crash', updated, def());
  await sweep(async (faulty, n) => {
    const schedule = [`${n} 0 * * *`]; // another definition each time
    await faulty(() => hooks.updateHook('crash', updated, def(schedule)));
    const committed = JSON.stringify((await hooks.hook('crash', updated)).schedule) === JSON.stringify(schedule);
    seen.length = 0;
    await expectAnnounced(updated, 'hook-updated', committed);
  });
  await sweep(async (faulty) => {
    const hookId = slugid();
    await hooks.createHook('crash', hookId, def());
    await faulty(() => hooks.removeHook('crash', hookId));
    await expectAnnounced(hookId, 'hook-deleted', !(await exists(hookId)));
  });
}, 240_000);
