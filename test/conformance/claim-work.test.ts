/**
 * claimWork and claimTask: task-queue ids in URLs, scopes, priority order, duplicate hints, and
 * races between claimers.
 */
import { startTestService, TestService, taskDef, slugid, expectError } from '../helpers/service';
import { claim, claimOne, status, uniqueQueue, W1, W2 } from '../helpers/work';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' });
});
afterAll(async () => svc?.close());

describe('task queue id in the URL', () => {
  test('taskcluster-client v87 sends it as %2F', async () => {
    const tq = uniqueQueue();
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(tq));
    const c = await claimOne(svc, tq, taskId);
    expect(c.status.taskQueueId).toBe(tq);
  });

  test('the v10 client sends provisionerId/workerType with a literal slash', async () => {
    const tq = uniqueQueue();
    const [provisionerId, workerType] = tq.split('/');
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(tq));
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const tc10 = require('tc10');
    const q10 = new tc10.Queue({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
    const r = await q10.claimWork(provisionerId, workerType, { ...W1, tasks: 1 });
    expect(r.tasks).toHaveLength(1);
    expect(r.tasks[0].status).toMatchObject({ taskId, provisionerId, workerType, state: 'running' });
  });
});

describe('claimWork scopes', () => {
  const tq = 'prov/scoped';
  const body = { ...W1, tasks: 1 };
  const withScopes = (scopes: string[]) => svc.queue(svc.root, { authorizedScopes: scopes });

  test('needs queue:claim-work:<taskQueueId>', async () => {
    await expectError(withScopes([`queue:worker-id:${W1.workerGroup}/${W1.workerId}`]).claimWork(tq, body), 403, 'InsufficientScopes');
  });

  test('needs queue:worker-id:<workerGroup>/<workerId> for the ids in the body', async () => {
    await expectError(withScopes([`queue:claim-work:${tq}`]).claimWork(tq, body), 403, 'InsufficientScopes');
    await expectError(withScopes([`queue:claim-work:${tq}`, 'queue:worker-id:wg/other']).claimWork(tq, body), 403, 'InsufficientScopes');
  });

  test('both scopes are enough', async () => {
    const r = await withScopes([`queue:claim-work:${tq}`, `queue:worker-id:${W1.workerGroup}/${W1.workerId}`]).claimWork(tq, body);
    expect(r).toEqual({ tasks: [] });
  });

  test('no credentials at all: 403', async () => {
    await expectError(svc.queue(null).claimWork(tq, body), 403, 'InsufficientScopes');
  });
});

test('priority order: highest first, then by insertion', async () => {
  const tq = uniqueQueue();
  const ids: Record<string, string> = {};
  for (const p of ['lowest', 'high', 'very-high', 'low']) {
    ids[p] = slugid();
    await svc.queue().createTask(ids[p], taskDef(tq, { priority: p }));
  }
  const order: string[] = [];
  for (let i = 0; i < 4; i++) order.push((await claimOne(svc, tq)).status.taskId);
  expect(order).toEqual([ids['very-high'], ids.high, ids.low, ids.lowest]);
  expect(await claim(svc, tq)).toEqual([]);
});

describe('duplicate hints give one claim', () => {
  test('createTask repeated (a client retry) puts extra hints; only one claims', async () => {
    const tq = uniqueQueue();
    const taskId = slugid();
    const def = taskDef(tq);
    for (let i = 0; i < 3; i++) await svc.queue().createTask(taskId, def);
    const claims = await claim(svc, tq, W1, 8);
    expect(claims.map((c) => c.status.taskId)).toEqual([taskId]);
    expect(await claim(svc, tq, W1, 8)).toEqual([]);
    expect(await claim(svc, tq, W2, 8)).toEqual([]);
    expect((await status(svc, taskId)).runs).toHaveLength(1);
  });

  test('scheduleTask repeated concurrently on a self-dependent task', async () => {
    const tq = uniqueQueue();
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(tq, { dependencies: [taskId] }));
    expect((await status(svc, taskId)).state).toBe('unscheduled');
    const results = await Promise.all([1, 2, 3].map(() => svc.queue().scheduleTask(taskId)));
    for (const r of results) expect(r.status.runs).toHaveLength(1);
    const claims = await claim(svc, tq, W1, 8);
    expect(claims.map((c) => c.status.taskId)).toEqual([taskId]);
    expect(await claim(svc, tq, W2, 8)).toEqual([]);
  });

  test('rerunTask repeated concurrently', async () => {
    const tq = uniqueQueue();
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(tq));
    const c = await claimOne(svc, tq, taskId);
    await svc.queue(c.credentials).reportFailed(taskId, 0);
    await Promise.all([1, 2, 3].map(() => svc.queue().rerunTask(taskId)));
    expect((await status(svc, taskId)).runs.map((r: any) => r.state)).toEqual(['failed', 'pending']);
    const claims = await claim(svc, tq, W1, 8);
    expect(claims.map((x) => `${x.status.taskId}/${x.runId}`)).toEqual([`${taskId}/1`]);
    expect(await claim(svc, tq, W2, 8)).toEqual([]);
  });
});

