/**
 * Claim expiry at the production claim timeout (the test clock passes it): retries, exhaustion,
 * and reclaimTask racing the reaper at the expiry boundary.
 */
import { startTestService, TestService, expectError } from '../helpers/service';
import { claimOne, runSummary, status, waitUntil, runningTask } from '../helpers/work';

/** Trigger visibility is whole seconds; give the queue a moment past takenUntil. */
const SLACK_MS = 600;

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' });
});
afterAll(async () => svc?.close());

const running = (overrides: Record<string, unknown> = {}) => runningTask(svc, overrides);

test('an expired claim becomes exception/claim-expired with a retry run that can be claimed', async () => {
  const { tq, taskId, c, wq } = await running({ retries: 2 });
  await waitUntil(c.takenUntil, SLACK_MS);
  await svc.runReaper();
  const s = await status(svc, taskId);
  expect(s).toMatchObject({ state: 'pending', retriesLeft: 1 });
  expect(s.runs).toEqual([
    expect.objectContaining({ runId: 0, state: 'exception', reasonResolved: 'claim-expired' }),
    expect.objectContaining({ runId: 1, state: 'pending', reasonCreated: 'retry' }),
  ]);
  // The old worker is told to stop.
  await expectError(wq.reclaimTask(taskId, 0), 409, 'RequestConflict');
  await expectError(wq.reportCompleted(taskId, 0), 409, 'RequestConflict');
  const c1 = await claimOne(svc, tq, taskId);
  expect(c1.runId).toBe(1);
  await svc.queue(c1.credentials).reportCompleted(taskId, 1);
  // A second reaper pass changes nothing.
  await svc.runReaper();
  expect(await runSummary(svc, taskId)).toEqual(['exception/claim-expired', 'completed/completed']);
});

test('when retries are exhausted the task ends exception', async () => {
  const { tq, taskId, c } = await running({ retries: 1 });
  await waitUntil(c.takenUntil, SLACK_MS);
  await svc.runReaper();
  const c1 = await claimOne(svc, tq, taskId);
  await waitUntil(c1.takenUntil, SLACK_MS);
  await svc.runReaper();
  const s = await status(svc, taskId);
  expect(s).toMatchObject({ state: 'exception', retriesLeft: 0 });
  expect(await runSummary(svc, taskId)).toEqual(['exception/claim-expired', 'exception/claim-expired']);
});

test('retries: 0 ends exception at the first expiry', async () => {
  const { taskId, c } = await running({ retries: 0 });
  await waitUntil(c.takenUntil, SLACK_MS);
  await svc.runReaper();
  expect(await runSummary(svc, taskId)).toEqual(['exception/claim-expired']);
});

test('a reclaim before expiry wins: the old trigger finds a newer takenUntil and does nothing', async () => {
  const { taskId, c, wq } = await running({ retries: 1 });
  await waitUntil(new Date(c.takenUntil).getTime() - 1000, 0);
  const re = await wq.reclaimTask(taskId, 0);
  expect(new Date(re.takenUntil).getTime()).toBeGreaterThan(new Date(c.takenUntil).getTime());
  // The first claim's trigger fires now, but the claim was extended.
  await waitUntil(c.takenUntil, SLACK_MS);
  await svc.runReaper();
  expect(await runSummary(svc, taskId)).toEqual(['running']);
  // Both the old and the new credentials still work for the run.
  expect((await svc.queue(re.credentials).reclaimTask(taskId, 0)).status.state).toBe('running');
  const done = await wq.reportCompleted(taskId, 0);
  expect(done.status.state).toBe('completed');
});

test('without further reclaims the extended claim expires too', async () => {
  const { taskId, wq } = await running({ retries: 0 });
  const re = await wq.reclaimTask(taskId, 0);
  await waitUntil(re.takenUntil, SLACK_MS);
  await svc.runReaper();
  expect(await runSummary(svc, taskId)).toEqual(['exception/claim-expired']);
});

test('reclaim racing the reaper at the expiry boundary: exactly one of them wins, consistently', async () => {
  const outcomes: string[] = [];
  for (let i = 0; i < 3; i++) {
    const { taskId, c, wq } = await running({ retries: 1 });
    // Fire both right at the boundary (the trigger is visible from takenUntil on).
    await waitUntil(c.takenUntil, SLACK_MS + i * 100);
    const [reclaim] = await Promise.allSettled([wq.reclaimTask(taskId, 0), svc.runReaper()]);
    const s = await status(svc, taskId);
    if (reclaim.status === 'fulfilled') {
      outcomes.push('reclaim');
      expect(s.runs).toEqual([expect.objectContaining({ state: 'running', takenUntil: reclaim.value.takenUntil })]);
      expect(new Date(reclaim.value.takenUntil).getTime()).toBeGreaterThan(new Date(c.takenUntil).getTime());
      // The reclaimed run still has a live expiry trigger.
      await waitUntil(reclaim.value.takenUntil, SLACK_MS);
      await svc.runReaper();
      expect((await runSummary(svc, taskId))[0]).toBe('exception/claim-expired');
    } else {
      outcomes.push('reaper');
      expect((reclaim as PromiseRejectedResult).reason.statusCode).toBe(409);
      expect(await runSummary(svc, taskId)).toEqual(['exception/claim-expired', 'pending']);
    }
  }
  // Either outcome is legal; the point is that state and answers agree every time.
  expect(outcomes).toHaveLength(3);
});
