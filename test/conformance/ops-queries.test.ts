/**
 * The operator queries (NuGet Work's management API as the bar): a task queue's tasks by state,
 * runs resolved in a time window per task queue and overall, the latest task of a name or task
 * group, and counts by state per task queue and per worker, each paged. Called through a
 * taskcluster-client class built from the service's own API reference.
 */
import { INDEX_LINGER_MS } from '../../shared/ops/indexes';
import { startTestService, TestService, taskDef, slugid, expectError } from '../helpers/service';

let svc: TestService;
let Ops: any;
beforeAll(async () => {
  // The production linger: queued index writes wait for it, so only settled() makes them visible at once.
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' }, { tuning: { indexLingerMs: INDEX_LINGER_MS } });
  const reference = await (await fetch(`${svc.rootUrl}/api/queue/v1/ops/reference`)).json();
  Ops = svc.tc.createClient(reference, 'QueueOps');
});
afterAll(async () => svc?.close());

const ops = (credentials: any = svc.root) => new Ops({ rootUrl: svc.rootUrl, credentials, retries: 0 });
const uniqueQueue = () => `prov/o-${Math.random().toString(36).slice(2, 10)}`;
const meta = (name: string) => ({ name, description: 'd', owner: 'o@example.com', source: 'https://example.com/x' });

/** Every item of a paged listing, with a small page size to exercise continuation tokens. */
async function all(call: (q: Record<string, unknown>) => Promise<any>, key: string, query: Record<string, unknown> = {}, limit = 2): Promise<any[]> {
  const out: any[] = [];
  let token: string | undefined;
  let pages = 0;
  do {
    const r = await call({ ...query, limit, ...(token ? { continuationToken: token } : {}) });
    expect(r[key].length).toBeLessThanOrEqual(limit);
    out.push(...r[key]);
    token = r.continuationToken;
    expect(++pages).toBeLessThan(100);
  } while (token);
  return out;
}

interface Fixture {
  tq: string;
  unscheduled: string;
  pending: string[];
  running: string[];
  completed: string[];
  failed: string[];
  exception: string[];
  between: [string, string];
}

/** One task queue with tasks in every state; two workers. */
async function fixture(): Promise<Fixture> {
  const tq = uniqueQueue();
  const q = svc.queue();
  const f: Fixture = { tq, unscheduled: slugid(), pending: [], running: [], completed: [], failed: [], exception: [], between: ['', ''] };
  const create = async (name: string, extra: Record<string, unknown> = {}) => {
    const id = slugid();
    await q.createTask(id, taskDef(tq, { metadata: meta(name), ...extra }));
    return id;
  };
  // Unscheduled: depends on a task that never completes.
  const blocker = await create('blocker');
  await q.createTask(f.unscheduled, taskDef(tq, { metadata: meta('dependent'), dependencies: [blocker] }));
  f.pending.push(blocker);
  const claimOne = async (workerId: string) => (await q.claimWork(tq, { workerGroup: 'wg', workerId, tasks: 1 })).tasks[0];

  for (let i = 0; i < 5; i++) {
    // Claimed in creation order: the oldest pending run goes first.
    const id = await create('job-a');
    void id;
  }
  // blocker is the oldest pending task: claim it first, then put it back by cancel+rerun.
  const cb = await claimOne('w1');
  expect(cb.status.taskId).toBe(blocker);
  await svc.queue(cb.credentials).reportException(blocker, 0, { reason: 'worker-shutdown' });
  f.exception.push(blocker); // run 0 resolved as exception, run 1 pending again
  f.between[0] = new Date().toJSON();
  for (const [state, worker] of [
    ['completed', 'w1'],
    ['completed', 'w2'],
    ['failed', 'w2'],
  ] as const) {
    const c = await claimOne(worker);
    const wq = svc.queue(c.credentials);
    if (state === 'completed') await wq.reportCompleted(c.status.taskId, c.runId);
    else await wq.reportFailed(c.status.taskId, c.runId);
    f[state].push(c.status.taskId);
  }
  f.between[1] = new Date().toJSON();
  const r = await claimOne('w2');
  f.running.push(r.status.taskId);
  // Pending now: run 1 of blocker and one job-a; which job-a is left is known from the others.
  return f;
}

let F: Fixture;
beforeAll(async () => {
  F = await fixture();
});

