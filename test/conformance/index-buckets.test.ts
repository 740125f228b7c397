/**
 * A busy task queue's operator index over hash buckets (QUEUE_PENDING_SHARDS=3): its tasks' rows
 * land in three table partitions, and every listing and count the queue and the dashboard serve
 * (pending and claimed lists, counts, state counts, resolved runs, worker counts, tasks by name)
 * is complete and in order, paged across them; a deployment that drops back to one bucket still
 * reads the old ones.
 */
import { startTestService, TestService, taskDef, slugid, sharedDeployment } from '../helpers/service';
import { claim, sleep, uniqueQueue, W1, W2 } from '../helpers/work';
import { queuePk } from '../../shared/ops/indexes';
import { jumpHash } from '../../shared/storage/accounts';
import { allRows } from '../../shared/storage/storage';

const BUCKETS = 3;
/** Shared by both services, so they serve one deployment. */
const DEPLOYMENT = sharedDeployment();

let svc: TestService;
let Ops: any;
beforeAll(async () => {
  svc = await startTestService({ ...DEPLOYMENT, QUEUE_CLAIM_WORK_POLL_S: '1', QUEUE_PENDING_SHARDS: String(BUCKETS) });
  const reference = await (await fetch(`${svc.rootUrl}/api/queue/v1/ops/reference`)).json();
  Ops = svc.tc.createClient(reference, 'QueueOps');
});
afterAll(async () => svc?.close());

const ops = (s: TestService) => new Ops({ rootUrl: s.rootUrl, credentials: s.root, retries: 0 });

/** A taskId whose rows go to `bucket` of three (placement is by hash: draw until one fits). */
function idIn(bucket: number): string {
  for (;;) {
    const id = slugid();
    if (jumpHash(id, BUCKETS) === bucket) return id;
  }
}

/** Every item of a paged call, two per page, so continuation tokens cross the buckets. */
async function all(call: (q: Record<string, unknown>) => Promise<any>, key: string, query: Record<string, unknown> = {}): Promise<any[]> {
  const out: any[] = [];
  let token: string | undefined;
  let pages = 0;
  do {
    const r = await call({ ...query, limit: 2, ...(token ? { continuationToken: token } : {}) });
    expect(r[key].length).toBeLessThanOrEqual(2);
    out.push(...r[key]);
    token = r.continuationToken;
    expect(++pages).toBeLessThan(50);
  } while (token);
  return out;
}

/** Waits until the index shows these counts (index writes follow the task writes). */
async function settled(s: TestService, tq: string, pending: number, claimed: number): Promise<void> {
  for (let i = 0; ; i++) {
    const c = await s.queue().taskQueueCounts(tq);
    if (c.pendingTasks === pending && c.claimedTasks === claimed) return;
    if (i > 50) expect({ pending: c.pendingTasks, claimed: c.claimedTasks }).toEqual({ pending, claimed });
    await sleep(100);
  }
}

