/**
 * Crash safety of claiming (claimWork and claimTask): a failure after each storage call, then
 * the worker's own retry, must hand the run to that worker exactly once, leave no second
 * claimable copy, and leave a claim-expiry trigger behind (proved by letting the claim expire).
 */
import { startTestService, startSecondInstance, TestService, taskDef, slugid } from '../helpers/service';
import { CHECK_POLL_S, claim, reapUntil, status, uniqueQueue, waitUntil, W1, W2 } from '../helpers/work';
import { eachStorageCall, sweeperFor } from '../helpers/crash';

/** Long enough for the checks of one step, short enough to let every claim expire at the end. */
const CLAIM_TIMEOUT_S = 6;
/** A hint leased by a poll that then "crashed" comes back after this. */
const HINT_LEASE_S = 4;

let a: TestService;
let b: TestService;
beforeAll(async () => {
  a = await startTestService(
    { QUEUE_CLAIM_WORK_POLL_S: String(HINT_LEASE_S * 2), QUEUE_CLAIM_TIMEOUT_S: String(CLAIM_TIMEOUT_S) },
    { tuning: { hintLeaseS: HINT_LEASE_S, triggerLeaseS: 2 } },
  );
  b = await startSecondInstance(a, { QUEUE_CLAIM_WORK_POLL_S: CHECK_POLL_S });
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

/** Fails each storage call of the scenario's operation on A in turn. */
const sweep = (scenario: Parameters<typeof eachStorageCall>[1]) => sweeperFor(a)(scenario);
const retrying = () => a.queue(undefined, { retries: 4 });

/** After the crash and retry: one run, running for W1, and nothing left for another worker. */
async function claimedOnceBy(tq: string, taskId: string, c: any) {
  expect(c).toMatchObject({ runId: 0, ...W1, status: { taskId, state: 'running' } });
  const s = await status(b, taskId);
  expect(s.runs).toEqual([expect.objectContaining({ runId: 0, state: 'running', ...W1, takenUntil: c.takenUntil })]);
  expect(await claim(b, tq, W2, 32)).toEqual([]);
}

/** Every claim made above had its expiry trigger: they all expire into a retry. */
async function allExpire(made: { taskId: string; takenUntil: string }[]) {
  const last = made.map((m) => m.takenUntil).sort()[made.length - 1];
  await waitUntil(last, 300);
  await reapUntil(b, async () => {
    const all = await Promise.all(made.map((m) => status(b, m.taskId)));
    return all.every((s) => s.runs.length === 2 && s.runs[0].reasonResolved === 'claim-expired' && s.runs[1].state === 'pending');
  });
}

test('claimWork', async () => {
  const made: { taskId: string; takenUntil: string }[] = [];
  const ops = await sweep(async (faulty) => {
    const taskId = slugid();
    const tq = uniqueQueue();
    await b.queue().createTask(taskId, taskDef(tq));
    const r = await faulty(() => retrying().claimWork(tq, { ...W1, tasks: 1 }));
    expect(r.error).toBeUndefined();
    expect(r.value.tasks).toHaveLength(1);
    await claimedOnceBy(tq, taskId, r.value.tasks[0]);
    made.push({ taskId, takenUntil: r.value.tasks[0].takenUntil });
  });
  expect(ops).toEqual(expect.arrayContaining(['TaskQueues.query', 'pending.get', 'Tasks.get', 'Expiry.upsert', 'Tasks.merge', 'pending.delete']));
  await allExpire(made);
}, 180_000);

test('claimTask', async () => {
  const made: { taskId: string; takenUntil: string }[] = [];
  const ops = await sweep(async (faulty) => {
    const taskId = slugid();
    const tq = uniqueQueue();
    await b.queue().createTask(taskId, taskDef(tq));
    const r = await faulty(() => retrying().claimTask(taskId, 0, W1));
    expect(r.error).toBeUndefined();
    await claimedOnceBy(tq, taskId, r.value);
    made.push({ taskId, takenUntil: r.value.takenUntil });
  });
  expect(ops).toEqual(expect.arrayContaining(['Tasks.get', 'Expiry.upsert', 'Tasks.merge']));
  await allExpire(made);
}, 180_000);
