/**
 * reportCompleted / reportFailed / reportException: every outcome, idempotent repeats, 409
 * conflicts, automatic retries and their exhaustion, all with the claim's own credentials.
 */
import { startTestService, TestService, taskDef, slugid, expectError } from '../helpers/service';
import { claimOne, runSummary, status, uniqueQueue, W1, runningTask } from '../helpers/work';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' });
});
afterAll(async () => svc?.close());

const running = (overrides: Record<string, unknown> = {}) => runningTask(svc, overrides);

describe('completed and failed', () => {
  test('reportCompleted resolves the task; repeats are 200; other outcomes are 409', async () => {
    const { taskId, wq } = await running();
    const first = await wq.reportCompleted(taskId, 0);
    expect(first.status).toMatchObject({ state: 'completed', runs: [{ runId: 0, state: 'completed', reasonResolved: 'completed', ...W1 }] });
    expect(await wq.reportCompleted(taskId, 0)).toEqual(first);
    await expectError(wq.reportFailed(taskId, 0), 409, 'RequestConflict');
    await expectError(wq.reportException(taskId, 0, { reason: 'internal-error' }), 409, 'RequestConflict');
    expect(await status(svc, taskId)).toEqual(first.status);
  });

  test('reportFailed resolves the task failed; repeats are 200; completing it is 409', async () => {
    const { taskId, wq } = await running();
    const first = await wq.reportFailed(taskId, 0);
    expect(first.status).toMatchObject({ state: 'failed', runs: [{ state: 'failed', reasonResolved: 'failed' }] });
    expect(await wq.reportFailed(taskId, 0)).toEqual(first);
    await expectError(wq.reportCompleted(taskId, 0), 409, 'RequestConflict');
  });

  test('a pending (never claimed) run cannot be resolved', async () => {
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(uniqueQueue()));
    await expectError(svc.queue().reportCompleted(taskId, 0), 409, 'RequestConflict');
    await expectError(svc.queue().reportFailed(taskId, 0), 409, 'RequestConflict');
    await expectError(svc.queue().reportException(taskId, 0, { reason: 'worker-shutdown' }), 409, 'RequestConflict');
    expect(await runSummary(svc, taskId)).toEqual(['pending']);
  });

  test('missing task or run: 404', async () => {
    await expectError(svc.queue().reportCompleted(slugid(), 0), 404, 'ResourceNotFound');
    const { taskId, wq } = await running();
    await expectError(svc.queue().reportCompleted(taskId, 1), 404, 'ResourceNotFound');
    await wq.reportCompleted(taskId, 0);
  });

  test('a run overtaken by a rerun can no longer be reported', async () => {
    const { taskId, wq } = await running();
    await wq.reportFailed(taskId, 0);
    await svc.queue().rerunTask(taskId);
    await expectError(wq.reportFailed(taskId, 0), 409, 'RequestConflict');
    expect(await runSummary(svc, taskId)).toEqual(['failed/failed', 'pending']);
  });

  test('a client holding only assume:worker-id cannot resolve; queue:resolve-task:<taskId>/<runId> can', async () => {
    const { taskId } = await running();
    const only = (scopes: string[]) => svc.queue(svc.root, { authorizedScopes: scopes });
    await expectError(only([`assume:worker-id:${W1.workerGroup}/${W1.workerId}`]).reportCompleted(taskId, 0), 403, 'InsufficientScopes');
    await expectError(only([`queue:resolve-task:${taskId}/1`]).reportCompleted(taskId, 0), 403, 'InsufficientScopes');
    expect((await only([`queue:resolve-task:${taskId}/0`]).reportCompleted(taskId, 0)).status.state).toBe('completed');
  });
});

