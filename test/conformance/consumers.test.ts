/**
 * The Index and Hooks as consumers of the event stream, end to end with the unmodified client: a
 * task graph's builds carry `index.` routes and a hook is bound to `task-completed` of the group;
 * after the reaper's passes (its consumer step) the index finds the latest build and its artifact,
 * and the hook has fired once per completion, also when a message is delivered twice. Nothing
 * here calls indexCompletedTask or fireForEvent.
 */
import { startTestService, TestService, slugid } from '../helpers/service';
import { claimOne, reapUntil, uniqueQueue } from '../helpers/work';
import { readTaskEvents } from '../../shared/events/outbox';

let svc: TestService;
let index: any;
let hooks: any;
let qe: any;
beforeAll(async () => {
  svc = await startTestService();
  index = new svc.tc.Index({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
  hooks = new svc.tc.Hooks({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
  qe = new svc.tc.QueueEvents({ rootUrl: svc.rootUrl });
  await svc.auth().createRole('hook-id:consumers/*', { description: 'consumer hooks', scopes: ['queue:create-task:*', 'queue:scheduler-id:*'] });
});
afterAll(async () => svc?.close());

/** A QueueEvents binding as a hook takes it (without the client's routingKeyReference). */
const binding = (b: any) => ({ exchange: b.exchange, routingKeyPattern: b.routingKeyPattern });
const inAnHour = () => new Date(Date.now() + 3600_000).toJSON();
const uniqueNs = () => `graph${Math.random().toString(36).slice(2, 8)}`;

/** Claims and completes `taskId` (in its own task queue `tq`), with a reference artifact. */
async function build(tq: string, taskId: string, artifact: string) {
  const c = await claimOne(svc, tq, taskId);
  const wq = svc.queue(c.credentials);
  await wq.createArtifact(taskId, 0, 'public/build.tar.gz', { storageType: 'reference', url: artifact, expires: inAnHour(), contentType: 'application/gzip' });
  await wq.reportCompleted(taskId, 0);
}

/** A hook that creates one follow-up task per completion in the group, in the group named by the completed task. */
async function followUpHook(taskGroupId: string): Promise<string> {
  const hookId = `h${Math.random().toString(36).slice(2, 10)}`;
  await hooks.createHook('consumers', hookId, {
    metadata: { name: 'follow-up', description: 'after every completion of a group', owner: 'tester@example.com' },
    bindings: [binding(qe.taskCompleted({ taskGroupId }))],
    triggerSchema: { type: 'object', required: ['status'] },
    task: {
      taskQueueId: uniqueQueue(),
      taskGroupId: { $eval: 'payload.status.taskId' },
      payload: { after: { $eval: 'payload.status.taskId' }, by: { $eval: 'firedBy' } },
      metadata: { name: 'follow-up', description: 'after a completion', owner: 'tester@example.com', source: 'https://example.com/hook' },
    },
  });
  return hookId;
}

/** The follow-up tasks a hook created for `completed` (the hook puts them in a group of that id). */
async function followUps(completed: string): Promise<any[]> {
  const group = await svc
    .queue()
    .listTaskGroup(completed)
    .catch((err: any) => {
      if (err.statusCode === 404) return { tasks: [] }; // no follow-up yet
      throw err;
    });
  return group.tasks.filter((t: any) => t.status.taskId !== completed);
}

test('a task graph indexed through routes: the latest build and its artifact are found by name; a bound hook fires once per completion', async () => {
  const ns = uniqueNs();
  const taskGroupId = slugid();
  const hookId = await followUpHook(taskGroupId);
  const tq = uniqueQueue();
  const [first, second, nightly, test] = [slugid(), slugid(), slugid(), slugid()];
  const routes = (rank: number, rev: string) => ({
    taskGroupId,
    routes: [`index.${ns}.build.latest`, `index.${ns}.build.revs.${rev}`],
    extra: { index: { rank, data: { rev } } },
  });
  const def = (extra: Record<string, unknown>) => ({
    taskQueueId: tq,
    created: new Date().toJSON(),
    deadline: inAnHour(),
    payload: {},
    metadata: { name: 'graph task', description: 'x', owner: 'tester@example.com', source: 'https://example.com/graph' },
    ...extra,
  });
  // first → second (same rank, completes later: replaces first); nightly has a lower rank and
  // completes later: it is indexed at its own revision only. The test task has no index route.
  await svc.queue().createTask(first, def(routes(1, 'r1')));
  await svc.queue().createTask(second, def({ ...routes(1, 'r2'), dependencies: [first] }));
  await svc.queue().createTask(nightly, def({ ...routes(0, 'r3'), dependencies: [second] }));
  await svc.queue().createTask(test, def({ taskGroupId, dependencies: [nightly] }));
  await build(tq, first, 'https://example.com/first.tar.gz');
  await build(tq, second, 'https://example.com/second.tar.gz');
  await build(tq, nightly, 'https://example.com/nightly.tar.gz');
  await build(tq, test, 'https://example.com/test.tar.gz');

  await reapUntil(
    svc,
    async () => {
      const found = await index.findTask(`${ns}.build.revs.r3`).catch(() => undefined);
      return !!found && (await followUps(test)).length === 1;
    },
    20_000,
  );
  expect(await index.findTask(`${ns}.build.latest`)).toMatchObject({ taskId: second, rank: 1, data: { rev: 'r2' } });
  expect((await index.findTask(`${ns}.build.revs.r1`)).taskId).toBe(first);
  expect((await index.findTask(`${ns}.build.revs.r3`)).taskId).toBe(nightly);
  expect((await index.listNamespaces(`${ns}.build`)).namespaces.map((n: any) => n.name)).toEqual(['revs']);
  const r = await fetch(index.buildSignedUrl(index.findArtifactFromTask, `${ns}.build.latest`, 'public/build.tar.gz'), { redirect: 'manual' });
  expect(r.status).toBe(303);
  expect(r.headers.get('location')).toBe('https://example.com/second.tar.gz');

  // One follow-up per completion, created by the hook with the event as payload.
  for (const t of [first, second, nightly, test]) {
    const tasks = await followUps(t);
    expect(tasks).toHaveLength(1);
    expect(tasks[0].task.payload).toEqual({ after: t, by: 'pulseMessage' });
  }
  const fires = (await hooks.listLastFires('consumers', hookId)).lastFires;
  expect(fires).toHaveLength(4);
  expect(fires.every((f: any) => f.firedBy === 'pulseMessage' && f.result === 'success')).toBe(true);
  expect((await hooks.getHookStatus('consumers', hookId)).lastFire.result).toBe('success');
}, 60_000);

test('a completion delivered twice fires the hook once and leaves the index as it was', async () => {
  const ns = uniqueNs();
  const taskGroupId = slugid();
  const hookId = await followUpHook(taskGroupId);
  const tq = uniqueQueue();
  const [older, newer] = [slugid(), slugid()];
  for (const id of [older, newer]) {
    await svc.queue().createTask(id, {
      taskQueueId: tq,
      taskGroupId,
      created: new Date().toJSON(),
      deadline: inAnHour(),
      payload: {},
      routes: [`index.${ns}.latest`],
      metadata: { name: 'build', description: 'x', owner: 'tester@example.com', source: 'https://example.com/graph' },
    });
    await build(tq, id, `https://example.com/${id}`);
  }
  await reapUntil(svc, async () => (await followUps(newer)).length === 1 && (await followUps(older)).length === 1, 20_000);
  expect((await index.findTask(`${ns}.latest`)).taskId).toBe(newer);

  // The older completion's event, delivered again after the newer one (as a sweep after a slow
  // delivery would): the hook does not fire again, and the index keeps the newer task.
  const events = (await readTaskEvents(svc.services.storage, older, 10)).events;
  const completed = events.find((e) => e.exchange.endsWith('/task-completed'))!;
  await svc.services.events.dispatcher.deliver([completed]);
  await svc.runReaper();
  await svc.runReaper();
  expect(await followUps(older)).toHaveLength(1);
  expect((await index.findTask(`${ns}.latest`)).taskId).toBe(newer);
  expect((await hooks.listLastFires('consumers', hookId)).lastFires).toHaveLength(2);
}, 60_000);

test('a hook updated to other bindings or removed stops firing; one bound later fires for later completions', async () => {
  const taskGroupId = slugid();
  const hookId = await followUpHook(taskGroupId);
  const tq = uniqueQueue();
  const complete = async () => {
    const id = slugid();
    await svc.queue().createTask(id, {
      taskQueueId: tq,
      taskGroupId,
      created: new Date().toJSON(),
      deadline: inAnHour(),
      payload: {},
      metadata: { name: 'x', description: 'x', owner: 'tester@example.com', source: 'https://example.com/graph' },
    });
    await build(tq, id, 'https://example.com/x');
    return id;
  };
  const hook = await hooks.hook('consumers', hookId);
  await hooks.updateHook('consumers', hookId, { ...hook, bindings: [binding(qe.taskFailed({ taskGroupId }))] });
  const a = await complete();
  await svc.runReaper();
  expect(await followUps(a)).toHaveLength(0);

  await hooks.updateHook('consumers', hookId, { ...hook, bindings: [binding(qe.taskCompleted({ taskGroupId }))] });
  const b = await complete();
  await reapUntil(svc, async () => (await followUps(b)).length === 1, 20_000);

  await hooks.removeHook('consumers', hookId);
  const c = await complete();
  await svc.runReaper();
  await svc.runReaper();
  expect(await followUps(c)).toHaveLength(0);
}, 60_000);
