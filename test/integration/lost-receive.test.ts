/**
 * Lost receives (the faithful storage mode): Azure leased the messages (their visibility moved,
 * their dequeue count grew) and the answer never reached the caller; the SDK's retry receives again
 * and gets other messages or none. The readers of the service's queues must lose nothing: the
 * messages reappear when their lease runs out (here: `expireLostLeases`, without waiting) and are
 * handled then, once.
 */
import { startTestService, TestService, taskDef, slugid } from '../helpers/service';
import { claim, status, uniqueQueue, W1, W2 } from '../helpers/work';
import { FaultyStorage } from '../../shared/storage/faults';

let svc: TestService;
let faults: FaultyStorage;
beforeAll(async () => {
  // Only the test's own faults: every other call answers as it should.
  svc = await startTestService({ QUEUE_STORAGE_CONNECTION: 'memory:', QUEUE_STORAGE_FAULTS: 'seed=1 backoff-ms=0', QUEUE_CLAIM_WORK_POLL_S: '1' });
  faults = svc.services.storage as FaultyStorage;
});
afterAll(async () => svc?.close());

test('claimWork: a pending hint whose receive was lost is claimed once its lease runs out, exactly once', async () => {
  const tq = uniqueQueue();
  const taskId = slugid();
  await svc.queue().createTask(taskId, taskDef(tq));
  faults.plan.loseReceives('pending');
  // The poller's receive leased the hint and lost the answer: nothing to hand out for now.
  expect(await claim(svc, tq, W1)).toEqual([]);
  expect(faults.plan.taken.lostReceives).toBe(1);
  expect((await status(svc, taskId)).state).toBe('pending');
  expect(await faults.plan.expireLostLeases()).toBe(1);
  const claims = await claim(svc, tq, W1, 32);
  expect(claims.map((c) => `${c.status.taskId}/${c.runId}`)).toEqual([`${taskId}/0`]);
  expect(await claim(svc, tq, W2, 32)).toEqual([]);
  expect((await status(svc, taskId)).runs).toEqual([expect.objectContaining({ runId: 0, state: 'running', ...W1 })]);
});

test('the events consumer: a completion whose receive was lost is indexed on a later pass', async () => {
  const tq = uniqueQueue();
  const taskId = slugid();
  const namespace = `lost.receive.${slugid().replace(/[^a-zA-Z0-9]/g, 'x')}`;
  await svc.queue().createTask(taskId, taskDef(tq, { routes: [`index.${namespace}`] }));
  const [c] = await claim(svc, tq, W1);
  await svc.queue(c.credentials).reportCompleted(taskId, 0);
  const index = new svc.tc.Index({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
  const indexed = () =>
    index.findTask(namespace).then(
      (t: { taskId: string }) => t.taskId,
      (err: { statusCode?: number }) => (err.statusCode === 404 ? undefined : Promise.reject(err)),
    );
  faults.plan.loseReceives('subscription');
  await svc.runReaper();
  expect(faults.plan.taken.lostReceives).toBe(2);
  expect(await indexed()).toBeUndefined();
  expect(await faults.plan.expireLostLeases()).toBeGreaterThanOrEqual(1);
  await svc.runReaper();
  expect(await indexed()).toBe(taskId);
});
