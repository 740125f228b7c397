/**
 * Scheduling controls end to end, driven by a client built by taskcluster-client's `createClient`
 * from the queue reference the service serves (v87 predates changeTaskPriority).
 */
import { startTestService, startSecondInstance, TestService, taskDef, slugid, expectError, clock } from '../helpers/service';
import { releaseKey } from '../../shared/tasks/concurrency-keys';
import { rehinter } from '../../shared/lifecycle/executor';
import { CHECK_POLL_S, claim, claimOne, passTime, runSummary, runningTask, status, uniqueQueue, W1, W2 } from '../helpers/work';

let svc: TestService;
/**
 * Another instance that checks "nothing (else) to claim": one look, no poll window to wait out. A
 * claim meant to meet every hint of a concurrency key's waiters (so they join its line) polls `svc`.
 */
let check: TestService;
let ref: any;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' });
  check = await startSecondInstance(svc, { QUEUE_CLAIM_WORK_POLL_S: CHECK_POLL_S });
  ref = await (await fetch(`${svc.rootUrl}/api/references/queue/v1/api.json`)).json();
});
afterAll(async () => {
  await check?.close();
  await svc?.close();
});

/** Polls a worker makes after the one that was waiting when the clock moved, should that one end first on a busy machine. */
const RETRY_POLLS = 5;

/** A Queue client with the served reference's methods (root credentials unless given). */
const queue = (opts: Record<string, unknown> = {}) =>
  new (svc.tc.createClient(ref, 'queue'))({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0, ...opts });

describe('changeTaskPriority', () => {
  test('a waiting worker gets the re-prioritized task next', async () => {
    const tq = uniqueQueue();
    const first = slugid();
    const second = slugid();
    await svc.queue().createTask(first, taskDef(tq, { priority: 'low' }));
    await svc.queue().createTask(second, taskDef(tq, { priority: 'low' }));
    const r = await queue().changeTaskPriority(second, { newPriority: 'highest' });
    expect(r.status).toMatchObject({ taskId: second, priority: 'highest', state: 'pending' });
    expect((await queue().task(second)).priority).toBe('highest');
    // Without the change, `first` (created earlier at the same priority) would come first.
    await claimOne(svc, tq, second, W1);
    await claimOne(svc, tq, first, W2);
    expect(await claim(check, tq, W1, 1)).toEqual([]);
  });

  test('lowering a priority lets other tasks go first', async () => {
    const tq = uniqueQueue();
    const a = slugid();
    const b = slugid();
    await svc.queue().createTask(a, taskDef(tq, { priority: 'high' }));
    await svc.queue().createTask(b, taskDef(tq, { priority: 'medium' }));
    await queue().changeTaskPriority(a, { newPriority: 'lowest' });
    await claimOne(svc, tq, b, W1);
    await claimOne(svc, tq, a, W1);
  });

  test('a running run keeps its claim; its retry is queued at the new priority', async () => {
    const { tq, taskId, wq } = await runningTask(svc, { priority: 'lowest' });
    const other = slugid();
    await svc.queue().createTask(other, taskDef(tq, { priority: 'medium' }));
    const r = await queue().changeTaskPriority(taskId, { newPriority: 'very-high' });
    expect(r.status.runs).toMatchObject([{ state: 'running' }]);
    await wq.reclaimTask(taskId, 0);
    await wq.reportException(taskId, 0, { reason: 'worker-shutdown' });
    // The retry run overtakes the medium task.
    const c = await claimOne(svc, tq, taskId, W2);
    expect(c.runId).toBe(1);
    expect(c.task.priority).toBe('very-high');
  });

  test('an unscheduled task keeps the new priority for when it is scheduled', async () => {
    const tq = uniqueQueue();
    const dep = slugid();
    const taskId = slugid();
    await svc.queue().createTask(dep, taskDef(uniqueQueue()));
    await svc.queue().createTask(taskId, taskDef(tq, { dependencies: [dep], priority: 'lowest' }));
    await queue().changeTaskPriority(taskId, { newPriority: 'high' });
    const s = (await svc.queue().scheduleTask(taskId)).status;
    expect(s).toMatchObject({ state: 'pending', priority: 'high' });
    const c = await claimOne(svc, tq, taskId);
    expect(c.status.priority).toBe('high');
  });

  test('repeating the same change is a no-op; createTask with the original definition stays idempotent', async () => {
    const tq = uniqueQueue();
    const taskId = slugid();
    const def = taskDef(tq, { priority: 'low' });
    await svc.queue().createTask(taskId, def);
    await queue().changeTaskPriority(taskId, { newPriority: 'high' });
    const again = await queue().changeTaskPriority(taskId, { newPriority: 'high' });
    expect(again.status.priority).toBe('high');
    expect((await svc.queue().createTask(taskId, def)).status.priority).toBe('high');
    await claimOne(svc, tq, taskId);
  });

  test('bad input and invalid use: 400, 404, 409, 403', async () => {
    const { taskId, wq } = await runningTask(svc);
    await expectError(queue().changeTaskPriority(taskId, { newPriority: 'normal' }), 400, 'InputValidationError');
    await expectError(queue().changeTaskPriority(taskId, {}), 400, 'InputValidationError');
    await expectError(queue().changeTaskPriority(slugid(), { newPriority: 'high' }), 404, 'ResourceNotFound');
    await wq.reportCompleted(taskId, 0);
    await expectError(queue().changeTaskPriority(taskId, { newPriority: 'high' }), 409, 'RequestConflict');
    await expectError(
      queue({ authorizedScopes: ['queue:change-task-priority:someOtherTask'] }).changeTaskPriority(taskId, { newPriority: 'high' }),
      403,
      'InsufficientScopes',
    );
  });

  test('scopes: the task id or its task queue', async () => {
    const tq = uniqueQueue();
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(tq));
    const byTask = await queue({ authorizedScopes: [`queue:change-task-priority:${taskId}`] }).changeTaskPriority(taskId, { newPriority: 'low' });
    expect(byTask.status.priority).toBe('low');
    const byQueue = await queue({ authorizedScopes: [`queue:change-task-priority-in-queue:${tq}`] }).changeTaskPriority(taskId, { newPriority: 'high' });
    expect(byQueue.status.priority).toBe('high');
  });
});

