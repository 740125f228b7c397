/**
 * Task groups: getTaskGroup, listTaskGroup paging, sealTaskGroup, cancelTaskGroup.
 */
import { startTestService, TestService, taskDef, slugid, expectError } from '../helpers/service';
import { claimOne, runSummary, uniqueQueue } from '../helpers/work';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' });
});
afterAll(async () => svc?.close());

/** A group of `n` tasks (each in its own task queue), all with schedulerId `sched`. */
async function group(n: number, schedulerId = 'sched') {
  const taskGroupId = slugid();
  const tasks: { taskId: string; tq: string }[] = [];
  for (let i = 0; i < n; i++) {
    const t = { taskId: slugid(), tq: uniqueQueue() };
    await svc.queue().createTask(t.taskId, taskDef(t.tq, { taskGroupId, schedulerId }));
    tasks.push(t);
  }
  return { taskGroupId, tasks };
}

test("getTaskGroup returns the group's schedulerId and expiry; 404 for an unknown group", async () => {
  const { taskGroupId, tasks } = await group(2);
  const def = await svc.queue().task(tasks[1].taskId);
  const g = await svc.queue().getTaskGroup(taskGroupId);
  expect(g).toEqual({ taskGroupId, schedulerId: 'sched', expires: def.expires });
  await expectError(svc.queue().getTaskGroup(slugid()), 404, 'ResourceNotFound');
  await expectError(svc.queue().listTaskGroup(slugid()), 404, 'ResourceNotFound');
});

test('listTaskGroup pages through every member with limit and continuationToken', async () => {
  const { taskGroupId, tasks } = await group(5);
  const seen: string[] = [];
  let continuationToken: string | undefined;
  let pages = 0;
  do {
    const r = await svc.queue().listTaskGroup(taskGroupId, { limit: 2, ...(continuationToken ? { continuationToken } : {}) });
    expect(r).toMatchObject({ taskGroupId, schedulerId: 'sched' });
    expect(r.tasks.length).toBeLessThanOrEqual(2);
    for (const t of r.tasks) {
      expect(t.task.taskGroupId).toBe(taskGroupId);
      expect(t.status).toMatchObject({ taskGroupId, state: 'pending' });
      expect(t.task).toEqual(await svc.queue().task(t.status.taskId));
      seen.push(t.status.taskId);
    }
    continuationToken = r.continuationToken;
    pages++;
  } while (continuationToken);
  expect(pages).toBeGreaterThanOrEqual(3);
  expect(seen.sort()).toEqual(tasks.map((t) => t.taskId).sort());
  const all = await svc.queue().listTaskGroup(taskGroupId);
  expect(all.tasks).toHaveLength(5);
  expect(all.continuationToken).toBeUndefined();
});

test('all tasks of a group share one schedulerId', async () => {
  const { taskGroupId } = await group(1, 'sched-a');
  await expectError(svc.queue().createTask(slugid(), taskDef(uniqueQueue(), { taskGroupId, schedulerId: 'sched-b' })), 409, 'RequestConflict');
  expect((await svc.queue().listTaskGroup(taskGroupId)).tasks).toHaveLength(1);
});

test('sealTaskGroup is idempotent and refuses further createTask', async () => {
  const { taskGroupId } = await group(1);
  const sealed = await svc.queue().sealTaskGroup(taskGroupId);
  expect(sealed).toMatchObject({ taskGroupId, schedulerId: 'sched', sealed: expect.stringMatching(/^\d{4}-/) });
  expect(await svc.queue().sealTaskGroup(taskGroupId)).toEqual(sealed);
  expect(await svc.queue().getTaskGroup(taskGroupId)).toEqual(sealed);
  expect((await svc.queue().listTaskGroup(taskGroupId)).sealed).toBe(sealed.sealed);
  const late = slugid();
  await expectError(svc.queue().createTask(late, taskDef(uniqueQueue(), { taskGroupId, schedulerId: 'sched' })), 409, 'RequestConflict');
  await expectError(svc.queue().task(late), 404, 'ResourceNotFound');
  await expectError(svc.queue().sealTaskGroup(slugid()), 404, 'ResourceNotFound');
});

test("sealTaskGroup and cancelTaskGroup need scopes naming the group's schedulerId", async () => {
  const { taskGroupId } = await group(1);
  const as = (scopes: string[]) => svc.queue(svc.root, { authorizedScopes: scopes });
  await expectError(as([`queue:seal-task-group:other/${taskGroupId}`]).sealTaskGroup(taskGroupId), 403, 'InsufficientScopes');
  await as([`queue:seal-task-group:sched/${taskGroupId}`]).sealTaskGroup(taskGroupId);
  await expectError(as([`queue:cancel-task-group:other/${taskGroupId}`]).cancelTaskGroup(taskGroupId), 403, 'InsufficientScopes');
  const r = await as([`queue:cancel-task-group:sched/${taskGroupId}`]).cancelTaskGroup(taskGroupId);
  expect(r.cancelledCount).toBe(1);
});

test('cancelTaskGroup: 409 until sealed, then cancels every unresolved task', async () => {
  const { taskGroupId, tasks } = await group(4);
  // One unscheduled member (self-dependent), one running, one completed, one pending.
  const unscheduled = slugid();
  await svc.queue().createTask(unscheduled, taskDef(uniqueQueue(), { taskGroupId, schedulerId: 'sched', dependencies: [unscheduled] }));
  const [running, completed, pending] = tasks;
  const c = await claimOne(svc, running.tq, running.taskId);
  const done = await claimOne(svc, completed.tq, completed.taskId);
  await svc.queue(done.credentials).reportCompleted(completed.taskId, 0);

  await expectError(svc.queue().cancelTaskGroup(taskGroupId), 409, 'RequestConflict');
  expect(await runSummary(svc, pending.taskId)).toEqual(['pending']);

  await svc.queue().sealTaskGroup(taskGroupId);
  const r = await svc.queue().cancelTaskGroup(taskGroupId);
  expect(r).toMatchObject({ taskGroupId, taskGroupSize: 5, cancelledCount: 4 });
  expect(r.taskIds.sort()).toEqual([unscheduled, running.taskId, pending.taskId, tasks[3].taskId].sort());
  expect(await runSummary(svc, running.taskId)).toEqual(['exception/canceled']);
  expect(await runSummary(svc, pending.taskId)).toEqual(['exception/canceled']);
  expect(await runSummary(svc, unscheduled)).toEqual(['exception/canceled']);
  expect(await runSummary(svc, completed.taskId)).toEqual(['completed/completed']);
  await expectError(svc.queue(c.credentials).reclaimTask(running.taskId, 0), 409, 'RequestConflict');

  // Again: nothing left to cancel. A rerun task is cancelled on the next call, and only it.
  expect(await svc.queue().cancelTaskGroup(taskGroupId)).toEqual({ taskGroupId, taskGroupSize: 5, cancelledCount: 0, taskIds: [] });
  await svc.queue().rerunTask(completed.taskId);
  expect(await svc.queue().cancelTaskGroup(taskGroupId)).toEqual({ taskGroupId, taskGroupSize: 5, cancelledCount: 1, taskIds: [completed.taskId] });
  expect(await runSummary(svc, completed.taskId)).toEqual(['completed/completed', 'exception/canceled']);
});
