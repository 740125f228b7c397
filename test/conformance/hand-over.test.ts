/**
 * createTask's hand-over: a task created on the instance where a claimWork waits on its task
 * queue is claimed for that worker in the create's own write, without a hint. What the worker and
 * the creator see stays Taskcluster's: the claim with working credentials, createTask answering
 * the task as created (pending), and task-defined, task-pending, task-running in that order.
 */
import { startTestService, TestService, taskDef, slugid } from '../helpers/service';
import { W1, W2, WorkerId, status, uniqueQueue } from '../helpers/work';
import { eventsClient, drainSubscription, short } from '../helpers/events';

/** Long enough that no claimWork below ends its poll before the task it waits for is created. */
const POLL_S = '20';
/** How long a claimWork may take to reach this instance's poller (HTTP on loopback). */
const JOIN_TIMEOUT_MS = 5_000;

let svc: TestService;
let qe: any;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: POLL_S });
  qe = new svc.tc.QueueEvents({ rootUrl: svc.rootUrl });
});
afterAll(async () => svc?.close());

/** A claimWork for one task, once it waits in this instance's poller for `tq` (`answer`: its response). */
async function waitingClaim(tq: string, worker: WorkerId): Promise<{ answer: Promise<{ tasks: any[] }> }> {
  const poller = svc.services.pollers.get(tq);
  const before = poller.waiting;
  const answer = svc.queue().claimWork(tq, { ...worker, tasks: 1 });
  const until = Date.now() + JOIN_TIMEOUT_MS;
  // Waiting, and the poller has seen the task queue empty since (HintPoller.take).
  while (poller.waiting <= before || !poller.handsOver) {
    if (Date.now() > until) throw new Error(`claimWork did not reach the poller of ${tq}`);
    await new Promise((r) => setImmediate(r));
  }
  // Wrapped: an async function returning the promise itself would wait for the answer.
  return { answer };
}

test('the waiting worker gets the new task; createTask answers it pending; the run is the worker’s', async () => {
  const tq = uniqueQueue();
  const { answer } = await waitingClaim(tq, W1);
  const taskId = slugid();
  const meter = svc.services.storage.meter;
  const before = meter.snapshot().byOp;
  const created = await svc.queue().createTask(taskId, taskDef(tq));
  const { tasks } = await answer;
  const calls = meter.snapshot().byOp;

  expect(created.status.state).toBe('pending');
  expect(created.status.runs).toEqual([{ runId: 0, state: 'pending', reasonCreated: 'scheduled', scheduled: expect.any(String) }]);
  expect(tasks).toHaveLength(1);
  expect(tasks[0]).toMatchObject({ runId: 0, ...W1, status: { taskId, state: 'running' } });
  expect((await status(svc, taskId)).runs[0]).toMatchObject({ state: 'running', ...W1, takenUntil: tasks[0].takenUntil });
  // No hint went through the pending queue: nothing put, nothing deleted.
  for (const op of ['pending.put', 'pending.delete']) expect(calls[op] ?? 0).toBe(before[op] ?? 0);

  // The run's credentials are the worker's, as from any claim.
  await svc.queue(tasks[0].credentials).reportCompleted(taskId, 0);
  expect((await status(svc, taskId)).state).toBe('completed');
});

test('events: task-defined, task-pending (while pending, no worker), then task-running', async () => {
  const tq = uniqueQueue();
  const [provisionerId, workerType] = tq.split('/');
  const sub = await eventsClient(svc).createSubscription(`hand-over-${slugid()}`, {
    bindings: ['taskDefined', 'taskPending', 'taskRunning'].map((m) => qe[m]({ provisionerId, workerType })),
    expires: new Date(Date.now() + 3600_000).toJSON(),
  });
  const { answer } = await waitingClaim(tq, W1);
  const taskId = slugid();
  await svc.queue().createTask(taskId, taskDef(tq));
  const { tasks } = await answer;
  expect(tasks).toHaveLength(1);
  await svc.settled();

  const seen = new Map<string, any>();
  for (const e of await drainSubscription(sub)) if (!seen.has(e.id)) seen.set(e.id, e);
  const events = [...seen.values()].sort((a, b) => a.seq - b.seq);
  expect(events.map((e) => short(e.exchange))).toEqual(['task-defined', 'task-pending', 'task-running']);
  const [, pending, running] = events;
  expect(pending.payload.status.state).toBe('pending');
  expect(pending.payload.status.runs).toEqual([{ runId: 0, state: 'pending', reasonCreated: 'scheduled', scheduled: expect.any(String) }]);
  expect(pending.payload).not.toHaveProperty('workerGroup');
  const { schedulerId, taskGroupId } = pending.payload.status;
  expect(pending.routingKey).toBe(`primary.${taskId}.0._._.${provisionerId}.${workerType}.${schedulerId}.${taskGroupId}._`);
  expect(running.payload).toMatchObject({ runId: 0, ...W1, takenUntil: tasks[0].takenUntil, status: { state: 'running' } });
});

test('waiting workers are served in the order they came', async () => {
  const tq = uniqueQueue();
  const { answer: first } = await waitingClaim(tq, W1);
  const { answer: second } = await waitingClaim(tq, W2);
  const [a, b] = [slugid(), slugid()];
  await svc.queue().createTask(a, taskDef(tq));
  expect((await first).tasks.map((t) => t.status.taskId)).toEqual([a]);
  await svc.queue().createTask(b, taskDef(tq));
  expect((await second).tasks.map((t) => t.status.taskId)).toEqual([b]);
});

test('a task that is not claimable at once (dependencies, a later start) leaves the worker waiting', async () => {
  const tq = uniqueQueue();
  const { answer } = await waitingClaim(tq, W1);
  const dep = slugid();
  await svc.queue().createTask(dep, taskDef(uniqueQueue()));
  const blocked = slugid();
  expect((await svc.queue().createTask(blocked, taskDef(tq, { dependencies: [dep] }))).status.state).toBe('unscheduled');
  const later = slugid();
  const notBefore = new Date(Date.now() + 1800_000).toJSON();
  expect((await svc.queue().createTask(later, taskDef(tq, { notBefore }))).status.runs[0].scheduled).toBe(notBefore);
  expect(svc.services.pollers.get(tq).waiting).toBe(1);
  // The worker still gets the next task it can run.
  const ready = slugid();
  await svc.queue().createTask(ready, taskDef(tq));
  expect((await answer).tasks.map((t) => t.status.taskId)).toEqual([ready]);
});

test('a repeated createTask hands nothing over: the next waiting worker keeps waiting', async () => {
  const tq = uniqueQueue();
  const taskId = slugid();
  const def = taskDef(tq);
  const { answer: first } = await waitingClaim(tq, W1);
  const { answer: second } = await waitingClaim(tq, W2);
  await svc.queue().createTask(taskId, def);
  const again = await svc.queue().createTask(taskId, def);
  expect(again.status).toMatchObject({ taskId, state: 'running' });
  expect((await first).tasks.map((t) => [t.status.taskId, t.runId])).toEqual([[taskId, 0]]);
  expect(svc.services.pollers.get(tq).waiting).toBe(1);
  const other = slugid();
  await svc.queue().createTask(other, taskDef(tq));
  expect((await second).tasks.map((t) => t.status.taskId)).toEqual([other]);
  expect((await status(svc, taskId)).runs).toHaveLength(1);
});
