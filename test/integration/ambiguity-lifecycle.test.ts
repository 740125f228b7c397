/**
 * Ambiguous writes (the faithful storage mode): each write of createTask, claimWork,
 * reportCompleted, changeTaskGroupPriority, a reaper pass, a subscription delivery and createSubscription in turn applies, its answer is lost, and the SDK-style retry meets its own
 * success. What the caller and everyone after see must be what they see without the fault.
 */
import { startTestService, TestService, taskDef, slugid, clock } from '../helpers/service';
import { CHECK_POLL_S, claim, claimAny, status, uniqueQueue, waitUntil, W1, W2 } from '../helpers/work';
import { eachWrite } from '../helpers/ambiguity';
import { drainSubscription, eventsClient } from '../helpers/events';

let svc: TestService;
beforeAll(async () => {
  // Only the sweep's fault: every other call answers as it should.
  svc = await startTestService({ QUEUE_STORAGE_CONNECTION: 'memory:', QUEUE_STORAGE_FAULTS: 'seed=1 backoff-ms=0', QUEUE_CLAIM_WORK_POLL_S: CHECK_POLL_S });
});
afterAll(async () => svc?.close());

const sweep = (scenario: Parameters<typeof eachWrite>[1]) =>
  eachWrite(svc.services.storage, scenario, { warm: () => Promise.all([svc.auth().currentScopes(), svc.services.events.dispatcher.subscriptions.refresh()]) });

test('createTask', async () => {
  const ops = await sweep(async (ambiguous) => {
    const taskId = slugid();
    const tq = uniqueQueue();
    const r = await ambiguous(() => svc.queue().createTask(taskId, taskDef(tq)));
    expect(r.error).toBeUndefined();
    expect(r.value.status).toMatchObject({ taskId, state: 'pending', runs: [expect.objectContaining({ runId: 0, state: 'pending' })] });
    // Claimable exactly once.
    const claims = await claimAny(svc, tq, W1, 32);
    expect(claims.map((c) => c.status.taskId)).toEqual([taskId]);
    expect(await claim(svc, tq, W2, 32)).toEqual([]);
  });
  expect(ops).toEqual(expect.arrayContaining(['Tasks.transaction']));
});

test('createTask while a claimWork waits on the same instance (the hand-over)', async () => {
  // An instance of its own whose claimWork waits long enough for the create.
  const h = await startTestService({ QUEUE_STORAGE_CONNECTION: 'memory:', QUEUE_STORAGE_FAULTS: 'seed=1 backoff-ms=0', QUEUE_CLAIM_WORK_POLL_S: '15' });
  try {
    const ops = await eachWrite(
      h.services.storage,
      async (ambiguous) => {
        const taskId = slugid();
        const tq = uniqueQueue();
        const poller = h.services.pollers.get(tq);
        const answer = h.queue().claimWork(tq, { ...W1, tasks: 1 });
        while (!poller.handsOver) await new Promise((r) => setImmediate(r));
        const r = await ambiguous(() => h.queue().createTask(taskId, taskDef(tq)));
        expect(r.error).toBeUndefined();
        expect(r.value.status).toMatchObject({ taskId, state: 'pending' });
        const { tasks } = await answer;
        expect(tasks.map((t: any) => `${t.status.taskId}/${t.runId}`)).toEqual([`${taskId}/0`]);
        expect((await status(h, taskId)).runs).toEqual([expect.objectContaining({ runId: 0, state: 'running', ...W1, takenUntil: tasks[0].takenUntil })]);
      },
      { warm: () => Promise.all([h.auth().currentScopes(), h.services.events.dispatcher.subscriptions.refresh()]) },
    );
    expect(ops).toEqual(expect.arrayContaining(['Tasks.transaction']));
  } finally {
    await h.close();
  }
});

test('claimWork', async () => {
  const ops = await sweep(async (ambiguous) => {
    const taskId = slugid();
    const tq = uniqueQueue();
    await svc.queue().createTask(taskId, taskDef(tq));
    const r = await ambiguous(() => svc.queue().claimWork(tq, { ...W1, tasks: 1 }));
    expect(r.error).toBeUndefined();
    expect(r.value.tasks.map((t: any) => `${t.status.taskId}/${t.runId}`)).toEqual([`${taskId}/0`]);
    const s = await status(svc, taskId);
    expect(s.runs).toEqual([expect.objectContaining({ runId: 0, state: 'running', ...W1, takenUntil: r.value.tasks[0].takenUntil })]);
    expect(await claim(svc, tq, W2, 32)).toEqual([]);
  });
  expect(ops).toEqual(expect.arrayContaining(['Tasks.merge']));
});

test('reportCompleted', async () => {
  const ops = await sweep(async (ambiguous) => {
    const taskId = slugid();
    const tq = uniqueQueue();
    await svc.queue().createTask(taskId, taskDef(tq));
    const [c] = await claimAny(svc, tq, W1, 1);
    const r = await ambiguous(() => svc.queue(c.credentials).reportCompleted(taskId, 0));
    expect(r.error).toBeUndefined();
    expect(r.value.status).toMatchObject({
      taskId,
      state: 'completed',
      runs: [expect.objectContaining({ runId: 0, state: 'completed', reasonResolved: 'completed' })],
    });
    expect((await status(svc, taskId)).state).toBe('completed');
  });
  expect(ops).toEqual(expect.arrayContaining(['Tasks.merge']));
});