/**
 * `count` claims from the next pending runs, by as many claimWork calls (of the ones still wanted)
 * as it takes. claimWork answers up to `tasks` claims: an ambiguous queue put leaves a second copy
 * of a hint (as on Azure), and a batch that leases both copies of one run claims it once and
 * answers short; a worker then asks again. Each call must claim something (a pending run remains).
 */
async function claimEach(taskQueueId: string, count: number): Promise<any[]> {
  const out: any[] = [];
  while (out.length < count) {
    const got = await claim(svc, taskQueueId, W1, count - out.length);
    expect(got.length).toBeGreaterThan(0);
    out.push(...got);
  }
  return out;
}

describe('changeTaskGroupPriority', () => {
  test('changes every unresolved task of the group', async () => {
    const tq = uniqueQueue();
    const taskGroupId = slugid();
    const [a, b, done] = [slugid(), slugid(), slugid()];
    for (const id of [done, a, b]) await svc.queue().createTask(id, taskDef(tq, { taskGroupId, priority: 'lowest' }));
    const c = await claimOne(svc, tq, done);
    await svc.queue(c.credentials).reportCompleted(done, 0);
    const other = slugid();
    await svc.queue().createTask(other, taskDef(tq, { priority: 'medium' }));
    const r = await queue().changeTaskGroupPriority(taskGroupId, { newPriority: 'very-high' });
    expect(r).toMatchObject({ taskGroupId, schedulerId: '-', newPriority: 'very-high', tasksAffected: 2 });
    expect([...r.taskIds].sort()).toEqual([a, b].sort());
    expect((await status(svc, done)).priority).toBe('lowest');
    const first = (await claimEach(tq, 2)).map((x: any) => x.status.taskId);
    expect(first.sort()).toEqual([a, b].sort());
    await claimOne(svc, tq, other);
  });

  test('needs queue:change-task-group-priority:<schedulerId>/<taskGroupId>; unknown group 404; bad priority 400', async () => {
    const taskGroupId = slugid();
    await svc.queue().createTask(slugid(), taskDef(uniqueQueue(), { taskGroupId }));
    await expectError(
      queue({ authorizedScopes: [`queue:change-task-group-priority:other/${taskGroupId}`] }).changeTaskGroupPriority(taskGroupId, { newPriority: 'high' }),
      403,
      'InsufficientScopes',
    );
    const r = await queue({ authorizedScopes: [`queue:change-task-group-priority:-/${taskGroupId}`] }).changeTaskGroupPriority(taskGroupId, {
      newPriority: 'high',
    });
    expect(r.tasksAffected).toBe(1);
    await expectError(queue().changeTaskGroupPriority(slugid(), { newPriority: 'high' }), 404, 'ResourceNotFound');
    await expectError(queue().changeTaskGroupPriority(taskGroupId, { newPriority: 'urgent' }), 400, 'InputValidationError');
  });
});

