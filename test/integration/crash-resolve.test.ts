/**
 * Crash safety of resolutions: a failure after each storage call of reportCompleted (with a
 * dependent to schedule), reportException with a retry, and cancelTask; then either the client's
 * own retry or, when the client gives up, the reaper's safety net must finish the work.
 */
import { startTestService, startSecondInstance, TestService, taskDef, slugid } from '../helpers/service';
import { CHECK_POLL_S, claim, claimAny, reapUntil, runSummary, status, uniqueQueue, W1, W2 } from '../helpers/work';
import { eachStorageCall, sweeperFor } from '../helpers/crash';

let a: TestService;
let b: TestService;
beforeAll(async () => {
  a = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' }, { tuning: { hintLeaseS: 4, triggerLeaseS: 2, resolvedNetDelayS: 1 } });
  b = await startSecondInstance(a, { QUEUE_CLAIM_WORK_POLL_S: CHECK_POLL_S });
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

/** Fails each storage call of the scenario's operation on A in turn. */
const sweep = (scenario: Parameters<typeof eachStorageCall>[1]) => sweeperFor(a)(scenario);

/** A running task (claimed through B) and a dependent of it waiting in its own queue. */
async function runningWithDependent(requires: 'all-completed' | 'all-resolved' = 'all-completed', retries = 5) {
  const tq = uniqueQueue();
  const taskId = slugid();
  await b.queue().createTask(taskId, taskDef(tq, { retries }));
  const depQueue = uniqueQueue();
  const dependent = slugid();
  await b.queue().createTask(dependent, taskDef(depQueue, { dependencies: [taskId], requires }));
  const [c] = await claimAny(b, tq, W1, 1);
  expect(c.status.taskId).toBe(taskId);
  return { tq, taskId, depQueue, dependent, creds: c.credentials };
}

/** Exactly one claim of taskId/runId for two workers together. */
async function claimableOnce(tq: string, taskId: string, runId = 0) {
  const claims = await claimAny(b, tq, W1, 32);
  expect(claims.map((c) => `${c.status.taskId}/${c.runId}`)).toEqual([`${taskId}/${runId}`]);
  expect(await claim(b, tq, W2, 32)).toEqual([]);
}

test('reportCompleted, client retries: completed once, dependent scheduled once', async () => {
  const ops = await sweep(async (faulty) => {
    const t = await runningWithDependent();
    const r = await faulty(() => a.queue(t.creds, { retries: 4 }).reportCompleted(t.taskId, 0));
    expect(r.error).toBeUndefined();
    expect(await runSummary(b, t.taskId)).toEqual(['completed/completed']);
    expect(await runSummary(b, t.dependent)).toEqual(['pending']);
    await claimableOnce(t.depQueue, t.dependent);
  });
  expect(ops).toEqual(
    expect.arrayContaining(['Tasks.get', 'resolved.put', 'Tasks.merge', 'TaskDeps.query', 'TaskDeps.delete', 'pending.put', 'resolved.delete']),
  );
}, 180_000);

test("reportCompleted, client gives up after the failure: the reaper's safety net schedules the dependent", async () => {
  await sweep(async (faulty) => {
    const t = await runningWithDependent();
    const r = await faulty(() => a.queue(t.creds, { retries: 0 }).reportCompleted(t.taskId, 0));
    const s = await status(b, t.taskId);
    if (s.state === 'running') {
      // Failed before the resolution was written: the worker's later retry still works.
      expect(r.error?.statusCode).toBe(500);
      await b.queue(t.creds).reportCompleted(t.taskId, 0);
    } else {
      expect(s.state).toBe('completed');
      // Nobody retries; the safety net fires after resolvedNetDelayS.
      await reapUntil(b, async () => (await status(b, t.dependent)).state === 'pending');
    }
    expect(await runSummary(b, t.dependent)).toEqual(['pending']);
    await claimableOnce(t.depQueue, t.dependent);
  });
}, 180_000);

test('reportException worker-shutdown, client retries: one retry run, claimable once, dependent untouched', async () => {
  const ops = await sweep(async (faulty) => {
    const t = await runningWithDependent('all-resolved');
    const r = await faulty(() => a.queue(t.creds, { retries: 4 }).reportException(t.taskId, 0, { reason: 'worker-shutdown' }));
    expect(r.error).toBeUndefined();
    const s = await status(b, t.taskId);
    expect(s.retriesLeft).toBe(4);
    expect(await runSummary(b, t.taskId)).toEqual(['exception/worker-shutdown', 'pending']);
    expect(s.runs[1].reasonCreated).toBe('retry');
    await claimableOnce(t.tq, t.taskId, 1);
    // A retry is not a resolution.
    expect((await status(b, t.dependent)).state).toBe('unscheduled');
  });
  expect(ops).toEqual(expect.arrayContaining(['Tasks.get', 'pending.put', 'Tasks.merge']));
}, 180_000);

test('cancelTask, client retries: canceled once, all-resolved dependent scheduled once', async () => {
  await sweep(async (faulty) => {
    const t = await runningWithDependent('all-resolved');
    const r = await faulty(() => a.queue(undefined, { retries: 4 }).cancelTask(t.taskId));
    expect(r.error).toBeUndefined();
    expect(await runSummary(b, t.taskId)).toEqual(['exception/canceled']);
    await claimableOnce(t.depQueue, t.dependent);
  });
}, 180_000);

test('reports made while a safety net is put share the next one; when their propagation fails, the reaper finishes every member from it', async () => {
  const [t1, t2, t3] = [await runningWithDependent(), await runningWithDependent(), await runningWithDependent()];
  const storage = a.services.storage;
  const trigger = storage.trigger.bind(storage);
  const table = storage.table.bind(storage);
  const before = storage.meter.byOp.get('resolved.put') ?? 0;
  // The first net's put takes a while, so the next two reports wait for it and share one message.
  let slowPut = true;
  const spies = [
    jest.spyOn(storage, 'trigger').mockImplementation((name) => {
      const q = trigger(name);
      if (name !== 'resolved') return q;
      return Object.assign(Object.create(q), {
        put: async (body: unknown, opts?: { visibilityS?: number }) => {
          if (slowPut) {
            slowPut = false;
            await new Promise((r) => setTimeout(r, 1000));
          }
          return q.put(body, opts);
        },
      });
    }),
    // Propagation fails on A: nobody tells the dependents, and the nets stay.
    jest.spyOn(storage, 'table').mockImplementation((name) => {
      const t = table(name);
      if (name !== 'TaskDeps') return t;
      return Object.assign(Object.create(t), { page: async () => Promise.reject(new Error('TaskDeps unavailable')) });
    }),
  ];
  try {
    const first = a.queue(t1.creds, { retries: 0 }).reportCompleted(t1.taskId, 0);
    await new Promise((r) => setTimeout(r, 300));
    const rest = [t2, t3].map((t) => a.queue(t.creds, { retries: 0 }).reportCompleted(t.taskId, 0));
    for (const r of await Promise.allSettled([first, ...rest])) expect(r.status).toBe('rejected');
  } finally {
    for (const s of spies) s.mockRestore();
  }
  expect((storage.meter.byOp.get('resolved.put') ?? 0) - before).toBe(2);
  for (const t of [t1, t2, t3]) expect(await runSummary(b, t.dependent)).toEqual([]);
  // The nets fire (resolvedNetDelayS 1): every dependent is scheduled, once.
  await reapUntil(b, async () => (await Promise.all([t1, t2, t3].map((t) => status(b, t.dependent)))).every((s) => s.state === 'pending'));
  for (const t of [t1, t2, t3]) await claimableOnce(t.depQueue, t.dependent);
}, 180_000);
