/**
 * Where Taskcluster v106's own suites saw this service differ, pinned through taskcluster-client
 * (v87) with `QueueEvents` / `HooksEvents` bindings: the payloads of queue events, repeats that
 * publish again (same event ids), object artifacts announced when they become visible, the index's
 * expired entries and redirects for tasks of another queue, the hooks' exchanges, hookIds with `/`,
 * triggerHook's `taskId` in the payload and its reply, the bindings denylist and Taskcluster's wording
 * of pattern errors.
 */
import { startTestService, TestService, taskDef, slugid, expectError } from '../helpers/service';
import { claimOne, runningTask, uniqueQueue, uploadObject } from '../helpers/work';
import { eventsClient, drainSubscription, short, DeliveredEvent } from '../helpers/events';
import { resolveDeadline } from '../../shared/lifecycle/resolve';
import { duplicatedPuts } from '../helpers/ambiguity';

/** A subscription's events, each once: on Azure an ambiguous queue put leaves a second copy, and consumers drop repeats by id. */
async function drainUnique(sub: Parameters<typeof drainSubscription>[0]): Promise<DeliveredEvent[]> {
  return [...new Map((await drainSubscription(sub)).map((e) => [e.id, e])).values()];
}

let svc: TestService;
let qe: any;
let he: any;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' });
  qe = new svc.tc.QueueEvents({ rootUrl: svc.rootUrl });
  he = new svc.tc.HooksEvents({ rootUrl: svc.rootUrl });
  await svc.auth().createRole('anonymous', { description: 'public artifacts', scopes: ['queue:get-artifact:public/*'] });
  await svc.auth().createRole('hook-id:parity/*', { description: 'parity hooks', scopes: ['queue:create-task:*', 'queue:scheduler-id:*'] });
});
afterAll(async () => svc?.close());

const inADay = () => new Date(Date.now() + 24 * 3600_000).toJSON();
const inAnHour = () => new Date(Date.now() + 3600_000).toJSON();

/** expectError, and the message says `message`. */
async function expectErrorSaying(p: Promise<unknown>, statusCode: number, code: string, message: RegExp): Promise<void> {
  const err = await expectError(p, statusCode, code);
  expect(err.message).toMatch(message);
}

/** A client of a service built from the reference this service serves (its routes' query parameters included). */
async function servedClient(service: string, credentials: unknown = svc.root): Promise<any> {
  const ref = await (await fetch(`${svc.rootUrl}/api/references/${service}/v1/api.json`)).json();
  return new (svc.tc.createClient(ref, service))({ rootUrl: svc.rootUrl, credentials: credentials ?? undefined, retries: 0 });
}

/** The events of task `taskId` on `exchange`, in arrival order. */
const on = (events: DeliveredEvent[], taskId: string, exchange: string) =>
  events.filter((e) => e.payload.status?.taskId === taskId && short(e.exchange) === exchange);