describe('declareWorkerGone', () => {
  test("the worker's running runs resolve at once as exception/worker-shutdown and are retried", async () => {
    const tq = uniqueQueue();
    const [prov, wt] = tq.split('/');
    const retried = slugid();
    const final = slugid();
    const others = slugid();
    await svc.queue().createTask(retried, taskDef(tq, { retries: 1 }));
    await svc.queue().createTask(final, taskDef(tq, { retries: 0 }));
    const mine = await claim(svc, tq, W1, 2);
    expect(mine).toHaveLength(2);
    await svc.queue().createTask(others, taskDef(tq));
    await claimOne(svc, tq, others, W2);

    const r = await queue().declareWorkerGone(prov, wt, W1.workerGroup, W1.workerId);
    expect(r).toMatchObject({ taskQueueId: tq, ...W1 });
    expect(r.resolved.map((x: any) => `${x.taskId}/${x.runId}`).sort()).toEqual([`${retried}/0`, `${final}/0`].sort());
    expect(await runSummary(svc, retried)).toEqual(['exception/worker-shutdown', 'pending']);
    expect(await runSummary(svc, final)).toEqual(['exception/worker-shutdown']);
    expect(await runSummary(svc, others)).toEqual(['running']);
    // The retry is claimable at once, by another worker.
    const c = await claimOne(svc, tq, retried, W2);
    expect([c.runId, c.status.runs[1].reasonCreated]).toEqual([1, 'retry']);
    // The gone worker's late reports and reclaims are refused.
    const late = mine.find((x: any) => x.status.taskId === final);
    await expectError(svc.queue(late.credentials).reportCompleted(final, 0), 409, 'RequestConflict');
    await expectError(svc.queue(late.credentials).reclaimTask(final, 0), 409, 'RequestConflict');
    // Repeating the call resolves nothing more.
    expect((await queue().declareWorkerGone(prov, wt, W1.workerGroup, W1.workerId)).resolved).toEqual([]);
  });

  test('needs queue:declare-worker-gone:<provisionerId>/<workerType>/<workerGroup>/<workerId>', async () => {
    const { tq, taskId } = await runningTask(svc);
    const [prov, wt] = tq.split('/');
    const scoped = (s: string) => queue({ authorizedScopes: [s] }).declareWorkerGone(prov, wt, W1.workerGroup, W1.workerId);
    await expectError(scoped(`queue:declare-worker-gone:${prov}/${wt}/${W1.workerGroup}/other`), 403, 'InsufficientScopes');
    expect(await runSummary(svc, taskId)).toEqual(['running']);
    const r = await scoped(`queue:declare-worker-gone:${prov}/${wt}/*`);
    expect(r.resolved).toEqual([{ taskId, runId: 0 }]);
  });

  test('an unknown worker: nothing to resolve', async () => {
    const r = await queue().declareWorkerGone('prov', 'nobody', 'wg', 'ghost');
    expect(r.resolved).toEqual([]);
  });
});

