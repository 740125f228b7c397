/**
 * Deadlines: tasks whose deadline is ten minutes away, in every state, then the clock passes it and a
 * reaper pass (QUEUE_DEADLINE_DELAY_S=0).
 */
import { startTestService, TestService, taskDef, slugid, expectError } from '../helpers/service';
import { claim, claimOne, passTime, reapUntil, runSummary, status, uniqueQueue, waitUntil, W2 } from '../helpers/work';

/** Inside the claim timeout (20 minutes), so the running task meets its deadline before its claim expires. */
const DEADLINE_MS = 10 * 60_000;

let svc: TestService;
const ids: Record<string, string> = {};
const queues: Record<string, string> = {};
let worker: any;
let deadline: string;

beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1', QUEUE_DEADLINE_DELAY_S: '0' });
  deadline = new Date(svc.clock.ms() + DEADLINE_MS).toJSON();
  const make = async (name: string, overrides: Record<string, unknown> = {}) => {
    ids[name] = slugid();
    queues[name] = uniqueQueue();
    await svc.queue().createTask(ids[name], taskDef(queues[name], { deadline, ...overrides }));
  };
  await make('pending');
  await make('running');
  await make('completed');
  await make('failed');
  // Dependents of the running task, which will end exception/deadline-exceeded.
  await make('afterAllResolved', { dependencies: [ids.running], requires: 'all-resolved', deadline: new Date(svc.clock.ms() + 2 * DEADLINE_MS).toJSON() });
  await make('afterAllCompleted', { dependencies: [ids.running], requires: 'all-completed', deadline: new Date(svc.clock.ms() + 2 * DEADLINE_MS).toJSON() });
  const selfDep = slugid();
  ids.selfDependent = selfDep;
  queues.selfDependent = uniqueQueue();
  await svc.queue().createTask(selfDep, taskDef(queues.selfDependent, { deadline, dependencies: [selfDep] }));

  worker = await claimOne(svc, queues.running, ids.running);
  const done = await claimOne(svc, queues.completed, ids.completed);
  await svc.queue(done.credentials).reportCompleted(ids.completed, 0);
  const failed = await claimOne(svc, queues.failed, ids.failed);
  await svc.queue(failed.credentials).reportFailed(ids.failed, 0);

  await waitUntil(deadline, 300);
  const unresolved = [ids.pending, ids.running, ids.selfDependent];
  await reapUntil(svc, async () => (await Promise.all(unresolved.map((id) => status(svc, id)))).every((s) => s.state === 'exception'));
  // Every other deadline trigger (completed, failed) is visible by now too.
  await passTime(1200);
  await svc.runReaper();
}, 30_000);
afterAll(async () => svc?.close());

test('a pending task ends exception/deadline-exceeded and its hint claims nothing', async () => {
  expect(await runSummary(svc, ids.pending)).toEqual(['exception/deadline-exceeded']);
  expect(await claim(svc, queues.pending, W2, 4)).toEqual([]);
});

test('a running task ends exception/deadline-exceeded; the worker gets 409', async () => {
  expect(await runSummary(svc, ids.running)).toEqual(['exception/deadline-exceeded']);
  const wq = svc.queue(worker.credentials);
  await expectError(wq.reclaimTask(ids.running, 0), 409, 'RequestConflict');
  await expectError(wq.reportCompleted(ids.running, 0), 409, 'RequestConflict');
});

test('an unscheduled task gets a run created as exception with deadline-exceeded', async () => {
  const s = await status(svc, ids.selfDependent);
  expect(s.state).toBe('exception');
  expect(s.runs).toEqual([expect.objectContaining({ runId: 0, state: 'exception', reasonCreated: 'exception', reasonResolved: 'deadline-exceeded' })]);
});

test('completed and failed tasks are untouched', async () => {
  expect(await runSummary(svc, ids.completed)).toEqual(['completed/completed']);
  expect(await runSummary(svc, ids.failed)).toEqual(['failed/failed']);
});

test('dependents: all-resolved is scheduled by the deadline resolution, all-completed stays unscheduled', async () => {
  expect((await status(svc, ids.afterAllResolved)).state).toBe('pending');
  expect((await status(svc, ids.afterAllCompleted)).state).toBe('unscheduled');
});

test('after the deadline, claimTask, reclaim, cancel, rerun and schedule are 409', async () => {
  const q = svc.queue();
  await expectError(q.claimTask(ids.pending, 0, W2), 409, 'RequestConflict');
  await expectError(q.cancelTask(ids.completed), 409, 'RequestConflict');
  await expectError(q.rerunTask(ids.failed), 409, 'RequestConflict');
  await expectError(q.scheduleTask(ids.selfDependent), 409, 'RequestConflict');
  await expectError(q.reclaimTask(ids.running, 0), 409, 'RequestConflict');
});

test('another reaper pass changes nothing', async () => {
  const before = await Promise.all(Object.values(ids).map((id) => status(svc, id)));
  await svc.runReaper();
  const after = await Promise.all(Object.values(ids).map((id) => status(svc, id)));
  expect(after).toEqual(before);
});