describe('exception without retry', () => {
  test.each(['malformed-payload', 'resource-unavailable', 'internal-error'])(
    '%s resolves the task; same reason again is 200; another reason is 409',
    async (reason) => {
      const { taskId, wq } = await running();
      const first = await wq.reportException(taskId, 0, { reason });
      expect(first.status.state).toBe('exception');
      expect(first.status.runs).toEqual([expect.objectContaining({ state: 'exception', reasonResolved: reason })]);
      expect(first.status.retriesLeft).toBe(5);
      expect(await wq.reportException(taskId, 0, { reason })).toEqual(first);
      const other = reason === 'internal-error' ? 'malformed-payload' : 'internal-error';
      await expectError(wq.reportException(taskId, 0, { reason: other }), 409, 'RequestConflict');
      await expectError(wq.reportException(taskId, 0, { reason: 'worker-shutdown' }), 409, 'RequestConflict');
      await expectError(wq.reportCompleted(taskId, 0), 409, 'RequestConflict');
      expect(await status(svc, taskId)).toEqual(first.status);
    },
  );

  test("superseded is no longer accepted as a reason (today's queue): 400, run untouched", async () => {
    const { taskId, wq } = await running();
    await expectError(wq.reportException(taskId, 0, { reason: 'superseded' }), 400, 'InputValidationError');
    await expectError(wq.reportException(taskId, 0, { reason: 'no-such-reason' }), 400, 'InputValidationError');
    expect(await runSummary(svc, taskId)).toEqual(['running']);
    await wq.reportCompleted(taskId, 0);
  });
});

describe('exception with retry', () => {
  test.each([
    ['worker-shutdown', 'retry'],
    ['intermittent-task', 'task-retry'],
  ])('%s adds a pending %s run and uses one retry; repeats are 200', async (reason, reasonCreated) => {
    const { tq, taskId, wq } = await running({ retries: 2 });
    const first = await wq.reportException(taskId, 0, { reason });
    expect(first.status).toMatchObject({ state: 'pending', retriesLeft: 1 });
    expect(first.status.runs).toEqual([
      expect.objectContaining({ runId: 0, state: 'exception', reasonResolved: reason }),
      expect.objectContaining({ runId: 1, state: 'pending', reasonCreated }),
    ]);
    expect(await wq.reportException(taskId, 0, { reason })).toEqual(first);
    await expectError(wq.reportException(taskId, 0, { reason: 'internal-error' }), 409, 'RequestConflict');
    // The retry is claimable as run 1, and only once.
    const c1 = await claimOne(svc, tq, taskId);
    expect(c1.runId).toBe(1);
    await svc.queue(c1.credentials).reportCompleted(taskId, 1);
    expect(await runSummary(svc, taskId)).toEqual([`exception/${reason}`, 'completed/completed']);
  });

  test('retries run out: the last report resolves the task exception', async () => {
    const { tq, taskId, wq } = await running({ retries: 1 });
    await wq.reportException(taskId, 0, { reason: 'worker-shutdown' });
    const c1 = await claimOne(svc, tq, taskId);
    const last = await svc.queue(c1.credentials).reportException(taskId, 1, { reason: 'intermittent-task' });
    expect(last.status).toMatchObject({ state: 'exception', retriesLeft: 0 });
    expect(await runSummary(svc, taskId)).toEqual(['exception/worker-shutdown', 'exception/intermittent-task']);
  });

  test('retries: 0 never retries', async () => {
    const { taskId, wq } = await running({ retries: 0 });
    const r = await wq.reportException(taskId, 0, { reason: 'worker-shutdown' });
    expect(r.status).toMatchObject({ state: 'exception', retriesLeft: 0 });
    expect(r.status.runs).toHaveLength(1);
  });

  test('2019 bug: repeating a retrying report after the retry was claimed does not resolve the task', async () => {
    const { tq, taskId, wq } = await running({ retries: 3 });
    // A dependent that any resolution of the task (even exception) would schedule.
    const dependent = slugid();
    const depQueue = uniqueQueue();
    await svc.queue().createTask(dependent, taskDef(depQueue, { dependencies: [taskId], requires: 'all-resolved' }));
    await wq.reportException(taskId, 0, { reason: 'worker-shutdown' });
    const c1 = await claimOne(svc, tq, taskId);
    expect(c1.runId).toBe(1);
    const again = await wq.reportException(taskId, 0, { reason: 'worker-shutdown' });
    expect(again.status.state).toBe('running');
    expect(await runSummary(svc, taskId)).toEqual(['exception/worker-shutdown', 'running']);
    expect((await status(svc, dependent)).state).toBe('unscheduled');
    // Once run 1 resolves for real, the dependent is scheduled.
    await svc.queue(c1.credentials).reportFailed(taskId, 1);
    expect((await status(svc, dependent)).state).toBe('pending');
  });
});