test('a task queue’s tasks by state, paged', async () => {
  const list = (state: string) => all((qs) => ops().listTaskQueueTasks(F.tq, qs), 'tasks', { state });
  const unscheduled = await list('unscheduled');
  expect(unscheduled.map((t) => [t.taskId, t.state, t.name])).toEqual([[F.unscheduled, 'unscheduled', 'dependent']]);
  const pending = await list('pending');
  expect(pending).toHaveLength(2);
  expect(pending.map((t) => t.taskId)).toContain(F.pending[0]);
  expect(pending.find((t) => t.taskId === F.pending[0])).toMatchObject({
    runId: 1,
    state: 'pending',
    reasonCreated: 'retry',
    taskQueueId: F.tq,
    name: 'blocker',
  });
  expect(pending.map((t) => t.at)).toEqual([...pending.map((t) => t.at)].sort());
  const running = await list('running');
  expect(running.map((t) => [t.taskId, t.runId, t.workerGroup, t.workerId])).toEqual([[F.running[0], 0, 'wg', 'w2']]);
  const completed = await list('completed');
  expect(completed.map((t) => t.taskId)).toEqual([...F.completed].reverse());
  expect(completed[0]).toMatchObject({ state: 'completed', reasonResolved: 'completed', workerId: 'w2', name: 'job-a' });
  expect((await list('failed')).map((t) => t.taskId)).toEqual(F.failed);
  expect((await list('exception')).map((t) => [t.taskId, t.runId, t.reasonResolved])).toEqual([[F.pending[0], 0, 'worker-shutdown']]);
  // Default state is pending; a bad state is a 400.
  expect((await ops().listTaskQueueTasks(F.tq)).tasks).toHaveLength(2);
  await expectError(ops().listTaskQueueTasks(F.tq, { state: 'sleeping' }), 400, 'InvalidRequestArguments');
  await expectError(ops().listTaskQueueTasks(F.tq, { state: 'failed', since: 'yesterday-ish' }), 400, 'InvalidRequestArguments');
});

test('runs resolved in a time window, per task queue and overall, newest first', async () => {
  const [since, until] = F.between;
  const inWindow = await all((qs) => ops().listTaskQueueTasks(F.tq, qs), 'tasks', { state: 'completed', since, until }, 1);
  expect(inWindow.map((t) => t.taskId)).toEqual([...F.completed].reverse());
  // The exception happened before the window.
  expect((await ops().listTaskQueueTasks(F.tq, { state: 'exception', since, until })).tasks).toEqual([]);
  expect((await ops().listTaskQueueTasks(F.tq, { state: 'exception', until: since })).tasks).toHaveLength(1);

  const overall = await all((qs) => ops().listResolvedTasks(qs), 'tasks', { since, until });
  const mine = overall.filter((t) => t.taskQueueId === F.tq);
  expect(mine.map((t) => [t.taskId, t.state])).toEqual([
    [F.failed[0], 'failed'],
    [F.completed[1], 'completed'],
    [F.completed[0], 'completed'],
  ]);
  for (let i = 1; i < overall.length; i++) expect(overall[i - 1].at >= overall[i].at).toBe(true);
  const failures = await all((qs) => ops().listResolvedTasks(qs), 'tasks', { state: 'failed', since });
  expect(failures.filter((t) => t.taskQueueId === F.tq).map((t) => t.taskId)).toEqual(F.failed);
  // A window in the future is empty.
  expect((await ops().listResolvedTasks({ since: new Date(Date.now() + 3600_000).toJSON() })).tasks).toEqual([]);
});

test('the latest task of a name or of a task group', async () => {
  const name = `nightly-${slugid()}`;
  const group = slugid();
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const id = slugid();
    const created = new Date(Date.now() - (3 - i) * 1000).toJSON();
    await svc.queue().createTask(id, taskDef(uniqueQueue(), { metadata: meta(name), taskGroupId: group, created }));
    ids.push(id);
  }
  const byName = await ops().listTasksByName({ name, limit: 1 });
  expect(byName.tasks).toHaveLength(1);
  expect(byName.tasks[0]).toMatchObject({ taskId: ids[2], name, taskGroupId: group, status: { taskId: ids[2], state: 'pending' } });
  expect((await all((qs) => ops().listTasksByName(qs), 'tasks', { name }, 2)).map((t) => t.taskId)).toEqual([...ids].reverse());
  expect((await ops().listTaskGroupLatest(group, { limit: 1 })).tasks.map((t: any) => t.taskId)).toEqual([ids[2]]);
  expect((await all((qs) => ops().listTaskGroupLatest(group, qs), 'tasks', {}, 2)).map((t) => t.taskId)).toEqual([...ids].reverse());
  // Names are matched exactly, including characters that need escaping in keys.
  expect((await ops().listTasksByName({ name: name.slice(0, -1) })).tasks).toEqual([]);
  const odd = `a/b~c#d?${slugid()}`;
  const oddId = slugid();
  await svc.queue().createTask(oddId, taskDef(uniqueQueue(), { metadata: meta(odd) }));
  expect((await ops().listTasksByName({ name: odd })).tasks.map((t: any) => t.taskId)).toEqual([oddId]);
  await expectError(ops().listTasksByName({}), 400, 'InvalidRequestArguments');
});