describe('delayed start (notBefore)', () => {
  const DELAY_MS = 3000;

  test('the task is pending but scheduled for later; nobody gets it before notBefore, a waiting worker gets it after', async () => {
    const tq = uniqueQueue();
    const taskId = slugid();
    const notBefore = new Date(clock.ms() + DELAY_MS).toJSON();
    const created = await svc.queue().createTask(taskId, taskDef(tq, { notBefore }));
    expect(created.status).toMatchObject({ state: 'pending', runs: [{ runId: 0, state: 'pending', scheduled: notBefore }] });
    expect((await svc.queue().task(taskId)).notBefore).toBe(notBefore);
    expect(await claim(check, tq, W1, 1)).toEqual([]);
    await expectError(svc.queue().claimTask(taskId, 0, W1), 409, 'RequestConflict');
    // A worker waiting in claimWork (1 s polls) picks it up once it is due, without a reaper pass.
    const waiting = claim(svc, tq, W1, 1);
    await passTime(DELAY_MS);
    let c = await waiting;
    for (let i = 0; !c.length && i < RETRY_POLLS; i++) c = await claim(svc, tq, W1, 1);
    expect(c.map((x) => x.status.taskId)).toEqual([taskId]);
    expect(clock.ms()).toBeGreaterThanOrEqual(new Date(notBefore).getTime());
  });

  test('a task without notBefore is unaffected; one whose notBefore has passed starts at once', async () => {
    const tq = uniqueQueue();
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(tq, { notBefore: new Date(Date.now() - 1000).toJSON() }));
    await claimOne(svc, tq, taskId);
  });

  test('with dependencies, the task waits for both', async () => {
    const tq = uniqueQueue();
    const { taskId: dep, wq } = await runningTask(svc);
    const taskId = slugid();
    const notBefore = new Date(Date.now() + 60_000).toJSON();
    await svc.queue().createTask(taskId, taskDef(tq, { dependencies: [dep], notBefore }));
    await wq.reportCompleted(dep, 0);
    const s = await status(svc, taskId);
    expect(s.runs).toMatchObject([{ state: 'pending', scheduled: notBefore }]);
    expect(await claim(check, tq, W1, 1)).toEqual([]);
  });

  test('a priority change keeps the delay', async () => {
    const tq = uniqueQueue();
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(tq, { notBefore: new Date(Date.now() + 60_000).toJSON() }));
    await queue().changeTaskPriority(taskId, { newPriority: 'highest' });
    expect(await claim(check, tq, W1, 1)).toEqual([]);
  });

  test('notBefore at or after the deadline, or not a date: 400', async () => {
    const deadline = new Date(Date.now() + 3600_000).toJSON();
    await expectError(svc.queue().createTask(slugid(), taskDef(uniqueQueue(), { deadline, notBefore: deadline })), 400, 'InputError');
    await expectError(svc.queue().createTask(slugid(), taskDef(uniqueQueue(), { notBefore: 'tomorrow' })), 400, 'InputValidationError');
  });
});

