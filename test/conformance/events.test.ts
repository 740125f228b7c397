/**
 * Events end to end: subscriptions built from taskcluster-client's QueueEvents bindings (by task
 * group, by route, by worker type) receive exactly the events of a task graph with a dependency,
 * a retry, an exception, an artifact and a sealed group, in seq order, through their SAS URLs.
 */
import { startTestService, TestService, taskDef, slugid, expectError } from '../helpers/service';
import { claimOne, passTime, uniqueQueue } from '../helpers/work';
import { eventsClient, drainSubscription, short, DeliveredEvent } from '../helpers/events';
import { poll } from '../helpers/azure-queue';

let svc: TestService;
let qe: any;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' });
  qe = new svc.tc.QueueEvents({ rootUrl: svc.rootUrl });
});
afterAll(async () => svc?.close());

const inADay = () => new Date(Date.now() + 24 * 3600_000).toJSON();

/**
 * The events a consumer acts on: repeats of an id dropped, each the same event as its first copy.
 * An ambiguous queue put leaves a second copy of a message, as on Azure, so a subscriber may
 * receive an event twice; the counts then hold per event id, and a missing event still fails them.
 */
function distinct(events: DeliveredEvent[]): DeliveredEvent[] {
  const first = new Map<string, DeliveredEvent>();
  for (const e of events) {
    const seen = first.get(e.id);
    if (seen) expect(e).toEqual(seen);
    else first.set(e.id, e);
  }
  return [...first.values()];
}

/** Events of one task (or the group), in seq order (arrival order among equal seqs). */
function of(events: DeliveredEvent[], id: string): string[] {
  return events
    .filter((e) => (e.payload.status?.taskId ?? e.payload.taskGroupId) === id)
    .map((e, i) => ({ e, i }))
    .sort((a, b) => a.e.seq - b.e.seq || a.i - b.i)
    .map(({ e }) => `${short(e.exchange)}${e.payload.runId === undefined ? '' : `/${e.payload.runId}`}`);
}

