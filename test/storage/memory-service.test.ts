/**
 * The whole service on the in-memory storage adapter: a task's lifecycle through
 * taskcluster-client with no Azurite behind it, as fast domain tests can run it.
 */
import { startTestService, TestService, taskDef, slugid } from '../helpers/service';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_STORAGE_CONNECTION: 'memory:', QUEUE_CLAIM_WORK_POLL_S: '1' });
});
afterAll(async () => svc?.close());

test('create, claim, complete and read back, on memory storage', async () => {
  expect(svc.services.storage.kind).toBe('memory');
  const q = svc.queue();
  const taskId = slugid();
  await q.createTask(taskId, taskDef('mem/wt'));
  expect((await q.status(taskId)).status.state).toBe('pending');
  const { tasks } = await q.claimWork('mem/wt', { workerGroup: 'g', workerId: 'w', tasks: 1 });
  expect(tasks.map((t: any) => t.status.taskId)).toEqual([taskId]);
  await q.reportCompleted(taskId, 0);
  expect((await q.status(taskId)).status.state).toBe('completed');
  expect((await q.listTaskGroup(taskId)).tasks.map((t: any) => t.status.taskId)).toEqual([taskId]);
  expect(svc.services.storage.meter.total).toBeGreaterThan(0);
});