describe('concurrency keys', () => {
  let n = 0;
  const uniqueKey = () => `key-${Date.now()}-${n++}`;
  const running = async (ids: string[]) => (await Promise.all(ids.map((id) => status(svc, id)))).filter((s) => s.state === 'running').map((s) => s.taskId);

  test('two workers racing for one key: only one holds it; the other task runs once it is released', async () => {
    const tq = uniqueQueue();
    const key = uniqueKey();
    const [a, b] = [slugid(), slugid()];
    await svc.queue().createTask(a, taskDef(tq, { concurrencyKey: key }));
    await svc.queue().createTask(b, taskDef(tq, { concurrencyKey: key }));
    expect((await svc.queue().task(a)).concurrencyKey).toBe(key);
    const [c1, c2] = await Promise.all([claim(svc, tq, W1, 2), claim(svc, tq, W2, 2)]);
    const claims = [...c1, ...c2];
    expect(claims).toHaveLength(1);
    const holder = claims[0].status.taskId;
    const other = holder === a ? b : a;
    const k = await queue().concurrencyKey(key);
    expect(k).toMatchObject({ concurrencyKey: key, holder: { taskId: holder, runId: 0 }, waiting: [{ taskId: other, runId: 0 }] });
    expect(await claim(svc, tq, W2, 2)).toEqual([]);
    await svc.queue(claims[0].credentials).reportCompleted(holder, 0);
    const next = await claimOne(svc, tq, other, W2);
    expect((await queue().concurrencyKey(key)).holder).toMatchObject({ taskId: other, runId: next.runId });
  });

  test('many workers, many tasks of one key: never two running at once, all finish', async () => {
    const tq = uniqueQueue();
    const key = uniqueKey();
    const ids = Array.from({ length: 6 }, () => slugid());
    for (const id of ids) await svc.queue().createTask(id, taskDef(tq, { concurrencyKey: key }));
    const workers = Array.from({ length: 6 }, (_, i) => ({ workerGroup: 'wg', workerId: `race-${i}` }));
    for (let round = 0; round < ids.length; round++) {
      const got = (await Promise.all(workers.map((w) => claim(svc, tq, w, 3)))).flat();
      expect(got).toHaveLength(1);
      expect(await running(ids)).toEqual([got[0].status.taskId]);
      await svc.queue(got[0].credentials).reportCompleted(got[0].status.taskId, got[0].runId);
    }
    expect((await Promise.all(ids.map((id) => status(svc, id)))).map((s) => s.state)).toEqual(ids.map(() => 'completed'));
    expect(await queue().concurrencyKey(key)).toEqual({ concurrencyKey: key, waiting: [] });
  });

  test('waiters go in priority, then creation order', async () => {
    const tq = uniqueQueue();
    const key = uniqueKey();
    const { taskId: first, wq } = await runningTask(svc, { concurrencyKey: key });
    const firstQueue = (await status(svc, first)).taskQueueId;
    const [low1, high, low2] = [slugid(), slugid(), slugid()];
    await svc.queue().createTask(low1, taskDef(tq, { concurrencyKey: key, priority: 'low' }));
    await svc.queue().createTask(high, taskDef(tq, { concurrencyKey: key, priority: 'low' }));
    await svc.queue().createTask(low2, taskDef(tq, { concurrencyKey: key, priority: 'low' }));
    // Polls that meet every hint (one look hands out one priority's): each waiter joins the line.
    expect(await claim(svc, tq, W1, 3)).toEqual([]);
    await queue().changeTaskPriority(high, { newPriority: 'high' });
    // A priority change of a waiter gives it a fresh hint; it waits again, now ahead of the others.
    expect(await claim(svc, tq, W1, 3)).toEqual([]);
    expect((await queue().concurrencyKey(key)).waiting.map((w: any) => w.taskId)).toEqual([high, low1, low2]);
    expect(firstQueue).not.toBe(tq);
    await wq.reportCompleted(first, 0);
    for (const id of [high, low1, low2]) {
      const c = await claimOne(svc, tq, id, W2);
      await svc.queue(c.credentials).reportCompleted(id, 0);
    }
  });

  test('released on every resolution path (exception with retry, cancel, worker gone, completed); a retry keeps its place in line', async () => {
    const tq = uniqueQueue();
    const [prov, wt] = tq.split('/');
    const key = uniqueKey();
    const [a, b, c] = [slugid(), slugid(), slugid()];
    const one = async (w = W1) => {
      const got = await claim(svc, tq, w, 3);
      expect(got).toHaveLength(1);
      return got[0];
    };
    await svc.queue().createTask(a, taskDef(tq, { concurrencyKey: key }));
    const a0 = await one();
    await svc.queue().createTask(b, taskDef(tq, { concurrencyKey: key }));
    await svc.queue().createTask(c, taskDef(tq, { concurrencyKey: key }));
    expect(await claim(svc, tq, W1, 3)).toEqual([]);
    // Exception with a retry: a was created first, so its retry goes first.
    await svc.queue(a0.credentials).reportException(a, 0, { reason: 'worker-shutdown' });
    expect([(await one()).status.taskId, 1]).toEqual([a, 1]);
    await svc.queue().cancelTask(a);
    const b0 = await one(W2);
    expect(b0.status.taskId).toBe(b);
    await queue().declareWorkerGone(prov, wt, W2.workerGroup, W2.workerId);
    const b1 = await one();
    expect([b1.status.taskId, b1.runId]).toEqual([b, 1]);
    await svc.queue(b1.credentials).reportCompleted(b, 1);
    expect((await one()).status.taskId).toBe(c);
    expect(await runSummary(svc, a)).toEqual(['exception/worker-shutdown', 'exception/canceled']);
  });

  test("a late release by an old holder never frees a newer holder's key (runId and hint as fencing token)", async () => {
    const tq = uniqueQueue();
    const [prov, wt] = tq.split('/');
    const key = uniqueKey();
    const [a, b] = [slugid(), slugid()];
    await svc.queue().createTask(a, taskDef(tq, { concurrencyKey: key, retries: 0 }));
    await svc.queue().createTask(b, taskDef(tq, { concurrencyKey: key, retries: 0 }));
    // Either may win the first claim (one batch, side by side); the other is the newer holder.
    const [ca] = await claim(svc, tq, W1, 2);
    const old = ca.status.taskId;
    const newer = old === a ? b : a;
    await queue().declareWorkerGone(prov, wt, W1.workerGroup, W1.workerId);
    const cb = await claimOne(svc, tq, newer, W2);
    // The old holder's report is refused, and replaying its release changes nothing.
    await expectError(svc.queue(ca.credentials).reportCompleted(old, 0), 409, 'RequestConflict');
    await releaseKey(svc.services, key, old, 0, rehinter(svc.services));
    expect((await queue().concurrencyKey(key)).holder).toMatchObject({ taskId: newer, runId: cb.runId });
  });

  test('a key leaked by a crash (holder resolved, release lost) is recovered when the next task asks', async () => {
    const tq = uniqueQueue();
    const key = uniqueKey();
    const [a, b] = [slugid(), slugid()];
    await svc.queue().createTask(a, taskDef(tq, { concurrencyKey: key }));
    expect(await claim(svc, tq, W1, 1)).toHaveLength(1);
    // Resolve a without its release effect, as a crash right after the write would.
    const t = (await svc.services.tasks.load(a))!;
    const next = structuredClone(t);
    Object.assign(next.runs[0], { state: 'completed', reasonResolved: 'completed', resolved: new Date().toJSON() });
    next.takenUntil = '';
    expect(await svc.services.tasks.replace(t, next)).toBe('written');
    expect((await queue().concurrencyKey(key)).holder).toMatchObject({ taskId: a });
    await svc.queue().createTask(b, taskDef(tq, { concurrencyKey: key }));
    await claimOne(svc, tq, b, W2);
    expect((await queue().concurrencyKey(key)).holder).toMatchObject({ taskId: b });
  });

  test('bad key shapes: 400', async () => {
    await expectError(svc.queue().createTask(slugid(), taskDef(uniqueQueue(), { concurrencyKey: 'has space' })), 400, 'InputValidationError');
    await expectError(svc.queue().createTask(slugid(), taskDef(uniqueQueue(), { concurrencyKey: '' })), 400, 'InputValidationError');
    await expectError(svc.queue().createTask(slugid(), taskDef(uniqueQueue(), { concurrencyKey: 'x'.repeat(101) })), 400, 'InputValidationError');
    await expectError(queue().concurrencyKey('a%20b'), 400);
  });
});