test('subscriptions by task group, route and worker type receive exactly their events', async () => {
  const ev = eventsClient(svc);
  const taskGroupId = slugid();
  const route = `events.test.${slugid()}`;
  const [tqA, tqB, tqC] = [uniqueQueue(), uniqueQueue(), uniqueQueue()];
  const [provB, wtB] = tqB.split('/');
  const byGroup = await ev.createSubscription(`group-${taskGroupId}`, {
    bindings: [
      ...['taskDefined', 'taskPending', 'taskRunning', 'artifactCreated', 'taskCompleted', 'taskFailed', 'taskException'].map((m) => qe[m]({ taskGroupId })),
      qe.taskGroupSealed({ taskGroupId }),
      qe.taskGroupResolved({ taskGroupId }),
    ],
    expires: inADay(),
  });
  const byRoute = await ev.createSubscription(`route-${taskGroupId}`, {
    bindings: [qe.taskDefined(`route.${route}`), qe.taskCompleted(`route.${route}`)],
    expires: inADay(),
  });
  const byWorkerType = await ev.createSubscription(`wt-${taskGroupId}`, {
    bindings: [qe.taskRunning({ provisionerId: provB, workerType: wtB }), qe.taskFailed({ provisionerId: provB, workerType: wtB })],
    expires: inADay(),
  });

  // A: retried once (worker-shutdown), then completes with an artifact. B and C depend on A.
  const A = slugid();
  const B = slugid();
  const C = slugid();
  await svc.queue().createTask(A, taskDef(tqA, { taskGroupId, schedulerId: 'sched', retries: 1, routes: [route], tags: { purpose: 'events' } }));
  await svc.queue().createTask(B, taskDef(tqB, { taskGroupId, schedulerId: 'sched', dependencies: [A] }));
  await svc.queue().createTask(C, taskDef(tqC, { taskGroupId, schedulerId: 'sched', dependencies: [A] }));
  const a0 = await claimOne(svc, tqA, A);
  await svc.queue(a0.credentials).reportException(A, 0, { reason: 'worker-shutdown' });
  const a1 = await claimOne(svc, tqA, A);
  const expires = new Date(Date.now() + 3600_000).toJSON();
  await svc
    .queue(a1.credentials)
    .createArtifact(A, 1, 'public/result.json', { storageType: 'reference', url: 'https://example.com/r', contentType: 'application/json', expires });
  await svc.queue(a1.credentials).reportCompleted(A, 1);
  const b0 = await claimOne(svc, tqB, B);
  await svc.queue(b0.credentials).reportFailed(B, 0);
  await svc.queue().cancelTask(C);
  await svc.queue().sealTaskGroup(taskGroupId);

  const group = distinct(await drainSubscription(byGroup));
  expect(of(group, A)).toEqual([
    'task-defined',
    'task-pending/0',
    'task-running/0',
    'task-exception/0',
    'task-pending/1',
    'task-running/1',
    'artifact-created/1',
    'task-completed/1',
  ]);
  expect(of(group, B)).toEqual(['task-defined', 'task-pending/0', 'task-running/0', 'task-failed/0']);
  expect(of(group, C)).toEqual(['task-defined', 'task-pending/0', 'task-exception/0']);
  // Resolved once, when C (the last unresolved task) was cancelled; then sealed.
  expect(of(group, taskGroupId)).toEqual(['task-group-resolved', 'task-group-sealed']);
  // Each event once (by id), none other.
  expect(group).toHaveLength(8 + 4 + 3 + 2);

  // Payloads are Taskcluster's messages.
  const completed = group.find((e) => short(e.exchange) === 'task-completed')!;
  expect(completed.payload).toEqual({
    version: 1,
    status: (await svc.queue().status(A)).status,
    runId: 1,
    workerGroup: a1.workerGroup,
    workerId: a1.workerId,
    task: { tags: { purpose: 'events' } },
  });
  expect(completed.routingKey).toBe(`primary.${A}.1.${a1.workerGroup}.${a1.workerId}.${tqA.replace('/', '.')}.sched.${taskGroupId}._`);
  expect(completed.routes).toEqual([`route.${route}`]);
  const defined = group.find((e) => short(e.exchange) === 'task-defined' && e.payload.status.taskId === A)!;
  expect(defined.payload.task).toEqual({ tags: { purpose: 'events' } });
  const artifact = group.find((e) => short(e.exchange) === 'artifact-created')!;
  expect(artifact.payload.artifact).toEqual({ storageType: 'reference', name: 'public/result.json', expires, contentType: 'application/json' });
  const cancelled = group.find((e) => short(e.exchange) === 'task-exception' && e.payload.status.taskId === C)!;
  expect(cancelled.payload.status.runs[0]).toMatchObject({ state: 'exception', reasonResolved: 'canceled' });
  expect(cancelled.payload).not.toHaveProperty('workerId');
  const resolved = group.find((e) => short(e.exchange) === 'task-group-resolved')!;
  expect(resolved.payload).toEqual({ version: 1, taskGroupId, schedulerId: 'sched' });
  expect(resolved.routingKey).toBe(`primary.${taskGroupId}.sched._`);
  expect(resolved.routes).toEqual([]);
  const sealed = group.find((e) => short(e.exchange) === 'task-group-sealed')!;
  expect(sealed.payload).toEqual({ version: 1, ...(await svc.queue().getTaskGroup(taskGroupId)) });

  // The task's recorded events, newest first: what was delivered, without the artifact (not a task transition).
  const listed = await ev.taskEvents(A);
  const deliveredA = group.filter((e) => e.payload.status?.taskId === A && short(e.exchange) !== 'artifact-created');
  expect(listed.events).toEqual([...deliveredA].reverse());

  expect(of(distinct(await drainSubscription(byRoute)), A)).toEqual(['task-defined', 'task-completed/1']);
  const wt = distinct(await drainSubscription(byWorkerType));
  expect(wt.map((e) => `${short(e.exchange)}:${e.payload.status.taskId}`)).toEqual([`task-running:${B}`, `task-failed:${B}`]);
}, 60_000);

