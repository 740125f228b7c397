/**
 * A busy task queue's operator index spread over hash buckets (shared/ops/indexes.ts), on the
 * in-memory storage: row keys and placement, the registry's bucket counts, and every reader
 * finding the rows of every bucket, in order.
 */
import { MemoryStorage } from '../../shared/storage/memory';
import type { Storage } from '../../shared/storage/storage';
import { jumpHash } from '../../shared/storage/accounts';
import { created, moved } from '../helpers/index-changes';
import {
  applyOps,
  countActive,
  deletionOps,
  indexBucket,
  indexOps,
  type Change,
  indexedQueues,
  listActive,
  listLatest,
  listResolved,
  listWorkerRuns,
  queuePk,
  queueStateCounts,
  QueueRegistry,
  QUEUES_PK,
  stalePending,
  workerStateCounts,
} from '../../shared/ops/indexes';
import { decodeTask, encodeTask, type Run, type TaskRecord } from '../../shared/tasks/model';
import { create } from '../../shared/lifecycle/transitions';
import { emptyPagesStorage } from '../helpers/empty-pages';

const BUCKETS = 3;
const t0 = Date.parse('2026-11-24T00:00:00.000Z');
const at = (s: number) => new Date(t0 + s * 1000).toJSON();
const NOW = new Date(t0 + 100_000);

function task(taskId: string, tq: string, created: number, indexBuckets?: number): TaskRecord {
  return {
    taskId,
    runs: [],
    retriesLeft: 5,
    takenUntil: '',
    hasDependents: false,
    dependentsNotified: -1,
    ...(indexBuckets ? { indexBuckets } : {}),
    definition: {
      taskQueueId: tq,
      taskGroupId: taskId,
      deadline: at(3600),
      expires: at(7200),
      created: at(created),
      metadata: { name: 'build', description: '', owner: '', source: 'https://x' },
    } as TaskRecord['definition'],
  };
}
const pendingRun = (s: number): Run => ({ runId: 0, state: 'pending', reasonCreated: 'scheduled', scheduled: at(s) });
const runningRun = (s: number, workerId: string): Run => ({
  ...pendingRun(s),
  state: 'running',
  workerGroup: 'wg',
  workerId,
  started: at(s + 0.5),
  takenUntil: at(1200),
});
const resolvedRun = (r: Run, state: 'completed' | 'failed', s: number): Run => ({ ...r, state, reasonResolved: state, resolved: at(s) });
const withRuns = (t: TaskRecord, runs: Run[]): TaskRecord => ({ ...t, runs });

/** The index writes of `after`, written with `changes`. */
async function write(storage: Storage, after: TaskRecord, changes: Change[]): Promise<void> {
  await Promise.all([...indexOps(changes, after)].map(([, ops]) => applyOps(storage, ops)));
}

/** A taskId in `bucket` of `n`: placement is by hash, so draw until one fits. */
function idIn(bucket: number, n = BUCKETS): string {
  for (let i = 0; ; i++) {
    const id = `t${Math.random().toString(36).slice(2)}${i}`;
    if (jumpHash(id, n) === bucket) return id;
  }
}

/** Every item of a paged reader, with small pages so the continuation goes across buckets. */
async function all<T>(read: (continuation?: string) => Promise<{ rows: T[]; continuation?: string }>): Promise<T[]> {
  const out: T[] = [];
  let token: string | undefined;
  let pages = 0;
  do {
    const r = await read(token);
    out.push(...r.rows);
    token = r.continuation;
    expect(++pages).toBeLessThan(50);
  } while (token);
  return out;
}

/** A second process on the same data: its own caches (the cache is per storage object). */
const otherProcess = (s: MemoryStorage): Storage => Object.create(s) as Storage;

async function fresh(): Promise<MemoryStorage> {
  const s = new MemoryStorage('ixb');
  await s.table('Indexes').create();
  return s;
}

test('bucket 0 keeps the partition key of a task queue without buckets; bucket b > 0 appends ~b', () => {
  expect(queuePk('prov/busy')).toBe('q~prov!2fbusy');
  expect(queuePk('prov/busy', 0)).toBe('q~prov!2fbusy');
  expect(queuePk('prov/busy', 2)).toBe('q~prov!2fbusy~2');
});

test("a task's index rows all go to the bucket its id hashes to, in every transition; without indexBuckets, bucket 0", () => {
  const ids = Array.from({ length: 60 }, (_, i) => `task${i}`);
  for (const id of ids) expect(indexBucket(task(id, 'p/q', 0, BUCKETS))).toBe(jumpHash(id, BUCKETS));
  expect(new Set(ids.map((id) => indexBucket(task(id, 'p/q', 0, BUCKETS))))).toEqual(new Set([0, 1, 2]));
  expect(ids.every((id) => indexBucket(task(id, 'p/q', 0)) === 0 && indexBucket(task(id, 'p/q', 0, 1)) === 0)).toBe(true);

  const t = task(idIn(2), 'p/q', 0, BUCKETS);
  const p = withRuns(t, [pendingRun(1)]);
  const r = withRuns(t, [runningRun(1, 'w')]);
  const c = withRuns(t, [resolvedRun(runningRun(1, 'w'), 'completed', 3)]);
  for (const ops of [
    indexOps(created(t), t),
    indexOps([moved(p, 0, null)], p),
    indexOps([moved(r, 0, 'pending')], r),
    indexOps([moved(c, 0, 'running')], c),
    deletionOps(c),
  ]) {
    // One partition per write: the transition's index ops stay one entity-group transaction.
    expect([...ops.keys()]).toEqual(['q~p!2fq~2']);
  }
});

