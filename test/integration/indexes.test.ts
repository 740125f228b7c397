/**
 * The operator indexes against real Azurite when writers land out of order or an index write is
 * lost: counts must follow the task rows, not the order in which index writes arrive. And the
 * group commit (IndexBatcher): writes queued together share transactions.
 */
import crypto from 'node:crypto';
import { Storage, createStorage } from '../../shared/storage/storage';
import {
  INDEX_LINGER_MS,
  IndexBatcher,
  applyOps,
  countActive,
  deletionOps,
  indexBucket,
  indexOps,
  type Change,
  listResolved,
  listWorkerRuns,
  QueueRegistry,
  repairOps,
  stalePending,
} from '../../shared/ops/indexes';
import type { Run, TaskRecord } from '../../shared/tasks/model';
import { created, moved } from '../helpers/index-changes';

let storage: Storage;
beforeAll(async () => {
  storage = createStorage(process.env.TEST_STORAGE_CONNECTION!, 'i' + crypto.randomBytes(5).toString('hex'));
  await storage.table('Indexes').create();
});

const now = Date.now();
const at = (s: number) => new Date(now + s * 1000).toJSON();
let n = 0;

function task(runs: Run[], deadline = at(3600)): TaskRecord {
  const taskId = `task${++n}`;
  return {
    taskId,
    runs,
    retriesLeft: 5,
    takenUntil: '',
    hasDependents: false,
    dependentsNotified: -1,
    definition: {
      taskQueueId: `prov/idx-${n}`,
      taskGroupId: taskId,
      deadline,
      expires: at(7200),
      created: at(0),
      metadata: { name: 'n', description: '', owner: '', source: 'https://x' },
    } as TaskRecord['definition'],
  };
}
const next = (t: TaskRecord, runs: Run[]): TaskRecord => ({ ...t, runs });
const pending = (runId = 0): Run => ({ runId, state: 'pending', reasonCreated: runId ? 'retry' : 'scheduled', scheduled: at(runId) });
const running = (runId = 0, workerId = 'w'): Run => ({
  ...pending(runId),
  state: 'running',
  workerGroup: 'wg',
  workerId,
  started: at(runId + 0.5),
  takenUntil: at(1200),
});
const resolved = (r: Run, state: 'completed' | 'exception', reason: Run['reasonResolved']): Run => ({
  ...r,
  state,
  reasonResolved: reason,
  resolved: at(r.runId + 0.7),
});

/** The index writes of `after` (written with `changes`). */
async function write(after: TaskRecord, changes: Change[]): Promise<void> {
  const repair = repairOps(changes, after);
  await Promise.all(
    [...indexOps(changes, after)].map(([pk, ops]) =>
      applyOps(
        storage,
        ops,
        repair.filter((r) => r.row.partitionKey === pk),
      ),
    ),
  );
}
async function counts(t: TaskRecord): Promise<[number, number]> {
  const q = t.definition.taskQueueId;
  return [await countActive(storage, q, 'pending', new Date()), await countActive(storage, q, 'running', new Date())];
}

test('a claim recorded before the pending row it replaces leaves nothing pending', async () => {
  const v1 = task([pending()]);
  const v2 = next(v1, [running()]);
  await write(v2, [moved(v2, 0, 'pending')]); // the claimer's index write wins the race
  await write(v1, created(v1)); // the creator's arrives late
  expect(await counts(v1)).toEqual([0, 1]);
});

test('a cancel recorded before the claim it ends leaves nothing claimed, and the worker row shows the outcome', async () => {
  const v1 = task([pending()]);
  const v2 = next(v1, [running()]);
  const v3 = next(v1, [resolved(running(), 'exception', 'canceled')]);
  await write(v1, created(v1));
  await write(v3, [moved(v3, 0, 'running')]);
  await write(v2, [moved(v2, 0, 'pending')]);
  expect(await counts(v1)).toEqual([0, 0]);
  expect((await listResolved(storage, v1.definition.taskQueueId, {}, 10)).rows.map((r) => [r.taskId, r.state])).toEqual([[v1.taskId, 'exception']]);
  expect((await listWorkerRuns(storage, v1.definition.taskQueueId, 'wg', 'w', {}, 10)).rows.map((r) => r.state)).toEqual(['exception']);
});

test('a lost claim index write is repaired by the resolution', async () => {
  const v1 = task([pending()]);
  const v3 = next(v1, [resolved(running(), 'completed', 'completed')]);
  await write(v1, created(v1));
  // (crash: the claim's write, v1 → running, never happened)
  expect(await counts(v1)).toEqual([1, 0]);
  await write(v3, [moved(v3, 0, 'running')]);
  expect(await counts(v1)).toEqual([0, 0]);
});

test('a lost retry index write is repaired by the next claim', async () => {
  const v1 = task([pending()]);
  const v2 = next(v1, [running()]);
  const v3 = next(v1, [resolved(running(), 'exception', 'worker-shutdown'), pending(1)]);
  const v4 = next(v1, [v3.runs[0], running(1, 'w2')]);
  await write(v1, created(v1));
  await write(v2, [moved(v2, 0, 'pending')]);
  // (crash: the write for v2 → v3 never happened)
  expect(await counts(v1)).toEqual([0, 1]);
  await write(v4, [moved(v4, 1, 'pending')]);
  expect(await counts(v1)).toEqual([0, 1]);
  expect((await listResolved(storage, v1.definition.taskQueueId, {}, 10)).rows.map((r) => [r.runId, r.reasonResolved])).toEqual([[0, 'worker-shutdown']]);
});