test('changeTaskGroupPriority: a task whose write met its own success still counts as changed', async () => {
  const ops = await sweep(async (ambiguous) => {
    const taskGroupId = slugid();
    const tq = uniqueQueue();
    await svc.queue().createTask(taskGroupId, taskDef(tq, { taskGroupId }));
    // This service's own reference: the call is newer than the published client.
    const ref = await (await fetch(`${svc.rootUrl}/api/references/queue/v1/api.json`)).json();
    const q = new (svc.tc.createClient(ref, 'queue'))({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
    const r = await ambiguous(() => q.changeTaskGroupPriority(taskGroupId, { newPriority: 'high' }));
    expect(r.error).toBeUndefined();
    expect(r.value).toMatchObject({ tasksAffected: 1, taskIds: [taskGroupId] });
  });
  expect(ops).toEqual(expect.arrayContaining(['Tasks.merge']));
});

test('a reaper pass that resolves a deadline', async () => {
  const ops = await sweep(async (ambiguous) => {
    const taskId = slugid();
    const tq = uniqueQueue();
    const deadline = new Date(clock.ms() + 3000);
    await svc.queue().createTask(taskId, taskDef(tq, { deadline: deadline.toJSON() }));
    await waitUntil(deadline, 1100);
    const r = await ambiguous(() => svc.runReaper());
    expect(r.error).toBeUndefined();
    const s = await status(svc, taskId);
    expect(s.runs).toEqual([expect.objectContaining({ runId: 0, state: 'exception', reasonResolved: 'deadline-exceeded' })]);
    expect(await claim(svc, tq, W2, 32)).toEqual([]);
  });
  expect(ops).toEqual(expect.arrayContaining(['Tasks.merge']));
}, 120_000);

test('a subscription delivery: the subscriber gets the event (repeats dropped by id)', async () => {
  const id = `amb-${slugid()}`;
  const sub = await eventsClient(svc).createSubscription(id, {
    bindings: [{ exchange: 'exchange/taskcluster-queue/v1/task-completed', routingKeyPattern: `route.amb.${id}` }],
    expires: new Date(clock.ms() + 3600_000).toJSON(),
  });
  await svc.services.events.dispatcher.subscriptions.refresh();
  const ops = await sweep(async (ambiguous) => {
    const taskId = slugid();
    const tq = uniqueQueue();
    await svc.queue().createTask(taskId, taskDef(tq, { routes: [`amb.${id}`] }));
    const [c] = await claimAny(svc, tq, W1, 1);
    const r = await ambiguous(() => svc.queue(c.credentials).reportCompleted(taskId, 0));
    expect(r.error).toBeUndefined();
    // A put whose answer was lost is two messages, as on Azure: a consumer drops repeats by id.
    const got = (await drainSubscription(sub)).filter((e, i, all) => all.findIndex((x) => x.id === e.id) === i);
    expect(got.map((e) => `${e.payload.status.taskId}/${e.exchange.split('/').pop()}`)).toEqual([`${taskId}/task-completed`]);
  });
  expect(ops).toEqual(expect.arrayContaining([expect.stringMatching(/^subscription\.put$|\.put$/)]));
});

test('createSubscription: the subscription keeps its queue and receives its events', async () => {
  const ops = await sweep(async (ambiguous) => {
    const id = `amb-${slugid()}`;
    const r = await ambiguous(() =>
      eventsClient(svc).createSubscription(id, {
        bindings: [{ exchange: 'exchange/taskcluster-queue/v1/task-defined', routingKeyPattern: `route.amb.${id}` }],
        expires: new Date(clock.ms() + 3600_000).toJSON(),
      }),
    );
    expect(r.error).toBeUndefined();
    await svc.services.events.dispatcher.subscriptions.refresh();
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(uniqueQueue(), { routes: [`amb.${id}`] }));
    const got = (await drainSubscription(r.value)).filter((e, i, all) => all.findIndex((x) => x.id === e.id) === i);
    expect(got.map((e) => e.payload.status.taskId)).toEqual([taskId]);
  });
  expect(ops).toEqual(expect.arrayContaining(['Subscriptions.insert']));
});

test('createRole', async () => {
  const ops = await sweep(async (ambiguous) => {
    const roleId = `amb-${slugid()}`;
    const r = await ambiguous(() => svc.auth().createRole(roleId, { description: 'one', scopes: ['queue:ping'] }));
    expect(r.error).toBeUndefined();
    expect((await svc.auth().role(roleId)).scopes).toEqual(['queue:ping']);
    // Recorded once in the audit history, whichever write met its own success.
    expect((await svc.auth().getEntityHistory('role', roleId)).auditHistory.map((e: any) => e.actionType)).toEqual(['created']);
  });
  expect(ops.length).toBeGreaterThan(0);
});

test('createClient: the caller gets the new client and its token', async () => {
  const ops = await sweep(async (ambiguous) => {
    const clientId = `amb/${slugid()}`;
    const r = await ambiguous(() =>
      svc.auth().createClient(clientId, { description: 'd', expires: new Date(clock.ms() + 3600_000).toJSON(), scopes: ['queue:ping'] }),
    );
    expect(r.error).toBeUndefined();
    expect(r.value.accessToken).toBeTruthy();
    // The token returned is the one stored.
    const q = svc.queue({ clientId, accessToken: r.value.accessToken });
    expect(await q.ping()).toBeDefined();
    expect((await svc.auth().client(clientId)).scopes).toEqual(['queue:ping']);
    expect((await svc.auth().getEntityHistory('client', clientId)).auditHistory.map((e: any) => e.actionType)).toEqual(['created']);
  });
  expect(ops).toEqual(expect.arrayContaining(['Clients.insert']));
});