describe('queue events', () => {
  const tags = { team: 'parity' };
  const [A, B, C, D, E] = [slugid(), slugid(), slugid(), slugid(), slugid()];
  let events: DeliveredEvent[];
  /** Copies of an event its delivery stored twice (a queue put whose answer was lost; on Azure too), by event id. */
  let extraCopies: (id: string) => number;
  /** A task graph, its calls repeated once each, and the events a QueueEvents subscription received. */
  beforeAll(async () => {
    const ev = eventsClient(svc);
    const taskGroupId = slugid();
    const sub = await ev.createSubscription(`parity-${taskGroupId}`, {
      bindings: ['taskDefined', 'taskPending', 'taskRunning', 'taskCompleted', 'taskFailed', 'taskException'].map((m) => qe[m]({ taskGroupId })),
      expires: inADay(),
    });
    const def = (tq: string, extra: Record<string, unknown> = {}) => taskDef(tq, { taskGroupId, tags, ...extra });
    const tqA = uniqueQueue();
    const defA = def(tqA);
    await svc.queue().createTask(A, defA);
    await svc.queue().createTask(A, defA); // an idempotent repeat
    const a = await claimOne(svc, tqA, A);
    await svc.queue(a.credentials).reportCompleted(A, 0);
    await svc.queue(a.credentials).reportCompleted(A, 0);

    await svc.queue().createTask(B, def(uniqueQueue()));
    await svc.queue().cancelTask(B);
    await svc.queue().cancelTask(B);

    const tqC = uniqueQueue();
    await svc.queue().createTask(C, def(tqC));
    const c = await claimOne(svc, tqC, C);
    await svc.queue(c.credentials).reportFailed(C, 0);
    await svc.queue(c.credentials).reportFailed(C, 0);

    const tqD = uniqueQueue();
    await svc.queue().createTask(D, def(tqD));
    const d = await claimOne(svc, tqD, D);
    await svc.queue(d.credentials).reportException(D, 0, { reason: 'malformed-payload' });
    await svc.queue(d.credentials).reportException(D, 0, { reason: 'malformed-payload' });

    // E waits on itself, so it is still unscheduled when its deadline passes (the reaper's step,
    // run here with the service's clock past the deadline).
    const defE = def(uniqueQueue(), { dependencies: [E] });
    await svc.queue().createTask(E, defE);
    const services = svc.services as { now: () => Date };
    const realNow = services.now;
    services.now = () => new Date(new Date(defE.deadline).getTime() + 1000);
    try {
      await resolveDeadline(svc.services, E, defE.deadline);
    } finally {
      services.now = realNow;
    }
    events = await drainSubscription(sub);
    const queue = decodeURIComponent(new URL(sub.signedPollUrl).pathname.split('/').slice(-2)[0]);
    const copies = duplicatedPuts(svc.services.storage).filter((d) => d.queue === queue);
    extraCopies = (id) => copies.filter((d) => (d.body as { id?: string }).id === id).length;
  }, 60_000);

  test('task-defined is the task as defined (unscheduled, no runs); task-pending then says it is pending', () => {
    const [defined] = on(events, A, 'task-defined');
    expect(defined.payload.status).toMatchObject({ taskId: A, state: 'unscheduled', runs: [] });
    expect(defined.payload).not.toHaveProperty('runId');
    expect(defined.payload.task).toEqual({ tags });
    expect(defined.routingKey.split('.')[2]).toBe('_');
    const [pending] = on(events, A, 'task-pending');
    expect(pending.payload.status).toMatchObject({ state: 'pending', runs: [expect.objectContaining({ runId: 0, state: 'pending' })] });
  });

  test('task-running, task-completed, task-failed and task-exception (also at the deadline of an unscheduled task) carry task.tags', () => {
    for (const [taskId, exchange] of [
      [A, 'task-running'],
      [A, 'task-completed'],
      [B, 'task-exception'],
      [C, 'task-failed'],
      [D, 'task-exception'],
      [E, 'task-exception'],
    ]) {
      const [e] = on(events, taskId, exchange);
      expect({ taskId, exchange, task: e?.payload.task }).toEqual({ taskId, exchange, task: { tags } });
    }
    const [deadline] = on(events, E, 'task-exception');
    expect(deadline.payload.status.runs[0]).toMatchObject({ state: 'exception', reasonResolved: 'deadline-exceeded' });
    expect(deadline.payload).not.toHaveProperty('workerId');
  });

  test('an idempotent repeat of createTask, cancelTask or a report publishes its events again, with the same ids', () => {
    for (const [taskId, exchange] of [
      [A, 'task-defined'],
      // The repeat came while run 0 was still pending: its task-pending went out again too, as Taskcluster's.
      [A, 'task-pending'],
      [A, 'task-completed'],
      [B, 'task-exception'],
      [C, 'task-failed'],
      [D, 'task-exception'],
    ]) {
      const got = on(events, taskId, exchange);
      expect({ taskId, exchange, n: got.length }).toEqual({ taskId, exchange, n: 2 + extraCopies(got[0].id) });
      expect(got[1].id).toBe(got[0].id);
      expect(got[1].payload).toEqual(got[0].payload);
    }
    // Nothing else repeats: one claim, one deadline.
    for (const [taskId, exchange] of [
      [A, 'task-running'],
      [E, 'task-exception'],
    ]) {
      const got = on(events, taskId, exchange);
      expect({ taskId, exchange, n: got.length }).toEqual({ taskId, exchange, n: 1 + extraCopies(got[0].id) });
    }
  });

  test('an object artifact is announced by finishArtifact, when it becomes visible', async () => {
    const ev = eventsClient(svc);
    const taskGroupId = slugid();
    const sub = await ev.createSubscription(`objart-${taskGroupId}`, { bindings: [qe.artifactCreated({ taskGroupId })], expires: inADay() });
    const tq = uniqueQueue();
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(tq, { taskGroupId, projectId: 'proj-a' }));
    const w = await claimOne(svc, tq, taskId);
    const wq = svc.queue(w.credentials);
    const data = Buffer.from('object bytes');
    const expires = inAnHour();
    const res = await wq.createArtifact(taskId, 0, 'public/obj.txt', { storageType: 'object', contentType: 'text/plain', expires, contentLength: data.length });
    expect(await drainUnique(sub)).toEqual([]);

    await uploadObject(svc, res, data);
    await wq.finishArtifact(taskId, 0, 'public/obj.txt', { uploadId: res.uploadId });
    const [created, ...rest] = await drainUnique(sub);
    expect(rest).toEqual([]);
    expect(created.payload).toMatchObject({ runId: 0, workerGroup: w.workerGroup, workerId: w.workerId });
    expect(created.payload.artifact).toEqual({ storageType: 'object', name: 'public/obj.txt', expires, contentType: 'text/plain' });
  }, 30_000);
});

