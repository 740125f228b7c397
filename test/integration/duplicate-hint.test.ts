/**
 * A queue put whose answer was lost leaves two copies of a pending hint on Azure (the SDK's retry
 * puts it again). The copy that did not claim must never hand the same run out again, not even to
 * the worker that holds it (only a retry through the very message that claimed replays a claim).
 */
import { startTestService, TestService, taskDef, slugid } from '../helpers/service';
import { claim, status, uniqueQueue, W1, W2 } from '../helpers/work';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_STORAGE_CONNECTION: 'memory:', QUEUE_CLAIM_WORK_POLL_S: '1' });
});
afterAll(async () => svc?.close());

/** A pending task whose hint is in its pending queue twice, as after an ambiguous put. */
async function twoHints(tq: string): Promise<string> {
  const taskId = slugid();
  await svc.queue().createTask(taskId, taskDef(tq));
  const t = (await svc.services.tasks.load(taskId))!;
  await svc.services.pending.put(tq, t.definition.priority, taskId, 0, t.runs[0].hintId!, t.definition.deadline);
  return taskId;
}

test('the second copy of a hint does not hand the run to its worker again', async () => {
  const tq = uniqueQueue();
  const taskId = await twoHints(tq);
  const first = await claim(svc, tq, W1, 1);
  expect(first.map((c) => [c.status.taskId, c.runId])).toEqual([[taskId, 0]]);
  expect(await claim(svc, tq, W1, 1)).toEqual([]);
  expect(await claim(svc, tq, W2, 1)).toEqual([]);
  expect((await status(svc, taskId)).runs).toEqual([expect.objectContaining({ runId: 0, state: 'running', ...W1 })]);
  expect((await svc.queue().getWorker('prov', tq.split('/')[1], W1.workerGroup, W1.workerId)).recentTasks).toEqual([{ taskId, runId: 0 }]);
});

test('a batch claimWork that receives both copies lists the run once', async () => {
  const tq = uniqueQueue();
  const taskId = await twoHints(tq);
  const claims = await claim(svc, tq, W1, 4);
  expect(claims.map((c) => [c.status.taskId, c.runId])).toEqual([[taskId, 0]]);
  expect(await claim(svc, tq, W1, 4)).toEqual([]);
});
