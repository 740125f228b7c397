/**
 * Task queues as operators and autoscalers see them (acceptance case 20 and the task-queue,
 * provisioner and worker-type calls), driven by taskcluster-client v87 over HTTP against Azurite.
 */
import { startTestService, TestService, taskDef, slugid, expectError } from '../helpers/service';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' });
});
afterAll(async () => svc?.close());

const worker = { workerGroup: 'wg', workerId: 'w1' };
const uniqueQueue = (p = 'prov') => `${p}/q-${Math.random().toString(36).slice(2, 10)}`;

async function counts(taskQueueId: string) {
  const c = await svc.queue().taskQueueCounts(taskQueueId);
  return [c.pendingTasks, c.claimedTasks];
}

async function clientWith(scopes: string[]) {
  const clientId = `test/${slugid()}`;
  const c = await svc.auth().createClient(clientId, { expires: new Date(Date.now() + 3600_000).toJSON(), description: 'test', scopes });
  return svc.queue({ clientId, accessToken: c.accessToken });
}

test('taskQueueCounts: pending and claimed stay exact through claim, reclaim, duplicate creates and hints, completion and cancel', async () => {
  const tq = uniqueQueue();
  const q = svc.queue();
  expect(await q.taskQueueCounts(tq)).toEqual({ provisionerId: 'prov', workerType: tq.split('/')[1], taskQueueId: tq, pendingTasks: 0, claimedTasks: 0 });
  const [a, b] = [slugid(), slugid()];
  const defA = taskDef(tq);
  await q.createTask(a, defA);
  await q.createTask(b, taskDef(tq));
  expect(await counts(tq)).toEqual([2, 0]);
  // An idempotent re-create puts a second (stale) hint for the same run: no double count.
  await q.createTask(a, defA);
  expect(await counts(tq)).toEqual([2, 0]);
  expect((await q.pendingTasks(tq)).pendingTasks).toBe(2);

  const first = (await q.claimWork(tq, { ...worker, tasks: 1 })).tasks;
  expect(first).toHaveLength(1);
  expect(await counts(tq)).toEqual([1, 1]);
  await svc.queue(first[0].credentials).reclaimTask(first[0].status.taskId, 0);
  expect(await counts(tq)).toEqual([1, 1]);

  // Asking for more than there is: the stale duplicate hint claims nothing.
  const second = (await q.claimWork(tq, { ...worker, tasks: 4 })).tasks;
  expect(second).toHaveLength(1);
  expect(await counts(tq)).toEqual([0, 2]);
  expect((await q.claimWork(tq, { ...worker, tasks: 4 })).tasks).toEqual([]);
  expect(await counts(tq)).toEqual([0, 2]);

  await svc.queue(first[0].credentials).reportCompleted(first[0].status.taskId, 0);
  expect(await counts(tq)).toEqual([0, 1]);
  await q.cancelTask(second[0].status.taskId);
  expect(await counts(tq)).toEqual([0, 0]);

  // A rerun is pending again; cancelling a pending run takes it out.
  await q.rerunTask(a);
  expect(await counts(tq)).toEqual([1, 0]);
  await q.cancelTask(a);
  expect(await counts(tq)).toEqual([0, 0]);
});

test('retries keep the counts exact: worker-shutdown goes back to pending', async () => {
  const tq = uniqueQueue();
  const q = svc.queue();
  const taskId = slugid();
  await q.createTask(taskId, taskDef(tq));
  const [claim] = (await q.claimWork(tq, { ...worker, tasks: 1 })).tasks;
  await svc.queue(claim.credentials).reportException(taskId, 0, { reason: 'worker-shutdown' });
  expect(await counts(tq)).toEqual([1, 0]);
  const [again] = (await q.claimWork(tq, { ...worker, tasks: 1 })).tasks;
  expect(again.runId).toBe(1);
  expect(await counts(tq)).toEqual([0, 1]);
  await svc.queue(again.credentials).reportFailed(taskId, 1);
  expect(await counts(tq)).toEqual([0, 0]);
});

test('pendingTasks and taskQueueCounts validate the task queue id and need their scopes', async () => {
  await expectError(svc.queue().pendingTasks('1/1'), 400, 'InvalidRequestArguments');
  const none = await clientWith([]);
  await expectError(none.pendingTasks('prov/x'), 403, 'InsufficientScopes');
  await expectError(none.taskQueueCounts('prov/x'), 403, 'InsufficientScopes');
  const onlyPending = await clientWith(['queue:pending-count:prov/x']);
  expect((await onlyPending.pendingTasks('prov/x')).pendingTasks).toBe(0);
  await expectError(onlyPending.taskQueueCounts('prov/x'), 403, 'InsufficientScopes');
  const both = await clientWith(['queue:pending-count:prov/x', 'queue:claimed-count:prov/x']);
  expect(await both.taskQueueCounts('prov/x')).toMatchObject({ pendingTasks: 0, claimedTasks: 0 });
});