test('priority changes, a worker declared gone and a suspension publish their events; a rerun makes the group resolve again', async () => {
  const ev = eventsClient(svc);
  const ref = await (await fetch(`${svc.rootUrl}/api/references/queue/v1/api.json`)).json();
  const queue = (credentials: unknown = svc.root) => new (svc.tc.createClient(ref, 'queue'))({ rootUrl: svc.rootUrl, credentials, retries: 0 });
  const taskGroupId = slugid();
  const tq = uniqueQueue();
  // v87's QueueEvents predates the priority exchanges: bind them by name.
  const byName = (name: string, routingKeyPattern: string) => ({ exchange: `exchange/taskcluster-queue/v1/${name}`, routingKeyPattern });
  const sub = await ev.createSubscription(`ctl-${taskGroupId}`, {
    bindings: [
      ...['taskDefined', 'taskPending', 'taskRunning', 'taskCompleted', 'taskException'].map((m) => qe[m]({ taskGroupId })),
      byName('task-priority-changed', `primary.*.*.*.*.*.*.*.${taskGroupId}.#`),
      byName('task-group-priority-changed', `primary.${taskGroupId}.#`),
      qe.taskGroupResolved({ taskGroupId }),
    ],
    expires: inADay(),
  });
  const A = slugid();
  const B = slugid();
  await svc.queue().createTask(A, taskDef(tq, { taskGroupId, schedulerId: 'sched', retries: 1, priority: 'low' }));
  await queue().changeTaskPriority(A, { newPriority: 'high' });
  // Worker gone: exception/worker-shutdown, retried as a new pending run.
  const a0 = await claimOne(svc, tq, A);
  await queue().declareWorkerGone(...tq.split('/'), a0.workerGroup, a0.workerId);
  // Suspended: exception/suspended, resumed as a new pending run.
  const a1 = await claimOne(svc, tq, A);
  await queue(a1.credentials).suspendRun(A, 1, { continuation: { step: 1 } });
  await svc.queue().createTask(B, taskDef(tq, { taskGroupId, schedulerId: 'sched', priority: 'low' }));
  const g = await queue().changeTaskGroupPriority(taskGroupId, { newPriority: 'very-high' });
  expect(g.tasksAffected).toBe(2);
  // Both at the same priority now, re-queued in either order.
  const both = [await claimOne(svc, tq), await claimOne(svc, tq)];
  const a2 = both.find((c) => c.status.taskId === A);
  const b0 = both.find((c) => c.status.taskId === B);
  await svc.queue(a2.credentials).reportCompleted(A, 2);
  await svc.queue(b0.credentials).reportCompleted(B, 0);
  let got = await drainSubscription(sub);
  // Declaring a worker gone sends its claim's task-running again (nothing proves the worker got
  // it): a repeat with the same id, which consumers drop (an ambiguous put may add another).
  const runningA0 = got.filter((e) => e.id === got.find((x) => short(x.exchange) === 'task-running' && x.payload.runId === 0)!.id);
  expect(runningA0.length).toBeGreaterThanOrEqual(2);
  got = distinct(got);
  expect(of(got, A)).toEqual([
    'task-defined',
    'task-pending/0',
    'task-priority-changed',
    'task-running/0',
    'task-exception/0',
    'task-pending/1',
    'task-running/1',
    'task-exception/1',
    'task-pending/2',
    'task-priority-changed',
    'task-running/2',
    'task-completed/2',
  ]);
  expect(of(got, B)).toEqual(['task-defined', 'task-pending/0', 'task-priority-changed', 'task-running/0', 'task-completed/0']);
  expect(of(got, taskGroupId)).toEqual(['task-group-priority-changed', 'task-group-resolved']);

  const changed = got.find((e) => short(e.exchange) === 'task-priority-changed' && e.payload.status.taskId === A)!;
  expect(changed.payload).toMatchObject({ version: 1, oldPriority: 'low', newPriority: 'high' });
  expect(changed.payload.status.priority).toBe('high');
  expect(changed.routingKey).toBe(`primary.${A}._._._.${tq.replace('/', '.')}.sched.${taskGroupId}._`);
  const gone = got.find((e) => short(e.exchange) === 'task-exception' && e.payload.runId === 0)!;
  expect(gone.payload.status.runs[0]).toMatchObject({ state: 'exception', reasonResolved: 'worker-shutdown' });
  expect(gone.payload).toMatchObject({ workerGroup: a0.workerGroup, workerId: a0.workerId });
  const suspended = got.find((e) => short(e.exchange) === 'task-exception' && e.payload.runId === 1)!;
  expect(suspended.payload.status.runs[1]).toMatchObject({ state: 'exception', reasonResolved: 'suspended' });
  expect(got.find((e) => short(e.exchange) === 'task-pending' && e.payload.runId === 2)!.payload.status.runs[2].reasonCreated).toBe('resumed');
  const groupChanged = got.find((e) => short(e.exchange) === 'task-group-priority-changed')!;
  expect(groupChanged.payload).toEqual({ version: 1, taskGroupId, schedulerId: 'sched', newPriority: 'very-high', tasksAffected: 2 });
  expect(groupChanged.routingKey).toBe(`primary.${taskGroupId}.sched._`);

  // A rerun makes the group unresolved again: no task-group-resolved until the rerun run resolves.
  await svc.queue().rerunTask(B);
  const b1 = await claimOne(svc, tq, B);
  got = distinct(await drainSubscription(sub));
  expect(of(got, B)).toEqual(['task-pending/1', 'task-running/1']);
  expect(of(got, taskGroupId)).toEqual([]);
  await svc.queue(b1.credentials).reportException(B, 1, { reason: 'malformed-payload' });
  got = distinct(await drainSubscription(sub));
  expect(of(got, B)).toEqual(['task-exception/1']);
  expect(of(got, taskGroupId)).toEqual(['task-group-resolved']);
  // Two resolutions of the group: two events, each named by the resolution that emptied it.
  expect(got.find((e) => short(e.exchange) === 'task-group-resolved')!.id).toBe(`${taskGroupId}.resolved.${B}.1`);
}, 60_000);