test('a task queue over three buckets: rows in three partitions, every listing and count complete and in order; one bucket later still reads them', async () => {
  const tq = uniqueQueue();
  const [provisionerId, workerType] = tq.split('/');
  const name = `bucketed-${slugid()}`;
  const q = svc.queue();
  // Nine tasks, created one after another in bucket order 0, 1, 2, 0, ...
  const ids = Array.from({ length: 9 }, (_, i) => idIn(i % BUCKETS));
  for (const id of ids) await q.createTask(id, taskDef(tq, { metadata: { name, description: 'd', owner: 'o@example.com', source: 'https://example.com' } }));
  await settled(svc, tq, 9, 0);

  // Each bucket's partition holds exactly its tasks' pending rows.
  const indexes = svc.services.storage.table('Indexes');
  for (let b = 0; b < BUCKETS; b++) {
    const rows = await allRows(indexes, { partitionKey: queuePk(tq, b), rowKey: { ge: 'p~', lt: 'p~~' } });
    expect(rows.map((r) => r.taskId).sort()).toEqual(ids.filter((_, i) => i % BUCKETS === b).sort());
  }

  expect((await q.pendingTasks(tq)).pendingTasks).toBe(9);
  expect((await all((qs) => q.listPendingTasks(tq, qs), 'tasks')).map((t) => t.taskId)).toEqual(ids);

  // Six claims, one at a time, by two workers in turn; the first three resolve.
  const claims: { taskId: string; workerId: string; c: any }[] = [];
  for (let i = 0; i < 6; i++) {
    const worker = i % 2 ? W2 : W1;
    const [c] = await claim(svc, tq, worker, 1);
    claims.push({ taskId: c.status.taskId, workerId: worker.workerId, c });
  }
  const outcome = ['completed', 'completed', 'failed'] as const;
  for (const [i, o] of outcome.entries()) {
    const { c } = claims[i];
    const wq = svc.queue(c.credentials);
    if (o === 'completed') await wq.reportCompleted(c.status.taskId, c.runId);
    else await wq.reportFailed(c.status.taskId, c.runId);
  }
  await settled(svc, tq, 3, 3);
  const claimedIds = claims.map((c) => c.taskId);
  const stillPending = ids.filter((id) => !claimedIds.includes(id));
  // Several buckets on each side: a reader that missed one would miss rows.
  expect(new Set(claimedIds.slice(3).map((id) => jumpHash(id, BUCKETS))).size + new Set(stillPending.map((id) => jumpHash(id, BUCKETS))).size).toBeGreaterThan(
    2,
  );

  /** Everything a reader of this task queue sees, through service `s`. */
  const view = async (s: TestService) => {
    const sq = s.queue();
    const counts = await sq.taskQueueCounts(tq);
    return {
      pending: (await all((qs) => sq.listPendingTasks(tq, qs), 'tasks')).map((t) => t.taskId),
      claimed: (await all((qs) => sq.listClaimedTasks(tq, qs), 'tasks')).map((t) => t.taskId),
      counts: [(await sq.pendingTasks(tq)).pendingTasks, counts.pendingTasks, counts.claimedTasks],
      stateCounts: (await ops(s).taskQueueStateCounts(tq)).counts,
      resolvedHere: (await all((qs) => ops(s).listTaskQueueTasks(tq, qs), 'tasks', { state: 'completed' })).map((t) => t.taskId),
      resolvedAll: (await all((qs) => ops(s).listResolvedTasks(qs), 'tasks', { since: new Date(Date.now() - 600_000).toJSON() }))
        .filter((t) => t.taskQueueId === tq)
        .map((t) => `${t.taskId} ${t.state}`),
      workers: [
        (await ops(s).workerStateCounts(provisionerId, workerType, 'wg', 'w1')).counts,
        (await ops(s).workerStateCounts(provisionerId, workerType, 'wg', 'w2')).counts,
      ],
      byName: (await all((qs) => ops(s).listTasksByName(qs), 'tasks', { name })).map((t) => t.taskId),
    };
  };
  const worker = (w: string) => {
    const mine = claims.map((c, i) => ({ ...c, state: i < 3 ? outcome[i] : 'running' })).filter((c) => c.workerId === w);
    const n = (s: string) => mine.filter((c) => c.state === s).length;
    return { running: n('running'), completed: n('completed'), failed: n('failed'), exception: 0 };
  };
  const expected = {
    pending: stillPending, // oldest first
    claimed: claimedIds.slice(3), // in claim order
    counts: [3, 3, 3],
    stateCounts: { unscheduled: 0, pending: 3, delayed: 0, suspended: 0, running: 3, completed: 2, failed: 1, exception: 0 },
    resolvedHere: [claimedIds[1], claimedIds[0]], // newest first
    resolvedAll: [`${claimedIds[2]} failed`, `${claimedIds[1]} completed`, `${claimedIds[0]} completed`],
    workers: [worker('w1'), worker('w2')],
    byName: [...ids].reverse(), // newest created first
  };
  expect(await view(svc)).toEqual(expected);

  // A pending row its task contradicts (a crash left it) is skipped and deleted from its bucket.
  const stale = claimedIds.find((id) => jumpHash(id, BUCKETS) > 0)!;
  const staleRow = { partitionKey: queuePk(tq, jumpHash(stale, BUCKETS)), rowKey: `p~${new Date(0).toJSON()}~${stale}~0` };
  await indexes.upsert({ ...staleRow, taskId: stale, runId: 0, taskQueueId: tq, live: true, deadline: new Date(Date.now() + 3600_000).toJSON() });
  expect((await all((qs) => q.listPendingTasks(tq, qs), 'tasks')).map((t) => t.taskId)).toEqual(stillPending);
  expect(await indexes.get(staleRow.partitionKey, staleRow.rowKey)).toBeUndefined();

  // The deployment drops back to one bucket: a new task goes to bucket 0 whatever its id, and the
  // old buckets stay readable (from another instance too, which never wrote them).
  const single = await startTestService({ ...DEPLOYMENT, QUEUE_CLAIM_WORK_POLL_S: '1', QUEUE_PENDING_SHARDS: '1' });
  try {
    const late = idIn(2);
    await single.queue().createTask(late, taskDef(tq, { metadata: { name, description: 'd', owner: 'o@example.com', source: 'https://example.com' } }));
    await settled(single, tq, 4, 3);
    const row = await allRows(indexes, { partitionKey: queuePk(tq, 0), rowKey: { ge: 'p~', lt: 'p~~' }, where: [{ prop: 'taskId', op: 'eq', value: late }] });
    expect(row).toHaveLength(1);
    const stateCounts = { ...expected.stateCounts, pending: 4 };
    expect(await view(single)).toEqual({ ...expected, pending: [...stillPending, late], counts: [4, 4, 3], stateCounts, byName: [late, ...expected.byName] });
  } finally {
    await single.close();
  }
}, 60_000);
