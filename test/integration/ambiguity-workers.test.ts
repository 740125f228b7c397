/**
 * Ambiguous writes (the faithful storage mode) of the worker bookkeeping: each write of a first
 * claimWork and of quarantineWorker in turn applies, its answer is lost, and the SDK-style retry
 * meets its own success (409, 412). The outcome must be the one without the fault.
 */
import { startTestService, TestService, clock } from '../helpers/service';
import { uniqueQueue, W1 } from '../helpers/work';
import { eachWrite } from '../helpers/ambiguity';

let svc: TestService;
beforeAll(async () => {
  // Only the sweep's fault: every other call answers as it should.
  svc = await startTestService({ QUEUE_STORAGE_CONNECTION: 'memory:', QUEUE_STORAGE_FAULTS: 'seed=1 backoff-ms=0', QUEUE_CLAIM_WORK_POLL_S: '1' });
});
afterAll(async () => svc?.close());

const sweep = (scenario: Parameters<typeof eachWrite>[1]) => eachWrite(svc.services.storage, scenario, { warm: () => svc.auth().currentScopes() });

test("a worker's first claimWork registers the worker and its task queue", async () => {
  const ops = await sweep(async (ambiguous) => {
    const tq = uniqueQueue();
    const [prov, wt] = tq.split('/');
    const r = await ambiguous(() => svc.queue().claimWork(tq, { ...W1, tasks: 1 }));
    expect(r.error).toBeUndefined();
    expect((await svc.queue().getWorker(prov, wt, W1.workerGroup, W1.workerId)).workerId).toBe(W1.workerId);
    expect((await svc.queue().getTaskQueue(tq)).taskQueueId).toBe(tq);
  });
  expect(ops).toEqual(expect.arrayContaining(['Workers.insert']));
});

test('quarantineWorker records one quarantine change', async () => {
  const ops = await sweep(async (ambiguous) => {
    const tq = uniqueQueue();
    const [prov, wt] = tq.split('/');
    await svc.queue().claimWork(tq, { ...W1, tasks: 1 });
    const until = new Date(clock.ms() + 3600_000).toJSON();
    const r = await ambiguous(() => svc.queue().quarantineWorker(prov, wt, W1.workerGroup, W1.workerId, { quarantineUntil: until, quarantineInfo: 'disk' }));
    expect(r.error).toBeUndefined();
    expect(r.value.quarantineDetails).toEqual([expect.objectContaining({ quarantineUntil: until, quarantineInfo: 'disk' })]);
    expect((await svc.queue().getWorker(prov, wt, W1.workerGroup, W1.workerId)).quarantineDetails).toHaveLength(1);
  });
  expect(ops).toEqual(expect.arrayContaining([expect.stringMatching(/^Workers\./)]));
});
