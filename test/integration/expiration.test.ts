/**
 * Expiration through the day-bucketed expiry index: tasks, task-group member and meta rows, and
 * dependency edges disappear once `expires` passes; everything else stays. The sweep's cost
 * follows what expires (an idle pass makes a fixed handful of calls), and it survives a crash
 * after any of its storage calls.
 */
import { startTestService, startSecondInstance, TestService, taskDef, slugid, expectError, clock } from '../helpers/service';
import { reapUntil, uniqueQueue, waitUntil } from '../helpers/work';
import { eachStorageCall } from '../helpers/crash';
import { runReaper } from '../../shared/reaper/reaper';
import { GROUP_STEP_SETTLED_MS } from '../../shared/lifecycle/remove-expired';
import type { Query } from '../../shared/storage/storage';
import { GROUP_PREFIX } from '../../shared/tasks/groups';
import { TRIGGER_QUEUES, TRIGGER_SHARDS } from '../../shared/storage/port';
import { Sweep } from '../../shared/storage/counter';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1', QUEUE_DEADLINE_DELAY_S: '0' });
});
afterAll(async () => svc?.close());

const soon = (ms: number) => new Date(clock.ms() + ms).toJSON();

async function rows(table: 'TaskDeps' | 'Tasks' | 'Expiry', query: Query): Promise<string[]> {
  const page = await svc.services.storage.table(table).page(query, 1000);
  return page.items.map((r) => `${r.partitionKey}/${r.rowKey}`);
}
const partition = (table: 'TaskDeps', pk: string) => rows(table, { partitionKey: pk });
/** A group's row keys (without their prefix): in the Tasks table, partition = the group's id (shared/tasks/groups.ts). */
async function groupKeys(s: TestService, pk: string): Promise<string[]> {
  const page = await s.services.storage.table('Tasks').page({ partitionKey: pk, rowKey: { ge: GROUP_PREFIX, lt: `${GROUP_PREFIX}~~` } }, 1000);
  return page.items.map((r) => r.rowKey.slice(GROUP_PREFIX.length));
}
const groupRows = async (pk: string) => (await groupKeys(svc, pk)).map((k) => `${pk}/${k}`);