test('rows of tasks past their deadline stop counting', async () => {
  const v1 = task([running()], at(-1));
  await write(next(v1, [pending()]), created(next(v1, [pending()])));
  await write(v1, [moved(v1, 0, 'pending')]);
  expect(await counts(v1)).toEqual([0, 0]);
});

test('repeating a write changes nothing', async () => {
  const v1 = task([pending()]);
  const v2 = next(v1, [running()]);
  for (let i = 0; i < 2; i++) {
    await write(v1, created(v1));
    await write(v2, [moved(v2, 0, 'pending')]);
  }
  expect(await counts(v1)).toEqual([0, 1]);
});

test('stalePending over three buckets on Azurite: the oldest pending runs of all of them, oldest first', async () => {
  const q = `prov/idx-buckets-${crypto.randomBytes(3).toString('hex')}`;
  const made: { taskId: string; bucket: number }[] = [];
  // Six tasks scheduled at 0..5 s, in buckets 2, 1, 0, 2, 1, 0: the merge must interleave them.
  for (let i = 0; i < 6; i++) {
    const want = 2 - (i % 3);
    let t: TaskRecord;
    do t = { ...task([]), indexBuckets: 3 };
    while (indexBucket(t) !== want);
    t.definition = { ...t.definition, taskQueueId: q };
    const withRun: TaskRecord = { ...t, runs: [{ runId: 0, state: 'pending', reasonCreated: 'scheduled', scheduled: at(i) }] };
    await write(withRun, created(withRun));
    made.push({ taskId: t.taskId, bucket: want });
  }
  await new QueueRegistry(storage).ensure(q, 3);
  const stale = await stalePending(storage, q, at(10), new Date(), 4);
  expect(stale.map((s) => s.taskId)).toEqual(made.slice(0, 4).map((m) => m.taskId));
  expect(new Set(made.slice(0, 4).map((m) => m.bucket)).size).toBe(3);
});

/** Index storage calls made so far, by operation. */
const calls = (op: string) => storage.meter.snapshot().byOp[`Indexes.${op}`] ?? 0;

/** One writer's changes through `batcher` (a task's changes all go to its task queue's partition); `changes` undefined: `t` is deleted. */
function queue(batcher: IndexBatcher, t: TaskRecord, changes: Change[] | undefined, now = false): Promise<void> {
  const [[pk, ops], ...rest] = [...(changes ? indexOps(changes, t) : deletionOps(t))];
  expect(rest).toEqual([]);
  return batcher.apply(pk, ops, changes ? repairOps(changes, t) : [], now);
}

/** `n` tasks of one task queue. */
function sameQueue(n: number): TaskRecord[] {
  const tq = `prov/batch-${crypto.randomBytes(4).toString('hex')}`;
  return Array.from({ length: n }, () => {
    const t = task([pending()]);
    t.definition.taskQueueId = tq;
    return t;
  });
}

test('writes queued together share transactions of at most 100 actions; each task’s writes keep their order', async () => {
  const batcher = new IndexBatcher(storage);
  const ts = sameQueue(120); // 2 actions each at creation (name row, pending row): 240
  const claimed = ts.slice(0, 10).map((t) => next(t, [running()]));
  const tx = calls('transaction');
  const single = calls('delete') + calls('insert');
  await Promise.all([
    ...ts.map((t) => queue(batcher, t, created(t))),
    // Claims queued right behind their creation: each waits for a later transaction than its pending row's.
    ...claimed.map((c) => queue(batcher, c, [moved(c, 0, 'pending')])),
  ]);
  // 240 creation actions in 3 transactions (100, 100, 40; the claims' 30 fit the third), not 130.
  expect(calls('transaction') - tx).toBe(3);
  expect(await counts(ts[0])).toEqual([110, 10]);
  expect(calls('delete') + calls('insert')).toBe(single); // no fallback: nothing arrived out of order
});

test('a lone write goes out after the linger; settled() and an awaited write (a deletion) send lingering writes at once', async () => {
  const [a, b, c] = sameQueue(3);
  const t0 = Date.now();
  await queue(new IndexBatcher(storage), a, created(a));
  expect(Date.now() - t0).toBeGreaterThanOrEqual(INDEX_LINGER_MS - 1);
  expect(await counts(a)).toEqual([1, 0]);
  // With a linger far longer than the test's timeout, only settled() can send it.
  const slow = new IndexBatcher(storage, 3600_000);
  const written = queue(slow, b, created(b));
  await slow.settled();
  await written;
  expect(await counts(b)).toEqual([2, 0]);
  const lingering = queue(slow, c, created(c));
  await queue(slow, a, undefined, true); // a's deletion takes c's creation along
  await lingering;
  expect(await counts(b)).toEqual([2, 0]);
});