test('the bucket count is part of the stored task (only when > 1) and set by createTask from the shard count', () => {
  const t = task('abc', 'p/q', 0, BUCKETS);
  expect(decodeTask(encodeTask(t)).indexBuckets).toBe(BUCKETS);
  expect(encodeTask(task('abc', 'p/q', 0, 1)).indexBuckets).toBeUndefined();
  expect(decodeTask(encodeTask(task('abc', 'p/q', 0))).indexBuckets).toBeUndefined();
  const def = task('abc', 'p/q', 0).definition;
  expect(create({ taskId: 'abc', definition: { ...def, dependencies: [] }, hintId: 'h', indexBuckets: 4 }, NOW).next.indexBuckets).toBe(4);
  expect(create({ taskId: 'abc', definition: { ...def, dependencies: [] }, hintId: 'h', indexBuckets: 1 }, NOW).next).not.toHaveProperty('indexBuckets');
});

test('the registry keeps the largest bucket count ever recorded: a later writer with fewer does not shrink it', async () => {
  const storage = await fresh();
  await new QueueRegistry(storage).ensure('p/busy', 4);
  await new QueueRegistry(storage).ensure('p/busy', 2);
  await new QueueRegistry(storage).ensure('p/busy'); // one bucket: the row as before buckets existed
  await new QueueRegistry(storage).ensure('p/calm');
  const row = await storage.table('Indexes').get(QUEUES_PK, queuePk('p/busy'));
  expect(row).toMatchObject({ taskQueueId: 'p/busy', b4: true, b2: true });
  expect(await storage.table('Indexes').get(QUEUES_PK, queuePk('p/calm'))).not.toHaveProperty('b1');
  expect((await indexedQueues(storage)).sort((a, b) => a.taskQueueId.localeCompare(b.taskQueueId))).toEqual([
    { taskQueueId: 'p/busy', buckets: 4 },
    { taskQueueId: 'p/calm', buckets: 1 },
  ]);
});

test('a task queue with one bucket costs one query per read, as before buckets, plus one cached registry read', async () => {
  const storage = await fresh();
  const tq = 'p/one';
  await new QueueRegistry(storage).ensure(tq);
  for (let i = 0; i < 3; i++) {
    const t = task(`one${i}`, tq, i);
    await write(storage, t, created(t));
    const p = withRuns(t, [pendingRun(i)]);
    await write(storage, p, [moved(p, 0, null)]);
  }
  const reader = otherProcess(storage);
  const ops = () => storage.meter.snapshot().byOp;
  const before = ops();
  expect(await countActive(reader, tq, 'pending', NOW)).toBe(3);
  const first = ops();
  expect(first['Indexes.get'] - (before['Indexes.get'] ?? 0)).toBe(1);
  expect(first['Indexes.query'] - (before['Indexes.query'] ?? 0)).toBe(1);
  // From then on (BUCKETS_TTL_MS): the query alone, with the table's own continuation.
  const page = await listActive(reader, tq, 'pending', NOW, 2);
  expect(page.rows.map((r) => r.taskId)).toEqual(['one0', 'one1']);
  expect(page.continuation).not.toMatch(/^ix\./);
  expect((await listActive(reader, tq, 'pending', NOW, 2, page.continuation)).rows.map((r) => r.taskId)).toEqual(['one2']);
  const after = ops();
  expect(after['Indexes.get']).toBe(first['Indexes.get']);
  expect(after['Indexes.query'] - first['Indexes.query']).toBe(2);
});

