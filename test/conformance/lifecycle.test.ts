/**
 * The worker path end to end with the claim's own credentials.
 */
import { startTestService, TestService, taskDef, slugid, expectError } from '../helpers/service';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' });
});
afterAll(async () => svc?.close());

const worker = { workerGroup: 'wg', workerId: 'w1' };

test('create → claimWork → reclaim → reportCompleted using only the claim credentials', async () => {
  const taskQueueId = `prov/life-${Math.random().toString(36).slice(2, 8)}`;
  const taskId = slugid();
  await svc.queue().createTask(taskId, taskDef(taskQueueId, { scopes: ['extra:scope'] }));
  const { tasks } = await svc.queue().claimWork(taskQueueId, { ...worker, tasks: 1 });
  expect(tasks).toHaveLength(1);
  const claim = tasks[0];
  expect(claim).toMatchObject({ runId: 0, ...worker, task: await svc.queue().task(taskId) });
  expect(claim.status.state).toBe('running');
  expect(typeof claim.credentials.certificate).toBe('string');
  const cert = JSON.parse(claim.credentials.certificate);
  expect(cert.scopes).toEqual([`queue:reclaim-task:${taskId}/0`, `queue:resolve-task:${taskId}/0`, `queue:create-artifact:${taskId}/0`, 'extra:scope']);
  expect(cert.expiry).toBe(new Date(claim.takenUntil).getTime());

  const wq = svc.queue(claim.credentials);
  const re = await wq.reclaimTask(taskId, 0);
  expect(new Date(re.takenUntil).getTime()).toBeGreaterThanOrEqual(new Date(claim.takenUntil).getTime());
  const { status } = await svc.queue(re.credentials).reportCompleted(taskId, 0);
  expect(status.state).toBe('completed');
  expect(status.runs[0]).toMatchObject({ state: 'completed', reasonResolved: 'completed', ...worker });
  // Idempotent repeat; a different outcome is a conflict.
  expect((await wq.reportCompleted(taskId, 0)).status.state).toBe('completed');
  await expectError(wq.reportFailed(taskId, 0), 409, 'RequestConflict');
  await expectError(wq.reclaimTask(taskId, 0), 409, 'RequestConflict');
  // The claim's credentials cover only this run.
  await expectError(wq.reportCompleted(slugid(), 0), 403);
});

test('claimWork on an empty queue returns [] after the configured poll window (QUEUE_CLAIM_WORK_POLL_S=1, not 20 s)', async () => {
  const started = Date.now();
  const { tasks } = await svc.queue().claimWork('prov/empty', { ...worker, tasks: 4 });
  expect(tasks).toEqual([]);
  const waited = Date.now() - started;
  expect(waited).toBeGreaterThanOrEqual(900);
  expect(waited).toBeLessThan(10_000);
});