describe('suspend and resume', () => {
  test('a task suspended three times, resumed on different workers, finishes with its accumulated state', async () => {
    const tq = uniqueQueue();
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(tq, { retries: 1 }));
    let c = await claimOne(svc, tq, taskId, W1);
    expect(c).not.toHaveProperty('continuation');
    const workers = [W2, W1, W2];
    for (let i = 0; i < 3; i++) {
      const state = { steps: [...(c.continuation?.steps ?? []), `step-${i}`] };
      const s = await queue({ credentials: c.credentials }).suspendRun(taskId, c.runId, { continuation: state });
      expect(s.status.state).toBe('pending');
      expect(s.status.runs.slice(-2)).toMatchObject([
        { runId: c.runId, state: 'exception', reasonResolved: 'suspended' },
        { runId: c.runId + 1, state: 'pending', reasonCreated: 'resumed' },
      ]);
      c = await claimOne(svc, tq, taskId, workers[i]);
      expect(c.continuation).toEqual(state);
    }
    expect(c.continuation).toEqual({ steps: ['step-0', 'step-1', 'step-2'] });
    const done = await svc.queue(c.credentials).reportCompleted(taskId, c.runId);
    expect(done.status.runs.map((r: any) => `${r.state}/${r.reasonResolved}`)).toEqual([
      'exception/suspended',
      'exception/suspended',
      'exception/suspended',
      'completed/completed',
    ]);
    // Suspensions do not use up retries.
    expect(done.status.retriesLeft).toBe(1);
  });

  test('resumeAt delays the resumed run; a repeat of the same suspension is idempotent', async () => {
    const { tq, taskId, c, wq } = await runningTask(svc);
    const q = queue({ credentials: c.credentials });
    const resumeAt = new Date(clock.ms() + 2000).toJSON();
    const s = await q.suspendRun(taskId, 0, { continuation: 'later', resumeAt });
    expect(s.status.runs[1]).toMatchObject({ state: 'pending', reasonCreated: 'resumed', scheduled: resumeAt });
    expect((await q.suspendRun(taskId, 0, { continuation: 'later', resumeAt })).status.runs).toHaveLength(2);
    expect(await claim(check, tq, W1, 1)).toEqual([]);
    const waiting = claim(svc, tq, W1, 1);
    await passTime(2000);
    let got = await waiting;
    for (let i = 0; !got.length && i < RETRY_POLLS; i++) got = await claim(svc, tq, W1, 1);
    expect(got[0]).toMatchObject({ runId: 1, continuation: 'later' });
    void wq;
  });

  test('invalid use: not the holder 403, not running 409, past the deadline 400, too large 400, no continuation 400', async () => {
    const { taskId, c } = await runningTask(svc);
    const q = queue({ credentials: c.credentials });
    const other = await runningTask(svc);
    await expectError(q.suspendRun(other.taskId, 0, { continuation: 1 }), 403, 'InsufficientScopes');
    await expectError(q.suspendRun(taskId, 0, {}), 400, 'InputValidationError');
    const deadline = (await status(svc, taskId)).deadline;
    await expectError(q.suspendRun(taskId, 0, { continuation: 1, resumeAt: new Date(new Date(deadline).getTime() + 1000).toJSON() }), 400, 'InputError');
    await expectError(q.suspendRun(taskId, 0, { continuation: 'x'.repeat(17 * 1024) }), 400, 'InputError');
    await svc.queue(c.credentials).reportCompleted(taskId, 0);
    await expectError(q.suspendRun(taskId, 0, { continuation: 1 }), 409, 'RequestConflict');
  });

  test('a retry of a resumed run (its worker died) gets the continuation too; a rerun, and its retries, start over', async () => {
    const { tq, taskId, c } = await runningTask(svc);
    await queue({ credentials: c.credentials }).suspendRun(taskId, 0, { continuation: { done: ['a'] } });
    const resumed = await claimOne(svc, tq, taskId, W1);
    await svc.queue(resumed.credentials).reportException(taskId, 1, { reason: 'worker-shutdown' });
    const retry = await claimOne(svc, tq, taskId, W2);
    expect(retry).toMatchObject({ runId: 2, continuation: { done: ['a'] } });
    expect(retry.status.runs[2].reasonCreated).toBe('retry');
    await svc.queue(retry.credentials).reportCompleted(taskId, 2);
    await svc.queue().rerunTask(taskId);
    const rerun = await claimOne(svc, tq, taskId, W1);
    expect(rerun.runId).toBe(3);
    expect(rerun).not.toHaveProperty('continuation');
    await svc.queue(rerun.credentials).reportException(taskId, 3, { reason: 'worker-shutdown' });
    expect(await claimOne(svc, tq, taskId, W2)).not.toHaveProperty('continuation');
  });

  test('a suspended keyed task gives its key up while it waits', async () => {
    const tq = uniqueQueue();
    const key = `key-suspend-${Date.now()}`;
    const [a, b] = [slugid(), slugid()];
    await svc.queue().createTask(a, taskDef(tq, { concurrencyKey: key }));
    const ca = await claimOne(svc, tq, a, W1);
    await svc.queue().createTask(b, taskDef(tq, { concurrencyKey: key }));
    expect(await claim(check, tq, W2, 1)).toEqual([]);
    await queue({ credentials: ca.credentials }).suspendRun(a, 0, { continuation: {}, resumeAt: new Date(Date.now() + 60_000).toJSON() });
    await claimOne(svc, tq, b, W2);
  });
});

