/**
 * Crash safety of the scheduling controls: a failure after each storage call of changeTaskPriority
 * and declareWorkerGone; the client's retry must finish the work, and the run stays claimable
 * exactly once (never lost without a hint, never claimable twice).
 */
import { startTestService, startSecondInstance, TestService, taskDef, slugid, clock } from '../helpers/service';
import { CHECK_POLL_S, claim, claimAny, runSummary, status, uniqueQueue, W1, W2 } from '../helpers/work';
import { sweeperFor } from '../helpers/crash';

let a: TestService;
let b: TestService;
let ref: any;
beforeAll(async () => {
  a = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' }, { tuning: { hintLeaseS: 4, triggerLeaseS: 2, resolvedNetDelayS: 1 } });
  b = await startSecondInstance(a, { QUEUE_CLAIM_WORK_POLL_S: CHECK_POLL_S });
  ref = await (await fetch(`${a.rootUrl}/api/references/queue/v1/api.json`)).json();
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

const sweep = (scenario: Parameters<ReturnType<typeof sweeperFor>>[0]) => sweeperFor(a)(scenario);
/** A client of instance A with the served reference's methods, retrying like a real client. */
const queueA = (retries: number) => new (a.tc.createClient(ref, 'queue'))({ rootUrl: a.rootUrl, credentials: a.root, retries });

/** Exactly one claim of taskId/runId for two workers together. */
async function claimableOnce(tq: string, taskId: string, runId = 0) {
  const claims = await claimAny(b, tq, W1, 32);
  expect(claims.map((c) => `${c.status.taskId}/${c.runId}`)).toEqual([`${taskId}/${runId}`]);
  expect(await claim(b, tq, W2, 32)).toEqual([]);
}

test('changeTaskPriority of a pending task, client retries: the new priority, claimable once', async () => {
  const ops = await sweep(async (faulty) => {
    const tq = uniqueQueue();
    const taskId = slugid();
    await b.queue().createTask(taskId, taskDef(tq, { priority: 'low' }));
    const r = await faulty(() => queueA(4).changeTaskPriority(taskId, { newPriority: 'high' }));
    expect(r.error).toBeUndefined();
    expect((await status(b, taskId)).priority).toBe('high');
    await claimableOnce(tq, taskId);
  });
  expect(ops).toEqual(expect.arrayContaining(['Tasks.get', 'pending.put', 'Tasks.merge'])); // the row and its `prioritized` history entry
}, 180_000);

test('declareWorkerGone, client retries: one retry run, claimable once', async () => {
  const ops = await sweep(async (faulty) => {
    const tq = uniqueQueue();
    const [prov, wt] = tq.split('/');
    const taskId = slugid();
    await b.queue().createTask(taskId, taskDef(tq, { retries: 2 }));
    expect(await claimAny(b, tq, W1, 1)).toHaveLength(1);
    const r = await faulty(() => queueA(4).declareWorkerGone(prov, wt, W1.workerGroup, W1.workerId));
    expect(r.error).toBeUndefined();
    expect(await runSummary(b, taskId)).toEqual(['exception/worker-shutdown', 'pending']);
    expect((await status(b, taskId)).retriesLeft).toBe(1);
    await claimableOnce(tq, taskId, 1);
  });
  expect(ops).toEqual(expect.arrayContaining(['Tasks.get', 'pending.put', 'Tasks.merge']));
}, 180_000);

test("reportCompleted of a concurrency key's holder, client retries: the waiting task gets the key, claimable once", async () => {
  let i = 0;
  await sweep(async (faulty) => {
    const tq = uniqueQueue();
    const key = `crash-${clock.ms()}-${i++}`;
    const [holder, waiter] = [slugid(), slugid()];
    await b.queue().createTask(holder, taskDef(tq, { concurrencyKey: key }));
    const [c] = await claimAny(b, tq, W1, 1);
    expect(c.status.taskId).toBe(holder);
    await b.queue().createTask(waiter, taskDef(tq, { concurrencyKey: key }));
    expect(await claim(b, tq, W2, 1)).toEqual([]);
    const r = await faulty(() => a.queue(c.credentials, { retries: 4 }).reportCompleted(holder, 0));
    expect(r.error).toBeUndefined();
    await claimableOnce(tq, waiter);
  });
}, 180_000);

test('suspendRun, client retries: one resumed run with the continuation, claimable once', async () => {
  await sweep(async (faulty) => {
    const tq = uniqueQueue();
    const taskId = slugid();
    await b.queue().createTask(taskId, taskDef(tq));
    const [c] = await claimAny(b, tq, W1, 1);
    const q = new (a.tc.createClient(ref, 'queue'))({ rootUrl: a.rootUrl, credentials: c.credentials, retries: 4 });
    const r = await faulty(() => q.suspendRun(taskId, 0, { continuation: { at: 1 } }));
    expect(r.error).toBeUndefined();
    expect(await runSummary(b, taskId)).toEqual(['exception/suspended', 'pending']);
    const claims = await claimAny(b, tq, W2, 32);
    expect(claims.map((x) => [x.runId, x.continuation])).toEqual([[1, { at: 1 }]]);
    expect(await claim(b, tq, W1, 32)).toEqual([]);
  });
}, 180_000);
