/**
 * The creator's actions on a task: cancelTask in every state, rerunTask, scheduleTask.
 */
import { startTestService, TestService, taskDef, slugid, expectError } from '../helpers/service';
import { claim, claimOne, runSummary, status, uniqueQueue, W2 } from '../helpers/work';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' });
});
afterAll(async () => svc?.close());

async function create(overrides: Record<string, unknown> = {}, taskId = slugid()) {
  const tq = uniqueQueue();
  await svc.queue().createTask(taskId, taskDef(tq, overrides));
  return { tq, taskId };
}

describe('cancelTask', () => {
  test('unscheduled: a single run created as exception/canceled', async () => {
    const taskId = slugid();
    await create({ dependencies: [taskId] }, taskId);
    const { status: s } = await svc.queue().cancelTask(taskId);
    expect(s.state).toBe('exception');
    expect(s.runs).toEqual([expect.objectContaining({ runId: 0, state: 'exception', reasonCreated: 'exception', reasonResolved: 'canceled' })]);
  });

  test('pending: exception/canceled, and its hint claims nothing', async () => {
    const { tq, taskId } = await create();
    const { status: s } = await svc.queue().cancelTask(taskId);
    expect(s.runs).toEqual([expect.objectContaining({ state: 'exception', reasonCreated: 'scheduled', reasonResolved: 'canceled' })]);
    expect(await claim(svc, tq, W2, 4)).toEqual([]);
  });

  test('running: exception/canceled; the worker learns it at its next reclaim (409)', async () => {
    const { tq, taskId } = await create();
    const c = await claimOne(svc, tq, taskId);
    const { status: s } = await svc.queue().cancelTask(taskId);
    expect(s.runs).toEqual([expect.objectContaining({ state: 'exception', reasonResolved: 'canceled', workerId: c.workerId })]);
    const wq = svc.queue(c.credentials);
    await expectError(wq.reclaimTask(taskId, 0), 409, 'RequestConflict');
    await expectError(wq.reportCompleted(taskId, 0), 409, 'RequestConflict');
  });

  test('resolved: returns the status unchanged', async () => {
    const { tq, taskId } = await create();
    const c = await claimOne(svc, tq, taskId);
    const done = await svc.queue(c.credentials).reportCompleted(taskId, 0);
    expect(await svc.queue().cancelTask(taskId)).toEqual(done);
  });

  test('repeated and concurrent cancels all return the same status', async () => {
    for (const setup of ['unscheduled', 'pending', 'running'] as const) {
      const taskId = slugid();
      const { tq } = await create(setup === 'unscheduled' ? { dependencies: [taskId] } : {}, taskId);
      if (setup === 'running') await claimOne(svc, tq, taskId);
      const results = await Promise.all([1, 2, 3, 4].map(() => svc.queue().cancelTask(taskId)));
      for (const r of results) expect(r).toEqual(results[0]);
      expect(results[0].status.runs).toHaveLength(1);
      expect(results[0].status.runs[0].reasonResolved).toBe('canceled');
      expect(await svc.queue().cancelTask(taskId)).toEqual(results[0]);
    }
  });

  test("missing task: 404; scopes: the task's project may cancel, another project may not", async () => {
    await expectError(svc.queue().cancelTask(slugid()), 404, 'ResourceNotFound');
    const { taskId } = await create({ projectId: 'proj-a' });
    const as = (scopes: string[]) => svc.queue(svc.root, { authorizedScopes: scopes });
    await expectError(as(['queue:cancel-task-in-project:proj-b']).cancelTask(taskId), 403, 'InsufficientScopes');
    const { status: s } = await as(['queue:cancel-task-in-project:proj-a']).cancelTask(taskId);
    expect(s.state).toBe('exception');
  });

  test('dependents of a canceled task: all-completed stays unscheduled, all-resolved is scheduled', async () => {
    const { taskId: a } = await create();
    const { taskId: completedDep } = await create({ dependencies: [a] });
    const { taskId: resolvedDep } = await create({ dependencies: [a], requires: 'all-resolved' });
    await svc.queue().cancelTask(a);
    expect((await status(svc, completedDep)).state).toBe('unscheduled');
    expect((await status(svc, resolvedDep)).state).toBe('pending');
  });
});

describe('rerunTask', () => {
  test('pending or running: nothing changes', async () => {
    const { tq, taskId } = await create();
    const before = await svc.queue().status(taskId);
    expect(await svc.queue().rerunTask(taskId)).toEqual(before);
    await claimOne(svc, tq, taskId);
    const running = await svc.queue().status(taskId);
    expect(await svc.queue().rerunTask(taskId)).toEqual(running);
  });

  test.each(['completed', 'failed', 'exception'])('after %s: adds a pending rerun run with retries reset; twice is idempotent', async (outcome) => {
    const { tq, taskId } = await create({ retries: 1 });
    const c = await claimOne(svc, tq, taskId);
    const wq = svc.queue(c.credentials);
    if (outcome === 'completed') await wq.reportCompleted(taskId, 0);
    if (outcome === 'failed') await wq.reportFailed(taskId, 0);
    if (outcome === 'exception') {
      // Use up the retry, so the reset is visible.
      await wq.reportException(taskId, 0, { reason: 'worker-shutdown' });
      const c1 = await claimOne(svc, tq, taskId);
      await svc.queue(c1.credentials).reportException(taskId, 1, { reason: 'worker-shutdown' });
      expect((await status(svc, taskId)).retriesLeft).toBe(0);
    }
    const first = await svc.queue().rerunTask(taskId);
    const last = first.status.runs[first.status.runs.length - 1];
    expect(last).toMatchObject({ state: 'pending', reasonCreated: 'rerun' });
    expect(first.status).toMatchObject({ state: 'pending', retriesLeft: 1 });
    expect(await svc.queue().rerunTask(taskId)).toEqual(first);
    const again = await claimOne(svc, tq, taskId);
    expect(again.runId).toBe(last.runId);
  });

  test('missing task: 404', async () => {
    await expectError(svc.queue().rerunTask(slugid()), 404, 'ResourceNotFound');
  });
});

describe('scheduleTask', () => {
  test('a self-dependent task waits until scheduleTask; repeats change nothing', async () => {
    const taskId = slugid();
    const { tq } = await create({ dependencies: [taskId] }, taskId);
    expect(await runSummary(svc, taskId)).toEqual([]);
    expect(await claim(svc, tq, W2, 4)).toEqual([]);
    const first = await svc.queue().scheduleTask(taskId);
    expect(first.status.runs).toEqual([expect.objectContaining({ runId: 0, state: 'pending', reasonCreated: 'scheduled' })]);
    expect(await svc.queue().scheduleTask(taskId)).toEqual(first);
    expect((await claimOne(svc, tq, taskId)).runId).toBe(0);
    // A scheduled or resolved task is returned unchanged.
    const now = await svc.queue().status(taskId);
    expect(await svc.queue().scheduleTask(taskId)).toEqual(now);
  });

  test('schedules a task even while its dependencies are unresolved', async () => {
    const { taskId: a } = await create();
    const { taskId: b } = await create({ dependencies: [a] });
    expect((await status(svc, b)).state).toBe('unscheduled');
    expect((await svc.queue().scheduleTask(b)).status.state).toBe('pending');
  });

  test('missing task: 404', async () => {
    await expectError(svc.queue().scheduleTask(slugid()), 404, 'ResourceNotFound');
  });
});
