/**
 * A task's expiry rows are recorded by its deadline row's sweep, not by createTask
 * (shared/tasks/task-expiry.ts): the deadline's expiry-index row carries them, and the reaper
 * records them before it deletes that row. Whatever the task became by its deadline (reported,
 * refused at creation), and whatever storage call of the sweep fails, the task, its group and its
 * edges keep a future expiry and go at their `expires`.
 */
import { startTestService, startSecondInstance, TestService, taskDef, slugid, clock, expectError } from '../helpers/service';
import { claimOne, reapUntil, uniqueQueue, waitUntil } from '../helpers/work';
import { eachStorageCall } from '../helpers/crash';
import { runReaper } from '../../shared/reaper/reaper';
import { EXPIRY_KIND_DEADLINE, type IndexedDeadline } from '../../shared/tasks/triggers';
import { EXPIRY_KIND_GROUP } from '../../shared/tasks/groups';
import { EXCHANGE_PREFIX } from '../../shared/events/exchanges';
import { allRows } from '../../shared/storage/port';

let a: TestService;
/** Checks and recovery go through B (same storage), off A's call count. */
let b: TestService;
beforeAll(async () => {
  a = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1', QUEUE_DEADLINE_DELAY_S: '0' });
  b = await startSecondInstance(a);
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

const soon = (ms: number) => new Date(clock.ms() + ms).toJSON();

/** The expiry index's rows for a task: its own and its group's expiry rows (their expires), and its deadline rows' carried expiries. */
async function expiryRows(taskId: string, taskGroupId: string) {
  const all = await allRows(b.services.storage.table('Expiry'), {});
  const of = (kind: string, id: string) => all.filter((r) => r.kind === kind && r.id === id);
  return {
    task: of('task', taskId).map((r) => r.expires as string),
    group: of(EXPIRY_KIND_GROUP, taskGroupId).map((r) => r.expires as string),
    carried: of(EXPIRY_KIND_DEADLINE, taskId).flatMap((r) => (JSON.parse(r.data as string) as IndexedDeadline).expiry ?? []),
  };
}

/** Each expires is in the index as the task's and the group's row, or carried by a deadline row that has yet to record them. */
async function expectFutureExpiry(taskId: string, taskGroupId: string, expires: string[]) {
  const rows = await expiryRows(taskId, taskGroupId);
  for (const e of expires) {
    const carried = rows.carried.some((c) => c.expires === e && c.taskGroupId === taskGroupId);
    expect({ e, task: carried || rows.task.includes(e), group: carried || rows.group.includes(e) }).toEqual({ e, task: true, group: true });
  }
}

const taskRows = async (taskId: string) => (await b.services.storage.table('Tasks').page({ partitionKey: taskId }, 10)).items;

test("createTask writes one expiry-index row, its deadline's, which carries the task's expiry", async () => {
  const t = slugid();
  const g = slugid();
  const [deadline, expires] = [soon(3600_000), soon(7200_000)];
  a.services.storage.meter.byOp.clear();
  await a.queue().createTask(t, taskDef(uniqueQueue(), { taskGroupId: g, deadline, expires }));
  await a.settled();
  expect([...a.services.storage.meter.byOp.keys()].filter((op) => op.startsWith('Expiry.'))).toEqual(['Expiry.upsert']);
  expect(await expiryRows(t, g)).toEqual({ task: [], group: [], carried: [{ expires, taskGroupId: g, dependencies: [] }] });
});

test('a deadline that is a message (someone listens to the create) leaves the expiry rows to the create, as before', async () => {
  const id = 'deadline-expiry-listened';
  const bindings = [{ exchange: `${EXCHANGE_PREFIX}task-defined`, routingKeyPattern: '#' }];
  await a.services.events.dispatcher.subscriptions.create({ subscriptionId: id, bindings, expires: soon(3600_000) });
  await a.services.events.dispatcher.subscriptions.refresh();
  try {
    const t = slugid();
    const expires = soon(7200_000);
    await a.queue().createTask(t, taskDef(uniqueQueue(), { expires }));
    expect(await expiryRows(t, t)).toEqual({ task: [expires], group: [expires], carried: [] });
  } finally {
    await a.services.events.dispatcher.subscriptions.delete(id);
    await a.services.events.dispatcher.subscriptions.refresh();
  }
});

test('a task reported before its deadline, and one whose create lost to another definition, expire at their own expires', async () => {
  const tq = uniqueQueue();
  const [reported, taken] = [slugid(), slugid()];
  const deadline = soon(2000);
  const expires = soon(60_000);
  await a.queue().createTask(reported, taskDef(tq, { deadline, expires }));
  const c = await claimOne(a, tq, reported);
  await a.queue(c.credentials).reportCompleted(reported, 0);
  // The same taskId and deadline, then a definition expiring sooner: refused, but its deadline row
  // (written first) must not replace the task's own.
  await a.queue().createTask(taken, taskDef(uniqueQueue(), { deadline, expires }));
  const sooner = soon(30_000);
  await expectError(a.queue().createTask(taken, taskDef(uniqueQueue(), { deadline, expires: sooner })), 409);
  await expectFutureExpiry(taken, taken, [expires, sooner]);

  await waitUntil(deadline, 300);
  await reapUntil(b, async () => (await b.queue().status(taken)).status.state === 'exception');
  // The deadline rows are gone; the expiry rows they carried are in the index.
  expect(await expiryRows(reported, reported)).toEqual({ task: [expires], group: [expires], carried: [] });
  expect(await expiryRows(taken, taken)).toMatchObject({ task: expect.arrayContaining([expires, sooner]), carried: [] });
  await waitUntil(sooner, 300);
  await b.runReaper();
  expect((await b.queue().status(taken)).status.state).toBe('exception');
  await waitUntil(expires, 300);
  await reapUntil(b, async () => (await taskRows(reported)).length === 0 && (await taskRows(taken)).length === 0);
  await expectError(b.queue().status(reported), 404);
  await expectError(b.queue().getTaskGroup(taken), 404);
  expect(await expiryRows(taken, taken)).toEqual({ task: [], group: [], carried: [] });
});

test("a crash after any storage call of the deadline's sweep leaves the task, its group and its edges a future expiry; they go at their expires", async () => {
  // A long-lived dependency: each step's task waits for it, so its edges need the expiry's data.
  const dep = slugid();
  await b.queue().createTask(dep, taskDef(uniqueQueue(), { deadline: soon(4 * 24 * 3600_000) }));
  const ops = await eachStorageCall(
    a.services.storage.meter,
    async (faulty) => {
      const [t, g] = [slugid(), slugid()];
      const deadline = soon(1000);
      const expires = soon(5000);
      await b.queue().createTask(t, taskDef(uniqueQueue(), { taskGroupId: g, deadline, expires, dependencies: [dep] }));
      await waitUntil(deadline, 100);
      await faulty(() => runReaper(a.services));
      await expectFutureExpiry(t, g, [expires]);
      await reapUntil(b, async () => (await b.queue().status(t)).status.state === 'exception');
      expect(await expiryRows(t, g)).toEqual({ task: [expires], group: [expires], carried: [] });
      await waitUntil(expires, 100);
      await reapUntil(b, async () => (await taskRows(t)).length === 0);
      await b.runReaper();
      expect((await taskRows(g)).length).toBe(0);
      expect((await b.services.storage.table('TaskDeps').page({ partitionKey: t }, 10)).items).toEqual([]);
      expect((await b.services.storage.table('TaskDeps').page({ partitionKey: dep }, 10)).items).toEqual([]);
      expect(await expiryRows(t, g)).toEqual({ task: [], group: [], carried: [] });
    },
    { warm: () => a.services.events.dispatcher.subscriptions.refresh() },
  );
  // The expiry rows (one transaction: the group's partition) go before the deadline row's delete; the
  // deadline's resolution is a merge of the task row (its history held in it).
  expect(ops).toEqual(expect.arrayContaining(['Expiry.query', 'Expiry.transaction', 'Tasks.get', 'Tasks.merge', 'Expiry.delete']));
  expect(ops.indexOf('Expiry.transaction')).toBeLessThan(ops.indexOf('Expiry.delete'));
}, 180_000);
