/**
 * Several pending storage queues per task queue (QUEUE_PENDING_SHARDS): hints spread over the
 * shards by taskId, claimWork claims every task once and keeps strict priority across shards,
 * pollTaskUrls hands out every shard, and a deployment that lowers the count still drains them.
 */
import { startTestService, TestService, taskDef, slugid, sharedDeployment } from '../helpers/service';
import { claim, uniqueQueue, W1, W2, WorkerId } from '../helpers/work';
import { poll, PollUrls } from '../helpers/azure-queue';
import { PRIORITIES, Priority } from '../../shared/tasks/vocabulary';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const tc10 = require('tc10');

const SHARDS = 3;
/** Shared by the two services of the last test, so they serve one deployment. */
const DEPLOYMENT = sharedDeployment();

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ ...DEPLOYMENT, QUEUE_CLAIM_WORK_POLL_S: '1', QUEUE_PENDING_SHARDS: `${SHARDS} prov/one=1` });
});
afterAll(async () => svc?.close());

/** A taskcluster-client@10 Queue with root credentials (pollTaskUrls and xmlMessage are its protocols). */
const root10 = () => new tc10.Queue({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });

/** A taskId whose hints go to `shard` of task queue `tq` (placement is by hash: draw until one fits). */
function idInShard(tq: string, shard: number): string {
  for (;;) {
    const id = slugid();
    if (svc.services.pending.shardOf(tq, id) === shard) return id;
  }
}

async function create(tq: string, taskId: string, priority: Priority = 'lowest'): Promise<string> {
  await svc.queue().createTask(taskId, taskDef(tq, { priority }));
  return taskId;
}

/** Approximate message counts of each shard of one priority. */
async function shardCounts(tq: string, priority: Priority): Promise<number[]> {
  return Promise.all(Array.from({ length: SHARDS }, (_, s) => svc.services.pending.queue(tq, priority, s).approximateCount()));
}

/**
 * The tasks hinted in each shard of one priority (at most 32 messages a shard), by taskId: an
 * ambiguous queue put leaves a second, harmless copy of a hint, as on Azure, so messages are not
 * tasks; a task whose hint is missing still fails the count.
 */
async function shardTasks(tq: string, priority: Priority): Promise<string[][]> {
  return Promise.all(
    Array.from({ length: SHARDS }, async (_, s) => {
      const msgs = await svc.services.pending.queue(tq, priority, s).peek(32);
      return [...new Set(msgs.map((m) => JSON.parse(Buffer.from(m.messageText, 'base64').toString('utf8')).taskId as string))];
    }),
  );
}

/** claimWork until a call comes back empty; every claim's taskId in order. */
async function claimAll(tq: string, worker: WorkerId, tasks: number): Promise<string[]> {
  const ids: string[] = [];
  for (;;) {
    const got = await claim(svc, tq, worker, tasks);
    if (!got.length) return ids;
    ids.push(...got.map((c: any) => c.status.taskId));
  }
}

test('hints spread over the shards by taskId, and concurrent claimWork claims every task exactly once', async () => {
  const tq = uniqueQueue();
  const ids = await Promise.all(Array.from({ length: 30 }, () => create(tq, slugid())));
  const hinted = await shardTasks(tq, 'lowest');
  expect(hinted.flat()).toHaveLength(30);
  // 30 random ids over 3 shards: every shard gets some (all in one or two: p < 2e-5).
  expect(hinted.every((h) => h.length > 0)).toBe(true);
  for (let s = 0; s < SHARDS; s++) {
    const expected = ids.filter((id) => svc.services.pending.shardOf(tq, id) === s);
    expect({ shard: s, tasks: [...hinted[s]].sort() }).toEqual({ shard: s, tasks: expected.sort() });
  }

  const claimed = (await Promise.all([claimAll(tq, W1, 4), claimAll(tq, W2, 4), claimAll(tq, { workerGroup: 'wg', workerId: 'w3' }, 1)])).flat();
  expect(claimed).toHaveLength(30);
  expect(new Set(claimed)).toEqual(new Set(ids));
  const states = await Promise.all(ids.map(async (id) => (await svc.queue().status(id)).status.state));
  expect(new Set(states)).toEqual(new Set(['running']));
  expect(await shardCounts(tq, 'lowest')).toEqual([0, 0, 0]);
});