test('create is idempotent, get gives fresh URLs, list pages, delete removes the queue', async () => {
  const ev = eventsClient(svc);
  const id = `sub-${slugid()}`;
  const body = { bindings: [qe.taskCompleted({ taskGroupId: slugid() })], expires: inADay() };
  const created = await ev.createSubscription(id, body);
  // QueueEvents adds its routingKeyReference to each binding; the subscription keeps what matters.
  const bindings = body.bindings.map((b: any) => ({ exchange: b.exchange, routingKeyPattern: b.routingKeyPattern }));
  expect(created).toMatchObject({ subscriptionId: id, bindings, expires: body.expires });
  expect(created.signedDeleteUrl).toContain('{{messageId}}');
  expect(created.signedDeleteUrl).toContain('{{popReceipt}}');
  expect(new Date(created.urlsExpire).getTime()).toBeGreaterThan(Date.now());
  expect(await ev.createSubscription(id, body)).toMatchObject({ subscriptionId: id, bindings, expires: body.expires });
  expect(await ev.subscription(id)).toMatchObject({ subscriptionId: id, bindings });
  // A SAS for this queue only, receive/delete only: the poll works, adding a message does not.
  expect((await poll(created.signedPollUrl)).status).toBe(200);
  const put = await fetch(created.signedPollUrl.replace(/visibilitytimeout=\d+&/, ''), {
    method: 'POST',
    body: '<QueueMessage><MessageText>eA==</MessageText></QueueMessage>',
  });
  expect(put.status).toBe(403);

  const ids: string[] = [];
  let continuationToken: string | undefined;
  do {
    const page = await ev.listSubscriptions({ limit: 1, ...(continuationToken ? { continuationToken } : {}) });
    ids.push(...page.subscriptions.map((s: any) => s.subscriptionId));
    continuationToken = page.continuationToken;
  } while (continuationToken);
  expect(ids).toContain(id);

  await ev.deleteSubscription(id);
  await expectError(ev.subscription(id), 404, 'ResourceNotFound');
  expect((await poll(created.signedPollUrl)).status).toBe(404);
  await ev.deleteSubscription(id); // twice is fine
});

test('bad subscriptions are 4xx with a clear message', async () => {
  const ev = eventsClient(svc);
  const expires = inADay();
  const bad = async (body: any, status: number, re: RegExp, id = `bad-${slugid()}`) => {
    const err = await expectError(ev.createSubscription(id, body), status);
    expect(err.message).toMatch(re);
  };
  await bad({ bindings: [{ exchange: 'exchange/taskcluster-queue/v1/task-exploded', routingKeyPattern: '#' }], expires }, 400, /unknown exchange/);
  await bad({ bindings: [{ exchange: 'exchange/taskcluster-queue/v1/task-failed', routingKeyPattern: 'primary.#x' }], expires }, 400, /whole words/);
  await bad({ bindings: Array.from({ length: 65 }, () => qe.taskFailed({})), expires }, 400, /at most 64 bindings/);
  await bad({ bindings: [], expires }, 400, /non-empty/);
  await bad({ bindings: [qe.taskFailed({})], expires: new Date(Date.now() - 1000).toJSON() }, 400, /future/);
  await bad({ bindings: [qe.taskFailed({})], expires }, 400, /subscriptionId/, 'not/valid!');
  const id = `taken-${slugid()}`;
  await ev.createSubscription(id, { bindings: [qe.taskFailed({})], expires });
  await bad({ bindings: [qe.taskCompleted({})], expires }, 409, /different definition/, id);
  await ev.deleteSubscription(id);
});