test('expired tasks, their group rows and their edges are removed; live ones stay', async () => {
  const q = svc.queue();
  // Seconds of slack: five creates must all land before it passes, on a busy machine too.
  const expires = soon(6000);
  const g = slugid();
  const x = slugid();
  const y = slugid();
  const z = slugid();
  const h = slugid();
  const w = slugid();
  const longLived = slugid();
  // x and y (y depends on x) expire soon in group g; z in g lives on. w is alone in group h.
  await q.createTask(x, taskDef(uniqueQueue(), { taskGroupId: g, deadline: expires, expires }));
  await q.createTask(y, taskDef(uniqueQueue(), { taskGroupId: g, deadline: expires, expires, dependencies: [x] }));
  await q.createTask(z, taskDef(uniqueQueue(), { taskGroupId: g }));
  await q.createTask(w, taskDef(uniqueQueue(), { taskGroupId: h, deadline: expires, expires }));
  // A long-lived dependent of x (its deadline may not pass x's expiry).
  await q.createTask(longLived, taskDef(uniqueQueue(), { deadline: expires, dependencies: [x] }));

  expect((await q.listTaskGroup(g)).tasks).toHaveLength(3);
  expect((await q.listDependentTasks(x)).tasks.map((t: any) => t.status.taskId).sort()).toEqual([y, longLived].sort());
  expect(await partition('TaskDeps', y)).toEqual([`${y}/r-${x}~${y}`]);

  await waitUntil(expires, 300);
  await reapUntil(
    svc,
    async () =>
      [...(await rows('Tasks', { partitionKey: x })), ...(await rows('Tasks', { partitionKey: w }))].length === 0 &&
      (await q.status(longLived)).status.state === 'exception',
  );

  for (const gone of [x, y, w]) {
    await expectError(q.task(gone), 404, 'ResourceNotFound');
    await expectError(q.status(gone), 404, 'ResourceNotFound');
  }
  // Group g keeps its meta row and its live member (with its open row: z is unresolved); the
  // expired members' member and latest rows stay until the group expires (listings skip them), their
  // open rows are gone. Group h (expired with its only task) is gone entirely.
  const list = await q.listTaskGroup(g);
  expect(list.tasks.map((t: any) => t.status.taskId)).toEqual([z]);
  const reference = await (await fetch(`${svc.rootUrl}/api/queue/v1/ops/reference`)).json();
  const ops = new (svc.tc.createClient(reference, 'QueueOps'))({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
  expect((await ops.listTaskGroupLatest(g)).tasks.map((t: any) => t.taskId)).toEqual([z]);
  const inG = await groupRows(g);
  expect(inG.filter((r) => r.includes('~open~'))).toEqual([`${g}/~open~${z}`]);
  expect(inG).toEqual(expect.arrayContaining([`${g}/${x}`, `${g}/${y}`, `${g}/${z}`, `${g}/~group~${g}`]));
  expect(inG.filter((r) => r.includes('~new~'))).toHaveLength(3);
  expect(await groupRows(h)).toEqual([]);
  await expectError(q.getTaskGroup(h), 404, 'ResourceNotFound');
  // Edges of the expired tasks are gone in both directions; the live dependent keeps its own.
  expect(await partition('TaskDeps', x)).toEqual([]);
  expect(await partition('TaskDeps', y)).toEqual([]);
  expect(await partition('TaskDeps', longLived)).toEqual([`${longLived}/r-${x}~${longLived}`]);
  await expectError(q.listDependentTasks(x), 404, 'ResourceNotFound');
  expect((await q.status(longLived)).status.state).toBe('exception');
  expect((await q.task(z)).taskGroupId).toBe(g);

  // The index keeps only rows that have not expired.
  const due = await rows('Expiry', { rowKey: { lt: new Date().toJSON() } });
  expect(due).toEqual([]);
  const left = await rows('Expiry', { rowKey: { ge: '' } });
  // z's expiry rows: carried by its deadline's row until that row's sweep (shared/tasks/task-expiry.ts).
  expect(left.some((r) => r.includes(`~deadline~${z}~`))).toBe(true);
  expect(left.some((r) => r.endsWith(`~task~${x}`) || r.endsWith(`~task~${w}`))).toBe(false);
});

test("a group's rows go together once its last member expires: two calls for the group, none per member", async () => {
  // A deployment of its own: its reaper pass sees no other test's expiry rows.
  const own = await startTestService({ QUEUE_DEADLINE_DELAY_S: '0' });
  try {
    const q = own.queue();
    const keys = async (pk: string) => (await own.services.storage.table('Tasks').page({ partitionKey: pk }, 1000)).items;
    const deadline = soon(3000);
    const expires = soon(5000);
    const g = slugid();
    const members = Array.from({ length: 5 }, () => slugid());
    // The first member names the group after itself (no read), the others join it.
    for (const id of [g, ...members]) await q.createTask(id, taskDef(uniqueQueue(), { taskGroupId: g, deadline, expires }));
    expect((await groupKeys(own, g)).length).toBe(1 + 6 * 3); // meta; member, open and latest rows each
    // Resolved at the deadline first (that reads whether the group is resolved), then measured.
    await waitUntil(deadline, 300);
    await reapUntil(own, async () => (await Promise.all([g, ...members].map((id) => q.status(id)))).every((r) => r.status.state === 'exception'));
    await waitUntil(expires, 300);
    const before = own.services.storage.meter.snapshot().byOp;
    // As usual, the tasks expire long after they resolved (the clock an hour ahead): their open rows
    // went with the resolution.
    const services = own.services as { now: () => Date };
    const realNow = services.now;
    services.now = () => new Date(clock.ms() + GROUP_STEP_SETTLED_MS);
    try {
      await runReaper(own.services); // one pass: its sweep page holds all 7 expiry rows
    } finally {
      services.now = realNow;
    }
    const after = own.services.storage.meter.snapshot().byOp;
    for (const id of [g, ...members]) expect(await keys(id)).toEqual([]);
    const used = (op: string) => (after[op] ?? 0) - (before[op] ?? 0);
    // The group: one read of its key range and one transaction (its six tasks share one group expiry
    // row, recorded beside each task's); no member reads the group's meta row or deletes a row of it.
    // Each task: its row, with its history held in it, in one delete (the creator does not try to
    // take the group along: the sweep page shows that others joined it).
    expect(used('Tasks.query')).toBe(1);
    expect(used('Tasks.transaction')).toBe(1);
    expect(used('Tasks.delete')).toBe(6);
    expect(used('Tasks.get')).toBe(6);
    await expectError(q.getTaskGroup(g), 404, 'ResourceNotFound');
  } finally {
    await own.close();
  }
});

test('a task that named its group after itself takes the group along without reading it, unless another task joined', async () => {
  const own = await startTestService({ QUEUE_DEADLINE_DELAY_S: '0' });
  try {
    const q = own.queue();
    const keys = (pk: string) => groupKeys(own, pk);
    const deadline = soon(3000);
    const expires = soon(5000);
    const [alone, joined, joiner] = [slugid(), slugid(), slugid()];
    await q.createTask(alone, taskDef(uniqueQueue(), { deadline, expires }));
    await q.createTask(joined, taskDef(uniqueQueue(), { deadline, expires }));
    // The joiner outlives the group's creator: the group must stay for it.
    // Its deadline lies past the reaper's clock below (now + GROUP_STEP_SETTLED_MS): it stays pending.
    await q.createTask(joiner, taskDef(uniqueQueue(), { taskGroupId: joined, deadline: soon(2 * GROUP_STEP_SETTLED_MS) }));
    expect(await keys(alone)).toContain(`~alone~${alone}`);
    expect(await keys(joined)).not.toContain(`~alone~${joined}`); // the joiner took it away
    await waitUntil(deadline, 300);
    await reapUntil(own, async () => (await Promise.all([alone, joined].map((id) => q.status(id)))).every((r) => r.status.state === 'exception'));
    await waitUntil(expires, 300);
    const services = own.services as { now: () => Date };
    const realNow = services.now;
    services.now = () => new Date(clock.ms() + GROUP_STEP_SETTLED_MS);
    const before = own.services.storage.meter.snapshot().byOp;
    try {
      await runReaper(own.services);
    } finally {
      services.now = realNow;
    }
    const after = own.services.storage.meter.snapshot().byOp;
    const used = (op: string) => (after[op] ?? 0) - (before[op] ?? 0);
    expect(await keys(alone)).toEqual([]);
    await expectError(q.getTaskGroup(alone), 404, 'ResourceNotFound');
    await expectError(q.status(joined), 404, 'ResourceNotFound');
    // The joined group keeps its meta row and the joiner (the creator's member row stays until the
    // group expires; listings skip it).
    expect((await q.getTaskGroup(joined)).taskGroupId).toBe(joined);
    expect((await q.listTaskGroup(joined)).tasks.map((t: any) => t.status.taskId)).toEqual([joiner]);
    // The lone group: in its task's transaction; the joined one (its creator's row says so, as the
    // join set it): the task's row alone (its history is held in it) and the group's key range read
    // (not due: the joiner lives on).
    expect(used('Tasks.query')).toBe(1);
    expect(used('Tasks.transaction')).toBe(1);
    expect(used('Tasks.delete')).toBe(1);
    // Both tasks' reads, and the pending joiner's (the hint repair looks at a run pending that long).
    expect(used('Tasks.get')).toBe(3);
  } finally {
    await own.close();
  }
});

test('a pass with nothing to expire costs a fixed handful of calls, whatever is stored', async () => {
  // A deployment of its own, so no trigger of the other tests can fire during the measurement.
  const fresh = await startTestService();
  try {
    for (let i = 0; i < 5; i++) await fresh.queue().createTask(slugid(), taskDef(uniqueQueue()));
    const meter = fresh.services.storage.meter;
    meter.startCounting();
    await Sweep.run(() => runReaper(fresh.services));
    expect(meter.disarm()).toBe(TRIGGER_QUEUES.length * TRIGGER_SHARDS + 6);
    // Four trigger polls, each over its shards (the last: event sweeps), the index and hooks consumers' queue, the expiry index (its triggers' lane, then its expiries), the artifact expiry index, the due hooks, the health stamp.
    expect(meter.armedOps).toEqual([
      ...['claim', 'deadline', 'resolved', 'events'].flatMap((q) => Array<string>(TRIGGER_SHARDS).fill(`${q}.get`)),
      'subscription.get',
      'Expiry.query',
      'Expiry.query',
      'Artifacts.query',
      'Hooks.query',
      'Indexes.upsert',
    ]);
  } finally {
    await fresh.close();
  }
});

test('an expired task with edges and a group is cleaned up even if the sweep crashes after any storage call', async () => {
  const b = await startSecondInstance(svc);
  try {
    // A long-lived dependency (it outlives every step's hour and more); each step's task depends on
    // it, so the sweep touches both partitions.
    const dep = slugid();
    await b.queue().createTask(dep, taskDef(uniqueQueue(), { deadline: soon(4 * 24 * 3600_000) }));
    const ops = await eachStorageCall(
      svc.services.storage.meter,
      async (faulty) => {
        // Resolved at its deadline first, and expiring once the resolution's group step is surely done,
        // so the swept pass is the expiry's alone.
        const deadline = soon(1000);
        const expires = soon(1000 + GROUP_STEP_SETTLED_MS + 1000);
        const g = slugid();
        const t = slugid();
        await b.queue().createTask(t, taskDef(uniqueQueue(), { taskGroupId: g, deadline, expires, dependencies: [dep] }));
        await waitUntil(deadline, 100);
        await reapUntil(b, async () => (await b.queue().status(t)).status.state === 'exception');
        await waitUntil(expires, 100);
        await faulty(() => runReaper(svc.services));
        await reapUntil(b, async () => (await rows('Tasks', { partitionKey: t })).length === 0);
        await b.runReaper();
        expect(await groupRows(g)).toEqual([]);
        expect(await partition('TaskDeps', t)).toEqual([]);
        expect(await partition('TaskDeps', dep)).toEqual([]);
        expect(await rows('Expiry', { rowKey: { lt: new Date(clock.ms()).toJSON() } })).toEqual([]);
        expect((await b.queue().status(dep)).status.state).toBe('pending');
      },
      { warm: () => svc.services.events.dispatcher.subscriptions.refresh() },
    );
    expect(ops).toEqual(
      expect.arrayContaining(['Expiry.query', 'Tasks.get', 'TaskDeps.query', 'TaskDeps.delete', 'Tasks.query', 'Tasks.transaction', 'Expiry.transaction']),
    );
  } finally {
    await b.close();
  }
}, 180_000);

test('a group of one that goes with its task is cleaned up even if the sweep crashes after any storage call', async () => {
  // A deployment of its own, its clock an hour ahead for the sweeps (the tasks expire long after they resolved).
  const own = await startTestService({ QUEUE_DEADLINE_DELAY_S: '0' });
  const services = own.services as { now: () => Date };
  const realNow = services.now;
  try {
    const table = (name: 'Tasks' | 'Expiry') => own.services.storage.table(name);
    const ops = await eachStorageCall(
      own.services.storage.meter,
      async (faulty) => {
        const t = slugid();
        const deadline = soon(1000);
        await own.queue().createTask(t, taskDef(uniqueQueue(), { deadline, expires: soon(60_000) }));
        await waitUntil(deadline, 100);
        await reapUntil(own, async () => (await own.queue().status(t)).status.state === 'exception');
        services.now = () => new Date(clock.ms() + GROUP_STEP_SETTLED_MS);
        try {
          await faulty(() => runReaper(own.services));
          await reapUntil(own, async () => (await table('Tasks').page({ partitionKey: t }, 10)).items.length === 0);
          await own.runReaper();
          expect((await table('Expiry').page({ rowKey: { lt: services.now().toJSON() } }, 10)).items).toEqual([]);
        } finally {
          services.now = realNow;
        }
      },
      { warm: () => own.services.events.dispatcher.subscriptions.refresh() },
    );
    // The task, its history and its group's rows go in one transaction (the partition's emptiness above says all went).
    expect(ops).toEqual(expect.arrayContaining(['Expiry.query', 'Tasks.get', 'Tasks.transaction', 'Expiry.transaction']));
    expect(ops).not.toContain('Tasks.query');
  } finally {
    services.now = realNow;
    await own.close();
  }
}, 180_000);