test('strict priority across shards: every higher-priority hint in any shard is claimed before a lower one', async () => {
  const tq = uniqueQueue();
  // Lower priorities in every shard, created first; the higher ones only in shards 1 and 2, so a
  // poller that looked at one shard per priority, or started at shard 0, would hand out a low first.
  const low: string[] = [];
  for (let s = 0; s < SHARDS; s++) for (let i = 0; i < 3; i++) low.push(await create(tq, idInShard(tq, s), 'low'));
  const high = [await create(tq, idInShard(tq, 1), 'high'), await create(tq, idInShard(tq, 2), 'high')];
  const highest = await create(tq, idInShard(tq, 2), 'highest');

  // One at a time: the order of claims is the order of priorities.
  const first = [];
  for (let i = 0; i < 3; i++) first.push(...(await claim(svc, tq, W1, 1)).map((c: any) => c.status.taskId));
  expect(first[0]).toBe(highest);
  expect(new Set(first.slice(1))).toEqual(new Set(high));

  // A batch gathers the priority's hints from all its shards (and, as with one queue, no lower ones).
  const more = [await create(tq, idInShard(tq, 2), 'high'), await create(tq, idInShard(tq, 1), 'high')];
  const batch = (await claim(svc, tq, W1, 4)).map((c: any) => c.status.taskId);
  expect(batch.sort()).toEqual([...more].sort());

  const rest = await claimAll(tq, W2, 8);
  expect(rest.sort()).toEqual([...low].sort());
});

test('pollTaskUrls covers every shard: per priority, highest first, shard 0 first; a per-queue count overrides the default', async () => {
  const wt = `wt${Math.random().toString(36).slice(2, 10)}`;
  const tq = `prov/${wt}`;
  const clientId = `test/${slugid()}`;
  const { accessToken } = await svc.auth().createClient(clientId, {
    expires: new Date(Date.now() + 3600_000).toJSON(),
    description: 'worker',
    scopes: [`queue:poll-task-urls:${tq}`, `queue:claim-task:${tq}`, `queue:worker-id:wg/w1`],
  });
  const q10 = new tc10.Queue({ rootUrl: svc.rootUrl, credentials: { clientId, accessToken }, retries: 0 });
  const urls: PollUrls = await q10.pollTaskUrls('prov', wt);
  const names = PRIORITIES.flatMap((p) => Array.from({ length: SHARDS }, (_, s) => svc.services.pending.queueName(tq, p, s)));
  // The queue name is the segment before `messages`: Azure's URLs carry the account in the host,
  // Azurite's in the path.
  expect(urls.queues.map((u) => new URL(u.signedPollUrl).pathname.split('/').slice(-2)[0])).toEqual(names);
  expect(new Set(names).size).toBe(PRIORITIES.length * SHARDS);

  // A task in shard 2 is found by a worker that polls the URLs in order, at the shard's position.
  const taskId = await create(tq, idInShard(tq, 2), 'medium');
  let found: { index: number; taskId: string } | undefined;
  for (let index = 0; index < urls.queues.length && !found; index++) {
    const r = await poll(urls.queues[index].signedPollUrl);
    expect(r.status).toBe(200);
    if (r.messages.length) found = { index, taskId: r.messages[0].body.taskId };
  }
  expect(found).toEqual({ index: PRIORITIES.indexOf('medium') * SHARDS + 2, taskId });

  // `prov/one=1` in QUEUE_PENDING_SHARDS: that task queue keeps one queue per priority.
  const one = await root10().pollTaskUrls('prov', 'one');
  expect(one.queues).toHaveLength(PRIORITIES.length);
});

test('claimWork with xmlMessage deletes the message from the shard it came from', async () => {
  const tq = uniqueQueue();
  const taskId = await create(tq, idInShard(tq, 1), 'lowest');
  const [prov, wt] = tq.split('/');
  const urls: PollUrls = await root10().pollTaskUrls(prov, wt);
  const r = await poll(urls.queues[PRIORITIES.indexOf('lowest') * SHARDS + 1].signedPollUrl);
  expect(r.messages.map((m) => m.body.taskId)).toEqual([taskId]);
  const res = await root10().claimWork(prov, wt, { ...W1, tasks: 1, xmlMessage: r.xml });
  expect(res.tasks.map((c: any) => c.status.taskId)).toEqual([taskId]);
  expect(await shardCounts(tq, 'lowest')).toEqual([0, 0, 0]);
});

test('after the shard count drops to 1, claimWork still drains the hints left in the other shards', async () => {
  const tq = uniqueQueue();
  const ids = [await create(tq, idInShard(tq, 0)), await create(tq, idInShard(tq, 1)), await create(tq, idInShard(tq, 2))];
  const single = await startTestService({ ...DEPLOYMENT, QUEUE_CLAIM_WORK_POLL_S: '1', QUEUE_PENDING_SHARDS: '1' });
  try {
    const later = slugid();
    await single.queue().createTask(later, taskDef(tq));
    const got: string[] = [];
    for (;;) {
      const r = await single.queue().claimWork(tq, { ...W1, tasks: 4 });
      if (!r.tasks.length) break;
      got.push(...r.tasks.map((c: any) => c.status.taskId));
    }
    expect(new Set(got)).toEqual(new Set([...ids, later]));
    expect(got).toHaveLength(4);
  } finally {
    await single.close();
  }
});