describe('a task queue over three buckets: every reader sees every bucket', () => {
  const tq = 'p/busy';
  let storage: MemoryStorage;
  /** Nine tasks, three per bucket, created one second apart in bucket order 0, 1, 2, 0, ... */
  const ids: string[] = [];
  const byBucket = (b: number) => ids.filter((id) => jumpHash(id, BUCKETS) === b);

  beforeAll(async () => {
    storage = await fresh();
    await new QueueRegistry(storage).ensure(tq, BUCKETS);
    for (let i = 0; i < 9; i++) ids.push(idIn(i % BUCKETS));
    for (const [i, id] of ids.entries()) {
      const t = task(id, tq, i, BUCKETS);
      const p = withRuns(t, [pendingRun(i)]);
      await write(storage, t, created(t));
      await write(storage, p, [moved(p, 0, null)]);
      if (i >= 3) {
        // Claimed 10 s later in creation order, by w1 and w2 in turn; the first three resolve.
        const r = withRuns(t, [{ ...runningRun(10 + i, i % 2 ? 'w1' : 'w2'), scheduled: p.runs[0].scheduled }]);
        await write(storage, r, [moved(r, 0, 'pending')]);
        const c = withRuns(t, [resolvedRun(r.runs[0], i === 4 ? 'failed' : 'completed', 20 + i)]);
        if (i < 6) await write(storage, c, [moved(c, 0, 'running')]);
      }
    }
  });

  test('the rows are in three partitions, each holding only its own tasks', async () => {
    for (let b = 0; b < BUCKETS; b++) {
      const page = await storage.table('Indexes').page({ partitionKey: queuePk(tq, b) }, 1000);
      expect(new Set(page.items.map((r) => r.taskId))).toEqual(new Set(byBucket(b)));
    }
  });

  test('lists: complete and in order, paged across buckets', async () => {
    const reader = otherProcess(storage);
    expect((await all((c) => listActive(reader, tq, 'pending', NOW, 2, c))).map((r) => r.taskId)).toEqual(ids.slice(0, 3));
    expect((await all((c) => listActive(reader, tq, 'running', NOW, 1, c))).map((r) => r.taskId)).toEqual(ids.slice(6));
    // Newest resolution first.
    expect((await all((c) => listResolved(reader, tq, {}, 2, c))).map((r) => r.taskId)).toEqual(ids.slice(3, 6).reverse());
    expect((await all((c) => listResolved(reader, undefined, { state: 'completed' }, 1, c))).map((r) => r.taskId)).toEqual([ids[5], ids[3]]);
    const w1 = ids.filter((_, i) => i >= 3 && i % 2 === 1).reverse();
    expect((await all((c) => listWorkerRuns(reader, tq, 'wg', 'w1', {}, 1, c))).map((r) => r.taskId)).toEqual(w1);
    expect((await all((c) => listLatest(reader, { name: 'build' }, 2, c))).map((r) => r.taskId)).toEqual([...ids].reverse());
    // The oldest pending runs, over all buckets.
    expect((await stalePending(reader, tq, at(2.5), NOW, 10)).map((r) => r.taskId)).toEqual(ids.slice(0, 3));
    expect((await stalePending(reader, tq, at(100), NOW, 2)).map((r) => r.taskId)).toEqual(ids.slice(0, 2));
  });

  test('counts: sums over the buckets', async () => {
    const reader = otherProcess(storage);
    expect(await countActive(reader, tq, 'pending', NOW)).toBe(3);
    expect(await countActive(reader, tq, 'running', NOW)).toBe(3);
    expect(await queueStateCounts(reader, tq, at(0), NOW)).toEqual({ unscheduled: 0, pending: 3, running: 3, completed: 2, failed: 1, exception: 0 });
    expect(await workerStateCounts(reader, tq, 'wg', 'w1', at(0), NOW)).toEqual({ running: 1, completed: 2, failed: 0, exception: 0 });
    expect(await workerStateCounts(reader, tq, 'wg', 'w2', at(0), NOW)).toEqual({ running: 2, completed: 0, failed: 1, exception: 0 });
  });

  test('through empty and short pages, as Azure may answer: every reader still sees every bucket', async () => {
    const reader = emptyPagesStorage(otherProcess(storage), { pageSize: 1 });
    expect((await stalePending(reader, tq, at(100), NOW, 3)).map((r) => r.taskId)).toEqual(ids.slice(0, 3));
    expect((await all((c) => listActive(reader, tq, 'pending', NOW, 2, c))).map((r) => r.taskId)).toEqual(ids.slice(0, 3));
    expect((await all((c) => listResolved(reader, undefined, { state: 'completed' }, 1, c))).map((r) => r.taskId)).toEqual([ids[5], ids[3]]);
    expect(await countActive(reader, tq, 'running', NOW)).toBe(3);
    expect(await queueStateCounts(reader, tq, at(0), NOW)).toEqual({ unscheduled: 0, pending: 3, running: 3, completed: 2, failed: 1, exception: 0 });
  });

  test('after the count drops to 1, new tasks go to bucket 0 and the old buckets stay readable', async () => {
    await new QueueRegistry(storage).ensure(tq, 1);
    const late = idIn(1);
    const t = task(late, tq, 50, 1);
    await write(storage, t, created(t));
    const p = withRuns(t, [pendingRun(50)]);
    await write(storage, p, [moved(p, 0, null)]);
    expect((await storage.table('Indexes').get(queuePk(tq, 0), `p~${at(50)}~${late}~0`))?.taskId).toBe(late);
    const reader = otherProcess(storage);
    expect((await all((c) => listActive(reader, tq, 'pending', NOW, 2, c))).map((r) => r.taskId)).toEqual([...ids.slice(0, 3), late]);
    expect(await countActive(reader, tq, 'pending', NOW)).toBe(4);
  });

  test('a continuation token that is not one of ours is refused as bad input', async () => {
    await expect(listActive(storage, tq, 'pending', NOW, 2, 'ix.bm9wZQ')).rejects.toMatchObject({ code: 'InvalidRequestArguments' });
  });
});