test('listPendingTasks and listClaimedTasks return definitions and worker identity, and paginate', async () => {
  const tq = uniqueQueue();
  const q = svc.queue();
  const ids = [slugid(), slugid(), slugid(), slugid(), slugid()];
  for (const id of ids)
    await q.createTask(id, taskDef(tq, { metadata: { name: `p-${id}`, description: 'd', owner: 'o@example.com', source: 'https://example.com' } }));

  const seen: any[] = [];
  let token: string | undefined;
  let pages = 0;
  do {
    const r: any = await q.listPendingTasks(tq, { limit: 2, ...(token ? { continuationToken: token } : {}) });
    expect(r.tasks.length).toBeLessThanOrEqual(2);
    seen.push(...r.tasks);
    token = r.continuationToken;
    pages++;
  } while (token);
  expect(pages).toBeGreaterThanOrEqual(3);
  expect(seen.map((t) => t.taskId).sort()).toEqual([...ids].sort());
  for (const t of seen) {
    expect(t).toEqual({ taskId: t.taskId, runId: 0, inserted: expect.any(String), task: await q.task(t.taskId) });
  }
  // Oldest first.
  expect(seen.map((t) => t.inserted)).toEqual([...seen.map((t) => t.inserted)].sort());

  // claimWork may answer fewer tasks than asked (on Azure a throttled or duplicated hint costs a
  // slot), so a worker asks again, as workers do.
  const claims: any[] = [];
  for (let i = 0; i < 5 && claims.length < 3; i++)
    claims.push(...(await q.claimWork(tq, { workerGroup: 'grp', workerId: 'claimer', tasks: 3 - claims.length })).tasks);
  expect(claims).toHaveLength(3);
  const claimed: any[] = [];
  token = undefined;
  do {
    const r: any = await q.listClaimedTasks(tq, { limit: 2, ...(token ? { continuationToken: token } : {}) });
    claimed.push(...r.tasks);
    token = r.continuationToken;
  } while (token);
  expect(claimed.map((t) => t.taskId).sort()).toEqual(claims.map((c: any) => c.status.taskId).sort());
  for (const t of claimed) {
    expect(t).toEqual({ taskId: t.taskId, runId: 0, workerGroup: 'grp', workerId: 'claimer', claimed: expect.any(String), task: await q.task(t.taskId) });
  }
  expect((await q.listPendingTasks(tq)).tasks).toHaveLength(2);
  expect(await q.listPendingTasks(uniqueQueue())).toEqual({ tasks: [] });
  await expectError((await clientWith([])).listClaimedTasks(tq), 403, 'InsufficientScopes');
});

test('listTaskQueues / getTaskQueue list queues with tasks or workers; provisioners and worker types derive from them', async () => {
  const p = `pv${Math.random().toString(36).slice(2, 8)}`;
  const withTasks = `${p}/alpha`;
  const withWorkers = `${p}/beta`;
  const q = svc.queue();
  await q.createTask(slugid(), taskDef(withTasks));
  expect((await q.claimWork(withWorkers, { ...worker, tasks: 1 })).tasks).toEqual([]);

  const all: any[] = [];
  let token: string | undefined;
  do {
    const r: any = await q.listTaskQueues({ limit: 1, ...(token ? { continuationToken: token } : {}) });
    expect(r.taskQueues.length).toBeLessThanOrEqual(1);
    all.push(...r.taskQueues);
    token = r.continuationToken;
  } while (token);
  const mine = all.filter((x) => x.taskQueueId.startsWith(`${p}/`));
  expect(mine.map((x) => x.taskQueueId)).toEqual([withTasks, withWorkers]);
  for (const x of mine) {
    expect(x).toEqual({
      taskQueueId: x.taskQueueId,
      description: '',
      stability: 'experimental',
      expires: expect.any(String),
      lastDateActive: expect.any(String),
    });
    expect(Date.parse(x.expires)).toBeGreaterThan(Date.now() + 4 * 24 * 3600_000);
    expect(await q.getTaskQueue(x.taskQueueId)).toEqual(x);
  }
  await expectError(q.getTaskQueue(`${p}/nothing`), 404, 'ResourceNotFound');

  const provs = (await q.listProvisioners()).provisioners.filter((x: any) => x.provisionerId === p);
  expect(provs).toEqual([
    { provisionerId: p, stability: 'experimental', description: '', expires: expect.any(String), lastDateActive: expect.any(String), actions: [] },
  ]);
  expect(await q.getProvisioner(p)).toEqual(provs[0]);
  await expectError(q.getProvisioner(`${p}x`), 404, 'ResourceNotFound');

  const page1 = await q.listWorkerTypes(p, { limit: 1 });
  const page2 = await q.listWorkerTypes(p, { limit: 1, continuationToken: page1.continuationToken });
  expect([...page1.workerTypes, ...page2.workerTypes].map((w: any) => w.workerType)).toEqual(['alpha', 'beta']);
  expect(page2.continuationToken).toBeUndefined();
  expect(await q.getWorkerType(p, 'beta')).toMatchObject({ provisionerId: p, workerType: 'beta', taskQueueId: withWorkers, actions: [] });
  await expectError(q.getWorkerType(p, 'gamma'), 404, 'ResourceNotFound');
  await expectError((await clientWith([])).listTaskQueues(), 403, 'InsufficientScopes');
});