describe('operator views of keys and suspended runs', () => {
  test('who holds a key (its run state and worker) and who waits, in order; held keys are listed, paged', async () => {
    const tq = uniqueQueue();
    const key = `key-view-${Date.now()}`;
    const [a, b, c] = [slugid(), slugid(), slugid()];
    await svc.queue().createTask(a, taskDef(tq, { concurrencyKey: key }));
    const ca = await claimOne(svc, tq, a, W1);
    await svc.queue().createTask(b, taskDef(tq, { concurrencyKey: key }));
    await svc.queue().createTask(c, taskDef(tq, { concurrencyKey: key }));
    expect(await claim(svc, tq, W2, 2)).toEqual([]);
    expect(await queue().concurrencyKey(key)).toEqual({
      concurrencyKey: key,
      holder: { taskId: a, runId: 0, since: expect.any(String), state: 'running', ...W1 },
      waiting: [
        { taskId: b, runId: 0, priority: 'lowest', created: expect.any(String) },
        { taskId: c, runId: 0, priority: 'lowest', created: expect.any(String) },
      ],
    });

    /** Every held key, two per page. */
    const held = async () => {
      const out: any[] = [];
      let token: string | undefined;
      do {
        const r = await queue().listConcurrencyKeys({ limit: 2, ...(token ? { continuationToken: token } : {}) });
        expect(r.concurrencyKeys.length).toBeLessThanOrEqual(2);
        out.push(...r.concurrencyKeys);
        token = r.continuationToken;
      } while (token);
      return out.filter((k) => k.concurrencyKey === key);
    };
    expect(await held()).toEqual([{ concurrencyKey: key, holder: { taskId: a, runId: 0, since: expect.any(String) } }]);
    await svc.queue(ca.credentials).reportCompleted(a, 0);
    expect(await held()).toEqual([]);
    await claimOne(svc, tq, b, W2);
    expect(await held()).toEqual([{ concurrencyKey: key, holder: { taskId: b, runId: 0, since: expect.any(String) } }]);
    expect((await queue().concurrencyKey(key)).waiting.map((w: any) => w.taskId)).toEqual([c]);
  });

  test('listConcurrencyKeys needs queue:list-concurrency-keys; a bad limit or token is 400', async () => {
    expect((await queue({ authorizedScopes: ['queue:list-concurrency-keys'] }).listConcurrencyKeys({ limit: 1 })).concurrencyKeys).toEqual(expect.any(Array));
    await expectError(queue({ authorizedScopes: ['queue:get-concurrency-key:*'] }).listConcurrencyKeys(), 403, 'InsufficientScopes');
    await expectError(queue().listConcurrencyKeys({ limit: 'many' }), 400);
    await expectError(queue().listConcurrencyKeys({ continuationToken: 'not-a-token' }), 400);
  });

  test('state counts show delayed and suspended pending runs; the pending list shows resumed runs', async () => {
    const opsRef = await (await fetch(`${svc.rootUrl}/api/queue/v1/ops/reference`)).json();
    const ops = new (svc.tc.createClient(opsRef, 'QueueOps'))({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
    const tq = uniqueQueue();
    const later = new Date(Date.now() + 600_000).toJSON();
    const [plain, delayed, suspendedLater, suspendedNow] = [slugid(), slugid(), slugid(), slugid()];
    await svc.queue().createTask(suspendedLater, taskDef(tq));
    await svc.queue().createTask(suspendedNow, taskDef(tq));
    const claims = await claimEach(tq, 2);
    for (const c of claims) {
      const resumeAt = c.status.taskId === suspendedLater ? later : undefined;
      await queue({ credentials: c.credentials }).suspendRun(c.status.taskId, 0, { continuation: { n: 1 }, ...(resumeAt ? { resumeAt } : {}) });
    }
    await svc.queue().createTask(plain, taskDef(tq));
    await svc.queue().createTask(delayed, taskDef(tq, { notBefore: later }));
    const { counts } = await ops.taskQueueStateCounts(tq);
    // Of 4 pending: 2 not due (the delayed start, the later resumption), 2 resumed after a suspension.
    expect(counts).toEqual({ unscheduled: 0, pending: 4, delayed: 2, suspended: 2, running: 0, completed: 0, failed: 0, exception: 2 });
    // A page of an API list may end short with a continuation (as an Azure query page does): read to the end, as a client would.
    const pending: any[] = [];
    let continuationToken: string | undefined;
    do {
      const r = await ops.listTaskQueueTasks(tq, { state: 'pending', ...(continuationToken ? { continuationToken } : {}) });
      pending.push(...r.tasks);
      continuationToken = r.continuationToken;
    } while (continuationToken);
    expect(Object.fromEntries(pending.map((t: any) => [t.taskId, [t.runId, t.reasonCreated]]))).toEqual({
      [plain]: [0, 'scheduled'],
      [delayed]: [0, 'scheduled'],
      [suspendedLater]: [1, 'resumed'],
      [suspendedNow]: [1, 'resumed'],
    });
  });
});