test('an expired subscription is removed by the reaper, queue and all', async () => {
  const ev = eventsClient(svc);
  const id = `short-${slugid()}`;
  const created = await ev.createSubscription(id, { bindings: [qe.taskFailed({})], expires: new Date(svc.clock.ms() + 1500).toJSON() });
  expect((await poll(created.signedPollUrl)).status).toBe(200);
  await passTime(1600);
  await expectError(ev.subscription(id), 404, 'ResourceNotFound');
  const end = Date.now() + 10_000;
  let status = 200;
  while (status !== 404 && Date.now() < end) {
    await svc.runReaper();
    // The SAS URL outlives nothing: it stops at the subscription's expiry, so look with the account key.
    // Through the storage port (the suite may run on the in-memory store): a peek of a queue that is gone answers 404.
    const queue = svc.services.storage.queueNamed(created.signedPollUrl.split('/').slice(-2)[0], 'subscription');
    status = await queue.peek(1).then(
      () => 200,
      (err) => (err?.statusCode === 404 ? 404 : Promise.reject(err)),
    );
  }
  expect(status).toBe(404);
});

test('scopes: each call needs its own scope for that subscription id; the reference is public', async () => {
  const id = `scoped-${slugid()}`;
  const body = { bindings: [qe.taskFailed({})], expires: inADay() };
  const creds = (scopes: string[]) =>
    svc.tc.createTemporaryCredentials({ start: new Date(Date.now() - 60_000), expiry: new Date(Date.now() + 3600_000), scopes, credentials: svc.root });
  await expectError(eventsClient(svc, creds([`queue:create-subscription:other`])).createSubscription(id, body), 403, 'InsufficientScopes');
  await eventsClient(svc, creds([`queue:create-subscription:${id}`])).createSubscription(id, body);
  await expectError(eventsClient(svc, creds([`queue:create-subscription:${id}`])).subscription(id), 403, 'InsufficientScopes');
  expect((await eventsClient(svc, creds([`queue:get-subscription:${id}`])).subscription(id)).subscriptionId).toBe(id);
  await expectError(eventsClient(svc, creds(['queue:unrelated'])).listSubscriptions(), 403, 'InsufficientScopes');
  await expectError(eventsClient(svc, creds([`queue:get-subscription:${id}`])).deleteSubscription(id), 403, 'InsufficientScopes');
  await eventsClient(svc, creds([`queue:delete-subscription:${id}`])).deleteSubscription(id);
  const ref = await (await fetch(`${svc.rootUrl}/api/references/queue-events/v1/api.json`)).json();
  expect(ref.entries.map((e: any) => e.name).sort()).toEqual(['createSubscription', 'deleteSubscription', 'listSubscriptions', 'subscription', 'taskEvents']);
});

test('an event too large for a queue message arrives without its tags, marked truncated; taskEvents has it whole', async () => {
  const ev = eventsClient(svc);
  const taskGroupId = slugid();
  const sub = await ev.createSubscription(`big-${taskGroupId}`, { bindings: [qe.taskDefined({ taskGroupId })], expires: inADay() });
  const tags = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`t${i}`, 'x'.repeat(4000)]));
  const taskId = slugid();
  await svc.queue().createTask(taskId, taskDef(uniqueQueue(), { taskGroupId, tags }));
  const [got] = distinct(await drainSubscription(sub)) as any[];
  expect(got).toMatchObject({ id: `${taskId}.1`, truncated: true });
  expect(got.payload.task).toBeUndefined();
  expect(got.payload.status.taskId).toBe(taskId);
  const listed = await ev.taskEvents(taskId);
  expect(listed.events.find((e: any) => e.id === `${taskId}.1`).payload.task.tags).toEqual(tags);
});
