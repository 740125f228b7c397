/**
 * Operator index writes are queued off the request path (shared/ops/indexes.ts): one that fails
 * is logged and lost, never the request's error, and the task's next transition repairs the index.
 */
import { INDEX_LINGER_MS } from '../../shared/ops/indexes';
import { startTestService, TestService, taskDef, slugid } from '../helpers/service';
import { claimOne, uniqueQueue } from '../helpers/work';

let svc: TestService;
/** Index transactions still to fail (each throws before reaching storage, as a network error would). */
let failIndexWrites = 0;
beforeAll(async () => {
  svc = await startTestService({}, { tuning: { indexLingerMs: INDEX_LINGER_MS } });
  const meter = svc.services.storage.meter;
  const run = meter.run.bind(meter);
  meter.run = async <T>(op: string, fn: () => Promise<T>): Promise<T> => {
    if (op === 'Indexes.transaction' && failIndexWrites > 0) {
      failIndexWrites--;
      throw new Error('injected: index table unreachable');
    }
    return run(op, fn);
  };
});
afterAll(async () => svc?.close());

async function counts(tq: string) {
  const c = await svc.queue().taskQueueCounts(tq);
  return [c.pendingTasks, c.claimedTasks];
}

test('a failed deferred index write does not fail its request; the next transition repairs the index', async () => {
  const tq = uniqueQueue();
  const taskId = slugid();
  await svc.queue().createTask(taskId, taskDef(tq));
  expect(await counts(tq)).toEqual([1, 0]);
  const warnings = svc.log.records.filter((r) => r.event === 'index-write-failed').length;

  failIndexWrites = 1;
  const c = await claimOne(svc, tq, taskId); // answers although its index write fails
  await svc.services.indexes.settled();
  expect(failIndexWrites).toBe(0);
  expect(svc.log.records.filter((r) => r.event === 'index-write-failed' && r.level === 'warn' && r.taskId === taskId)).toHaveLength(1);
  expect(svc.log.records.filter((r) => r.event === 'index-write-failed')).toHaveLength(warnings + 1);
  expect(await counts(tq)).toEqual([1, 0]); // the claim is missing from the index

  await svc.queue(c.credentials).reportCompleted(taskId, 0);
  expect(await counts(tq)).toEqual([0, 0]);
  const Ops = svc.tc.createClient(await (await fetch(`${svc.rootUrl}/api/queue/v1/ops/reference`)).json(), 'QueueOps');
  const ops = new Ops({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
  const done = await ops.listTaskQueueTasks(tq, { state: 'completed' });
  expect(done.tasks.map((t: any) => [t.taskId, t.workerId])).toEqual([[taskId, c.workerId]]);
});