describe('index', () => {
  let index: any;
  beforeAll(() => {
    index = new svc.tc.Index({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
  });
  const uniqueNs = () => `parity.n${Math.random().toString(36).slice(2, 10)}`;

  test('insertTask replaces an expired entry whatever its rank', async () => {
    const path = `${uniqueNs()}.latest`;
    const [X, Y] = [slugid(), slugid()];
    await index.insertTask(path, { taskId: X, rank: 10, data: {}, expires: inAnHour() });
    await index.insertTask(path, { taskId: Y, rank: 0, data: {}, expires: inADay() });
    expect((await index.findTask(path)).taskId).toBe(X); // a live entry of higher rank stays
    // Two hours on (the service's clock), X has expired: a lower rank replaces it.
    const services = svc.services as { now: () => Date };
    const realNow = services.now;
    services.now = () => new Date(Date.now() + 2 * 3600_000);
    try {
      const r = await index.insertTask(path, { taskId: Y, rank: 0, data: { v: 2 }, expires: inADay() });
      expect(r).toMatchObject({ taskId: Y, rank: 0, data: { v: 2 } });
      expect((await index.findTask(path)).taskId).toBe(Y);
    } finally {
      services.now = realNow;
    }
    expect(await index.findTask(path)).toMatchObject({ taskId: Y, rank: 0, data: { v: 2 } });
  });

  test("findArtifactFromTask of a task with no run here redirects (303) to the queue's latest-artifact URL", async () => {
    const path = `${uniqueNs()}.elsewhere`;
    const taskId = slugid(); // indexed, but not a task of this queue
    await index.insertTask(path, { taskId, rank: 0, data: {}, expires: inAnHour() });
    // The name is one escaped segment, as Taskcluster's index writes it.
    const queueUrl = (name: string) => `${svc.rootUrl}/api/queue/v1/task/${taskId}/artifacts/${encodeURIComponent(name)}`;

    // A public name: the plain URL (anyone may follow it).
    const pub = await fetch(index.buildSignedUrl(index.findArtifactFromTask, path, 'public/build.txt'), { redirect: 'manual' });
    expect(pub.status).toBe(303);
    expect(pub.headers.get('location')).toBe(queueUrl('public/build.txt'));

    // Another name: signed for that name, so the queue answers it (here: no such task), not 403.
    const priv = await fetch(index.buildSignedUrl(index.findArtifactFromTask, path, 'private/key.txt'), { redirect: 'manual' });
    expect(priv.status).toBe(303);
    const location = priv.headers.get('location')!;
    expect(location.startsWith(`${queueUrl('private/key.txt')}?bewit=`)).toBe(true);
    const followed = await fetch(location, { redirect: 'manual' });
    expect(followed.status).toBe(404);
    expect((await followed.json()).code).toBe('ResourceNotFound');
    // The signature reaches that one name only.
    const other = await fetch(location.replace('private%2Fkey.txt', 'private%2Fother.txt'), { redirect: 'manual' });
    expect(other.status).toBe(401);

    // The queue serves the one-segment form of a name.
    const here = await runningTask(svc);
    const target = 'https://example.com/one-segment.txt';
    await here.wq.createArtifact(here.taskId, 0, 'public/one.txt', { storageType: 'reference', url: target, expires: inAnHour(), contentType: 'text/plain' });
    const served = await fetch(`${svc.rootUrl}/api/queue/v1/task/${here.taskId}/artifacts/public%2Fone.txt`, { redirect: 'manual' });
    expect([served.status, served.headers.get('location')]).toEqual([303, target]);

    // A path nobody indexed is still a 404.
    const missing = await fetch(index.buildSignedUrl(index.findArtifactFromTask, `${uniqueNs()}.none`, 'public/build.txt'), { redirect: 'manual' });
    expect(missing.status).toBe(404);
  });
});

describe('hooks', () => {
  let hooks: any;
  beforeAll(async () => {
    hooks = await servedClient('hooks');
  });
  const hookDef = (overrides: Record<string, unknown> = {}) => ({
    metadata: { name: 'parity', description: 'a parity hook', owner: 'tester@example.com' },
    task: {
      taskQueueId: uniqueQueue(),
      payload: {},
      metadata: { name: 'hook task', description: 'made by a hook', owner: 'tester@example.com', source: 'https://example.com/hook' },
    },
    ...overrides,
  });

  test('hook-created, hook-updated and hook-deleted reach HooksEvents bindings', async () => {
    const ev = eventsClient(svc);
    const sub = await ev.createSubscription(`hooks-${slugid()}`, { bindings: [he.hookCreated(), he.hookUpdated(), he.hookDeleted()], expires: inADay() });
    const hookId = slugid();
    const def = hookDef();
    await hooks.createHook('parity', hookId, def);
    await hooks.createHook('parity', hookId, def); // a repeat announces it again, as Taskcluster's
    await hooks.updateHook('parity', hookId, hookDef({ schedule: ['0 0 * * *'] }));
    await hooks.removeHook('parity', hookId);
    // Refused changes announce nothing.
    await expectError(hooks.updateHook('parity', hookId, def), 404, 'ResourceNotFound');

    const events = await drainUnique(sub);
    expect(events.map((e) => e.exchange)).toEqual([
      'exchange/taskcluster-hooks/v1/hook-created',
      'exchange/taskcluster-hooks/v1/hook-created',
      'exchange/taskcluster-hooks/v1/hook-updated',
      'exchange/taskcluster-hooks/v1/hook-deleted',
    ]);
    for (const e of events) {
      expect(e.payload).toEqual({ hookGroupId: 'parity', hookId });
      expect(e.routingKey).toBe('_');
      expect(e.routes).toEqual([]);
    }
  });

  test('a hookId may hold "/" (up to 64 characters); other ids are refused in Taskcluster\'s words', async () => {
    const hookId = `nested/${slugid()}/hook`;
    const created = await hooks.createHook('parity', hookId, hookDef());
    expect(created).toMatchObject({ hookGroupId: 'parity', hookId });
    expect((await hooks.hook('parity', hookId)).hookId).toBe(hookId);
    expect((await hooks.listHooks('parity')).hooks.map((h: any) => h.hookId)).toContain(hookId);
    expect((await hooks.triggerHook('parity', hookId, {})).status.taskId).toBeDefined();
    expect((await hooks.listLastFires('parity', hookId)).lastFires).toHaveLength(1);
    await hooks.removeHook('parity', hookId);
    await expectError(hooks.hook('parity', hookId), 404, 'ResourceNotFound');

    await expectErrorSaying(hooks.hook('parity', 'x'.repeat(65)), 400, 'InvalidRequestArguments', /must match regular expression/);
    await expectErrorSaying(hooks.hook('a/b', 'c'), 400, 'InvalidRequestArguments', /URL parameter 'hookGroupId' given as 'a\/b' must match/);
  });

  test("bindings on Taskcluster's default denylist are refused", async () => {
    for (const exchange of ['exchange/taskcluster-queue/v1/task-created', he.hookCreated().exchange]) {
      const bindings = [{ exchange, routingKeyPattern: '#' }];
      await expectErrorSaying(hooks.createHook('parity', slugid(), hookDef({ bindings })), 400, 'InputError', /denied access to hooks/);
    }
    const id = slugid();
    await hooks.createHook('parity', id, hookDef());
    const bindings = [qe.taskCompleted({ taskGroupId: slugid() }), { exchange: he.hookDeleted().exchange, routingKeyPattern: '#' }].map(
      ({ exchange, routingKeyPattern }) => ({ exchange, routingKeyPattern }),
    );
    await expectErrorSaying(hooks.updateHook('parity', id, hookDef({ bindings })), 400, 'InputError', /denied access to hooks/);
  });

  test("triggerHook and triggerHookWithToken take the task's id from the payload's taskId and answer {taskId, status: {taskId}}", async () => {
    const id = slugid();
    await hooks.createHook('parity', id, hookDef({ triggerSchema: { type: 'object' } }));
    const noScopes = await servedClient('hooks', null);
    await expectErrorSaying(hooks.triggerHook('parity', id, { taskId: 'not-a-slugid' }), 400, 'InputError', /taskId in the payload must be a slugid/);
    const { token } = await hooks.getTriggerToken('parity', id);
    await expectError(noScopes.triggerHookWithToken('parity', id, token, { taskId: 7 }), 400, 'InputError');

    const taskId = slugid();
    expect(await hooks.triggerHook('parity', id, { taskId })).toEqual({ taskId, status: { taskId } });
    expect((await svc.queue().status(taskId)).status.taskId).toBe(taskId);
    const viaToken = slugid();
    expect(await noScopes.triggerHookWithToken('parity', id, token, { taskId: viaToken })).toEqual({ taskId: viaToken, status: { taskId: viaToken } });
    // Without one, a fresh id; Taskcluster has no taskId query parameter.
    const fresh = await hooks.triggerHook('parity', id, {});
    expect(fresh.status).toEqual({ taskId: fresh.taskId });
    const ref = await (await fetch(`${svc.rootUrl}/api/references/hooks/v1/api.json`)).json();
    expect(ref.entries.filter((e: any) => /^triggerHook/.test(e.name)).map((e: any) => e.query ?? [])).toEqual([[], []]);
    const withQuery = await fetch(`${svc.rootUrl}/api/hooks/v1/hooks/parity/${id}/trigger/${token}?taskId=${slugid()}`, { method: 'POST', body: '{}' });
    expect([withQuery.status, (await withQuery.json()).code]).toEqual([400, 'InvalidRequestArguments']);
  });
});

test("URL parameters that do not fit say so in Taskcluster's words", async () => {
  await expectErrorSaying(
    svc.queue().status('not-a-task-id'),
    400,
    'InvalidRequestArguments',
    /URL parameter 'taskId' given as 'not-a-task-id' must match regular expression/,
  );
});