test('resolved runs and names across task queues merge newest first over pages; their tokens are checked', async () => {
  // Runs resolved alternately in two task queues (cancelTask resolves a pending task at once).
  const [a, b] = [uniqueQueue(), uniqueQueue()];
  const since = new Date(Date.now() - 1000).toJSON();
  const order: string[] = [];
  for (let i = 0; i < 4; i++) {
    const id = slugid();
    await svc.queue().createTask(id, taskDef(i % 2 ? b : a));
    await svc.queue().cancelTask(id);
    order.push(id);
  }
  const mine = (await all((qs) => ops().listResolvedTasks(qs), 'tasks', { since }, 1)).filter((t) => t.taskQueueId === a || t.taskQueueId === b);
  expect(mine.map((t) => t.taskId)).toEqual([...order].reverse());
  // A task by name in a task queue that has nothing but unscheduled tasks is found too.
  const name = `waiting-${slugid()}`;
  const blocked = slugid();
  await svc.queue().createTask(blocked, taskDef(uniqueQueue(), { metadata: meta(name), dependencies: [order[0]], requires: 'all-completed' }));
  expect((await ops().listTasksByName({ name })).tasks.map((t: any) => [t.taskId, t.status.state])).toEqual([[blocked, 'unscheduled']]);
  for (const token of ['garbage', 'ix.', 'ix.Zm9v', Buffer.from('{"nextPartitionKey":"x"}').toString('base64')]) {
    await expectError(ops().listResolvedTasks({ continuationToken: token }), 400, 'InvalidRequestArguments');
    await expectError(ops().listTasksByName({ name, continuationToken: token }), 400, 'InvalidRequestArguments');
  }
});

test('counts by state per task queue and per worker', async () => {
  const c = await ops().taskQueueStateCounts(F.tq);
  expect(c).toMatchObject({ taskQueueId: F.tq, since: expect.any(String) });
  expect(c.counts).toEqual({ unscheduled: 1, pending: 2, delayed: 0, suspended: 0, running: 1, completed: 2, failed: 1, exception: 1 });
  // Resolved counts follow the window.
  expect((await ops().taskQueueStateCounts(F.tq, { since: F.between[0] })).counts).toMatchObject({ completed: 2, failed: 1, exception: 0 });
  const [p, wt] = F.tq.split('/');
  expect((await ops().workerStateCounts(p, wt, 'wg', 'w1')).counts).toEqual({ running: 0, completed: 1, failed: 0, exception: 1 });
  expect((await ops().workerStateCounts(p, wt, 'wg', 'w2')).counts).toEqual({ running: 1, completed: 1, failed: 1, exception: 0 });
  expect((await ops().workerStateCounts(p, wt, 'wg', 'nobody')).counts).toEqual({ running: 0, completed: 0, failed: 0, exception: 0 });
  // They agree with the Taskcluster counts.
  expect(await svc.queue().taskQueueCounts(F.tq)).toMatchObject({ pendingTasks: 2, claimedTasks: 1 });
});

test('an instance’s index queries see its own writes at once: right after createTask, claimWork and reportCompleted', async () => {
  // Index writes are queued for INDEX_LINGER_MS after the request answers; the queries wait for them.
  const tq = uniqueQueue();
  const [p, wt] = tq.split('/');
  const q = svc.queue();
  const id = slugid();
  const name = `ryw-${slugid()}`;
  await q.createTask(id, taskDef(tq, { metadata: meta(name) }));
  expect(await q.pendingTasks(tq)).toMatchObject({ pendingTasks: 1 });
  const claimed = await q.claimWork(tq, { workerGroup: 'wg', workerId: 'ryw', tasks: 1 });
  expect(claimed.tasks.map((t: any) => t.status.taskId)).toEqual([id]);
  expect((await q.listClaimedTasks(tq)).tasks.map((t: any) => t.taskId)).toEqual([id]);
  await svc.queue(claimed.tasks[0].credentials).reportCompleted(id, 0);
  expect((await ops().listTaskQueueTasks(tq, { state: 'completed' })).tasks.map((t: any) => t.taskId)).toEqual([id]);
  expect((await ops().workerStateCounts(p, wt, 'wg', 'ryw')).counts).toEqual({ running: 0, completed: 1, failed: 0, exception: 0 });
  expect((await ops().listTasksByName({ name })).tasks.map((t: any) => [t.taskId, t.status.state])).toEqual([[id, 'completed']]);
});

test('operator queries need their scopes', async () => {
  const clientId = `test/${slugid()}`;
  const { accessToken } = await svc
    .auth()
    .createClient(clientId, { expires: new Date(Date.now() + 3600_000).toJSON(), description: 'x', scopes: [`queue:list-tasks:${F.tq}`] });
  const limited = ops({ clientId, accessToken });
  expect((await limited.listTaskQueueTasks(F.tq, { state: 'running' })).tasks).toHaveLength(1);
  await expectError(limited.listTaskQueueTasks(uniqueQueue()), 403, 'InsufficientScopes');
  await expectError(limited.listResolvedTasks(), 403, 'InsufficientScopes');
  await expectError(limited.listTasksByName({ name: 'x' }), 403, 'InsufficientScopes');
  await expectError(limited.listTaskGroupLatest(slugid()), 403, 'InsufficientScopes');
  const [p, wt] = F.tq.split('/');
  await expectError(limited.workerStateCounts(p, wt, 'wg', 'w1'), 403, 'InsufficientScopes');
});
