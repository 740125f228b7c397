/**
 * Crash safety of createTask: a failure after each of its storage calls, then the client's own
 * retry, must converge to one task with exactly one claimable run and a live deadline trigger.
 * The faults are injected on instance A; checks go through instance B (same storage), so they
 * neither disturb A's call count nor rely on A's in-memory state.
 */
import { startTestService, startSecondInstance, TestService, taskDef, slugid, clock } from '../helpers/service';
import { CHECK_POLL_S, claim, claimAny, reapUntil, status, uniqueQueue, waitUntil, W1, W2 } from '../helpers/work';
import { eachStorageCall, sweeperFor } from '../helpers/crash';

let a: TestService;
let b: TestService;
beforeAll(async () => {
  a = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1', QUEUE_DEADLINE_DELAY_S: '0' }, { tuning: { hintLeaseS: 4, triggerLeaseS: 2 } });
  b = await startSecondInstance(a, { QUEUE_CLAIM_WORK_POLL_S: CHECK_POLL_S });
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

/** The hand-over's waiting claimWork outlasts a create and its retries. */
const HAND_OVER_POLL_S = '15';

/** Fails each storage call of the scenario's operation on A in turn. */
const sweep = (scenario: Parameters<typeof eachStorageCall>[1]) => sweeperFor(a)(scenario);

/** The client retries 5xx itself, as workers and creators do. */
const retrying = () => a.queue(undefined, { retries: 4 });

/** Exactly one claim for taskId/runId across two workers, then nothing. */
async function claimableOnce(tq: string, taskId: string, runId = 0) {
  const claims = await claimAny(b, tq, W1, 32);
  expect(claims.map((c) => `${c.status.taskId}/${c.runId}`)).toEqual([`${taskId}/${runId}`]);
  expect(await claim(b, tq, W2, 32)).toEqual([]);
  return claims[0];
}

test('createTask without dependencies', async () => {
  const made: { taskId: string; deadline: string }[] = [];
  const ops = await sweep(async (faulty) => {
    const taskId = slugid();
    const tq = uniqueQueue();
    const deadline = new Date(clock.ms() + 6_000).toJSON();
    const r = await faulty(() => retrying().createTask(taskId, taskDef(tq, { deadline })));
    expect(r.error).toBeUndefined();
    expect(r.value.status.runs).toEqual([expect.objectContaining({ runId: 0, state: 'pending' })]);
    expect((await status(b, taskId)).runs).toHaveLength(1);
    await claimableOnce(tq, taskId);
    made.push({ taskId, deadline });
  });
  // One expiry-index call: the deadline's row, which carries the task's expiry to its sweep.
  expect(ops).toEqual(expect.arrayContaining(['Expiry.upsert', 'pending.create', 'TaskQueues.upsert', 'pending.put', 'Tasks.transaction']));
  expect(ops).not.toContain('Expiry.transaction');

  // Each task, claimed above, still has its deadline trigger.
  await waitUntil(made[made.length - 1].deadline, 300);
  await reapUntil(b, async () => {
    const all = await Promise.all(made.map((m) => status(b, m.taskId)));
    return all.every((s) => s.state === 'exception' && s.runs.length === 1 && s.runs[0].reasonResolved === 'deadline-exceeded');
  });
}, 120_000);

test("createTask while a claimWork waits on the same instance (the hand-over: claimed in the create's write)", async () => {
  // Its own instance, with a poll window no retry outlasts: the waiting claimWork is there for every attempt.
  const h = await startSecondInstance(a, { QUEUE_CLAIM_WORK_POLL_S: HAND_OVER_POLL_S });
  try {
    const made: { taskId: string; deadline: string }[] = [];
    const ops = await sweeperFor(h)(async (faulty) => {
      const taskId = slugid();
      const tq = uniqueQueue();
      const deadline = new Date(clock.ms() + 6_000).toJSON();
      const poller = h.services.pollers.get(tq);
      const answer = h.queue().claimWork(tq, { ...W1, tasks: 1 });
      while (!poller.handsOver) await new Promise((r) => setImmediate(r));
      const r = await faulty(() => h.queue(undefined, { retries: 4 }).createTask(taskId, taskDef(tq, { deadline })));
      expect(r.error).toBeUndefined();
      // The waiting worker got run 0, whichever call failed: a failure after the row was written
      // still hands over the claim, and a retry hands over its own.
      const { tasks } = await answer;
      expect(tasks.map((c: any) => `${c.status.taskId}/${c.runId}`)).toEqual([`${taskId}/0`]);
      expect((await status(b, taskId)).runs).toEqual([expect.objectContaining({ runId: 0, state: 'running', ...W1 })]);
      // Nothing else is claimable: no hint was left behind for a second claim.
      expect(await claim(b, tq, W2, 32)).toEqual([]);
      made.push({ taskId, deadline });
    });
    expect(ops).toEqual(expect.arrayContaining(['Tasks.transaction']));
    expect(ops).not.toContain('pending.put');
    // Each task still has its deadline trigger.
    await waitUntil(made[made.length - 1].deadline, 300);
    await reapUntil(b, async () => {
      const all = await Promise.all(made.map((m) => status(b, m.taskId)));
      return all.every((s) => s.state === 'exception' && s.runs.length === 1 && s.runs[0].reasonResolved === 'deadline-exceeded');
    });
  } finally {
    await h.close();
  }
}, 120_000);

test('createTask with a dependency that is already completed (scheduled at once)', async () => {
  const depQueue = uniqueQueue();
  const dep = slugid();
  await b.queue().createTask(dep, taskDef(depQueue));
  const c = await claimableOnce(depQueue, dep);
  await b.queue(c.credentials).reportCompleted(dep, 0);

  const ops = await sweep(async (faulty) => {
    const taskId = slugid();
    const tq = uniqueQueue();
    const r = await faulty(() => retrying().createTask(taskId, taskDef(tq, { dependencies: [dep] })));
    expect(r.error).toBeUndefined();
    expect((await status(b, taskId)).runs).toEqual([expect.objectContaining({ runId: 0, state: 'pending', reasonCreated: 'scheduled' })]);
    await claimableOnce(tq, taskId);
    // The edge was written too: the task is listed as a dependent.
    expect((await b.queue().listDependentTasks(dep)).tasks.map((t: any) => t.status.taskId)).toContain(taskId);
  });
  expect(ops).toEqual(expect.arrayContaining(['TaskDeps.transaction', 'TaskDeps.upsert', 'TaskDeps.delete', 'TaskDeps.query']));
}, 120_000);

test('createTask with a dependency still running (scheduled when it completes)', async () => {
  const depQueue = uniqueQueue();
  const dep = slugid();
  await b.queue().createTask(dep, taskDef(depQueue));
  const depClaim = await claimableOnce(depQueue, dep);

  const made: { taskId: string; tq: string }[] = [];
  await sweep(async (faulty) => {
    const taskId = slugid();
    const tq = uniqueQueue();
    const r = await faulty(() => retrying().createTask(taskId, taskDef(tq, { dependencies: [dep] })));
    expect(r.error).toBeUndefined();
    expect((await status(b, taskId)).state).toBe('unscheduled');
    made.push({ taskId, tq });
  });
  await b.queue(depClaim.credentials).reportCompleted(dep, 0);
  for (const m of made) {
    expect((await status(b, m.taskId)).runs).toEqual([expect.objectContaining({ runId: 0, state: 'pending' })]);
  }
  // Each is claimable exactly once.
  for (const m of made) await claimableOnce(m.tq, m.taskId);
}, 120_000);

test('createTask with a missing dependency stays a 400 and leaves no task', async () => {
  await sweep(async (faulty) => {
    const taskId = slugid();
    const r = await faulty(() => retrying().createTask(taskId, taskDef(uniqueQueue(), { dependencies: [slugid()] })));
    expect(r.error?.statusCode).toBe(400);
    await expect(b.queue().status(taskId)).rejects.toMatchObject({ statusCode: 404 });
  });
}, 120_000);