describe('racing claimers', () => {
  test('claimTask from two workers in parallel: exactly one wins, the other gets 409', async () => {
    const tq = uniqueQueue();
    for (let i = 0; i < 4; i++) {
      const taskId = slugid();
      await svc.queue().createTask(taskId, taskDef(tq));
      const results = await Promise.allSettled([svc.queue().claimTask(taskId, 0, W1), svc.queue().claimTask(taskId, 0, W2)]);
      const won = results.filter((r) => r.status === 'fulfilled') as PromiseFulfilledResult<any>[];
      const lost = results.filter((r) => r.status === 'rejected') as PromiseRejectedResult[];
      expect(won).toHaveLength(1);
      expect(lost).toHaveLength(1);
      expect(lost[0].reason.statusCode).toBe(409);
      const s = await status(svc, taskId);
      expect(s.runs).toHaveLength(1);
      expect(s.runs[0]).toMatchObject({ state: 'running', workerId: won[0].value.workerId });
    }
  });

  test('claimWork from two workers waiting on one task: exactly one gets it', async () => {
    const tq = uniqueQueue();
    const taskId = slugid();
    // Both are already waiting when the task appears.
    const waiting = Promise.all([claim(svc, tq, W1, 4), claim(svc, tq, W2, 4)]);
    await new Promise((r) => setTimeout(r, 200));
    await svc.queue().createTask(taskId, taskDef(tq));
    const [a, b] = await waiting;
    const all = [...a, ...b];
    expect(all).toHaveLength(1);
    expect(all[0].status.taskId).toBe(taskId);
    expect((await status(svc, taskId)).runs).toEqual([expect.objectContaining({ state: 'running', workerId: all[0].workerId })]);
  });
});

describe('claimTask', () => {
  test('is idempotent for the same worker and 409 for another', async () => {
    const tq = uniqueQueue();
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(tq));
    const first = await svc.queue().claimTask(taskId, 0, W1);
    expect(first).toMatchObject({ runId: 0, ...W1, status: { state: 'running' } });
    const again = await svc.queue().claimTask(taskId, 0, W1);
    expect(again.takenUntil).toBe(first.takenUntil);
    expect(again.status).toEqual(first.status);
    await expectError(svc.queue().claimTask(taskId, 0, W2), 409, 'RequestConflict');
    // The claim's credentials work for the run.
    expect((await svc.queue(again.credentials).reportCompleted(taskId, 0)).status.state).toBe('completed');
    await expectError(svc.queue().claimTask(taskId, 0, W1), 409, 'RequestConflict');
  });

  test('404 for a missing task or run', async () => {
    await expectError(svc.queue().claimTask(slugid(), 0, W1), 404, 'ResourceNotFound');
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(uniqueQueue()));
    await expectError(svc.queue().claimTask(taskId, 1, W1), 404, 'ResourceNotFound');
  });

  test('needs queue:claim-task:<provisionerId>/<workerType> and the worker-id scope', async () => {
    const tq = uniqueQueue();
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(tq));
    const q = (scopes: string[]) => svc.queue(svc.root, { authorizedScopes: scopes });
    await expectError(q([`queue:claim-task:${tq}`]).claimTask(taskId, 0, W1), 403);
    await expectError(q([`queue:worker-id:${W1.workerGroup}/${W1.workerId}`]).claimTask(taskId, 0, W1), 403);
    const c = await q([`queue:claim-task:${tq}`, `queue:worker-id:${W1.workerGroup}/${W1.workerId}`]).claimTask(taskId, 0, W1);
    expect(c.status.state).toBe('running');
  });
});
