/**
 * Task history: every run transition (who, when, from which state, why), newest first, written in
 * the same transaction as the task row. Also the reaper's per-task transition events and the
 * counts through claim expiry. The operator endpoints are called through a taskcluster-client
 * class built from the service's own API reference (GET /api/queue/v1/ops/reference).
 */
import { startTestService, TestService, taskDef, slugid, expectError } from '../helpers/service';
import { waitUntil } from '../helpers/work';
import { eventsClient } from '../helpers/events';
import { HELD_MAX_ENTRIES } from '../../shared/ops/history';

let svc: TestService;
let Ops: any;
beforeAll(async () => {
  // The reaper runs only when a test asks.
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' });
  const reference = await (await fetch(`${svc.rootUrl}/api/queue/v1/ops/reference`)).json();
  Ops = svc.tc.createClient(reference, 'QueueOps');
});
afterAll(async () => svc?.close());

const ops = (credentials: any = svc.root) => new Ops({ rootUrl: svc.rootUrl, credentials, retries: 0 });
const uniqueQueue = () => `prov/h-${Math.random().toString(36).slice(2, 10)}`;

async function fullHistory(taskId: string, limit = 1000): Promise<any[]> {
  const out: any[] = [];
  let token: string | undefined;
  do {
    const r = await ops().taskHistory(taskId, { limit, ...(token ? { continuationToken: token } : {}) });
    expect(r.taskId).toBe(taskId);
    out.push(...r.history);
    token = r.continuationToken;
  } while (token);
  return out;
}

test('a retry chain (worker-shutdown, claim-expired, completed) is recorded with actors, newest first, and pages', async () => {
  const tq = uniqueQueue();
  const q = svc.queue();
  const taskId = slugid();
  await q.createTask(taskId, taskDef(tq));
  const [c0] = (await q.claimWork(tq, { workerGroup: 'wg', workerId: 'w1', tasks: 1 })).tasks;
  const re = await svc.queue(c0.credentials).reclaimTask(taskId, 0);
  await svc.queue(re.credentials).reportException(taskId, 0, { reason: 'worker-shutdown' });
  const [c1] = (await q.claimWork(tq, { workerGroup: 'wg', workerId: 'w2', tasks: 1 })).tasks;
  expect(c1.runId).toBe(1);
  expect(await q.taskQueueCounts(tq)).toMatchObject({ pendingTasks: 0, claimedTasks: 1 });

  // w2 goes silent: after takenUntil the reaper expires the claim and retries the task.
  await waitUntil(c1.takenUntil, 1000);
  svc.log.records.length = 0;
  await svc.runReaper();
  expect((await q.status(taskId)).status.runs.map((r: any) => [r.state, r.reasonResolved])).toEqual([
    ['exception', 'worker-shutdown'],
    ['exception', 'claim-expired'],
    ['pending', undefined],
  ]);
  expect(await q.taskQueueCounts(tq)).toMatchObject({ pendingTasks: 1, claimedTasks: 0 });
  const events = svc.log.records.filter((r) => r.event === 'task-transition' && r.taskId === taskId);
  expect(events.map((e) => [e.transition, e.runId, e.to, e.reason, e.actor])).toEqual([
    ['resolved', 1, 'exception', 'claim-expired', 'reaper'],
    ['scheduled', 2, 'pending', 'retry', 'reaper'],
  ]);
  const pass = svc.log.records.find((r) => r.event === 'reaper-pass');
  expect(pass).toMatchObject({ claim: expect.any(Number), transitions: expect.any(Number) });
  expect(pass!.transitions as number).toBeGreaterThanOrEqual(2);

  const [c2] = (await q.claimWork(tq, { workerGroup: 'wg', workerId: 'w3', tasks: 1 })).tasks;
  await svc.queue(c2.credentials).reportCompleted(taskId, 2);

  const history = await fullHistory(taskId, 4);
  const claimClient = (run: number) => expect.stringMatching(new RegExp(`^task-client/${taskId}/${run}/on/wg/`));
  expect(history.map((h) => [h.seq, h.event, h.runId, h.from, h.to, h.reason, h.actor, h.workerId])).toEqual([
    [11, 'resolved', 2, 'running', 'completed', 'completed', claimClient(2), 'w3'],
    [10, 'claimed', 2, 'pending', 'running', 'claimed', 'static/root', 'w3'],
    [9, 'scheduled', 2, null, 'pending', 'retry', 'reaper', undefined],
    [8, 'resolved', 1, 'running', 'exception', 'claim-expired', 'reaper', 'w2'],
    [7, 'claimed', 1, 'pending', 'running', 'claimed', 'static/root', 'w2'],
    [6, 'scheduled', 1, null, 'pending', 'retry', claimClient(0), undefined],
    [5, 'resolved', 0, 'running', 'exception', 'worker-shutdown', claimClient(0), 'w1'],
    [4, 'reclaimed', 0, 'running', 'running', 'reclaimed', claimClient(0), 'w1'],
    [3, 'claimed', 0, 'pending', 'running', 'claimed', 'static/root', 'w1'],
    [2, 'scheduled', 0, null, 'pending', 'scheduled', 'static/root', undefined],
    [1, 'created', undefined, null, 'unscheduled', 'created', 'static/root', undefined],
  ]);
  for (let i = 1; i < history.length; i++) expect(history[i - 1].time >= history[i].time).toBe(true);
  expect(history.find((h) => h.event === 'reclaimed').takenUntil).toBe(re.takenUntil);
  expect(await fullHistory(taskId)).toEqual(history);
});

test("pages stay exact when the row's held entries go out as history rows between two pages", async () => {
  const tq = uniqueQueue();
  const q = svc.queue();
  const taskId = slugid();
  await q.createTask(taskId, taskDef(tq));
  const [c] = (await q.claimWork(tq, { workerGroup: 'wg', workerId: 'w1', tasks: 1 })).tasks;
  // created, scheduled and claimed: all three held in the task row.
  const first = await ops().taskHistory(taskId, { limit: 2 });
  expect(first.history.map((h: any) => h.seq)).toEqual([3, 2]);
  const firstEvents = await eventsClient(svc).taskEvents(taskId, { limit: 2 });
  expect(firstEvents.events.map((e: any) => e.id)).toEqual([`${taskId}.3`, `${taskId}.2`]);
  // Reclaims, until the entries no longer fit in the row and go out as rows (then two more are held).
  let credentials = c.credentials;
  for (let i = 0; i < HELD_MAX_ENTRIES; i++) credentials = (await svc.queue(credentials).reclaimTask(taskId, 0)).credentials;
  // The second pages go on below where the first ended: nothing twice, nothing left out.
  const rest = await ops().taskHistory(taskId, { limit: 2, continuationToken: first.continuationToken });
  expect(rest.history.map((h: any) => [h.seq, h.event])).toEqual([[1, 'created']]);
  expect(rest.continuationToken).toBeUndefined();
  const restEvents = await eventsClient(svc).taskEvents(taskId, { limit: 2, continuationToken: firstEvents.continuationToken });
  expect(restEvents.events.map((e: any) => e.id)).toEqual([`${taskId}.1`]);
  // The whole of it, newest first, across held entries and rows.
  const all = Array.from({ length: 3 + HELD_MAX_ENTRIES }, (_, i) => 3 + HELD_MAX_ENTRIES - i);
  expect((await fullHistory(taskId, 3)).map((h) => h.seq)).toEqual(all);
  const events = await eventsClient(svc).taskEvents(taskId);
  expect(events.events.map((e: any) => e.id)).toEqual([3, 2, 1].map((n) => `${taskId}.${n}`)); // reclaims publish nothing
  await expectError(ops().taskHistory(taskId, { continuationToken: 'not-one' }), 400, 'InputError');
});

test('history names the client who cancels or reruns, needs queue:status, and 404s for unknown tasks', async () => {
  const clientId = `test/${slugid()}`;
  const { accessToken } = await svc.auth().createClient(clientId, {
    expires: new Date(svc.clock.ms() + 3600_000).toJSON(),
    description: 'canceller',
    scopes: ['queue:cancel-task:*', 'queue:rerun-task:*'],
  });
  const taskId = slugid();
  await svc.queue().createTask(taskId, taskDef(uniqueQueue()));
  await svc.queue({ clientId, accessToken }).cancelTask(taskId);
  await svc.queue({ clientId, accessToken }).rerunTask(taskId);
  // A page of an API list may end short with a continuation (Azure ends a query page early, even
  // empty), so read the history as a client would, to the end. The whole of it: a cancel or rerun
  // whose answer was lost and retried must not show twice.
  const h = await fullHistory(taskId);
  expect(h.map((e: any) => [e.event, e.runId, e.from, e.to, e.reason, e.actor])).toEqual([
    ['scheduled', 1, null, 'pending', 'rerun', clientId],
    ['resolved', 0, 'pending', 'exception', 'canceled', clientId],
    ['scheduled', 0, null, 'pending', 'scheduled', 'static/root'],
    ['created', undefined, null, 'unscheduled', 'created', 'static/root'],
  ]);
  await expectError(ops({ clientId, accessToken }).taskHistory(taskId), 403, 'InsufficientScopes');
  await expectError(ops().taskHistory(slugid()), 404, 'ResourceNotFound');
});

test('history and state never disagree: a failure after any storage call of reportCompleted leaves both old or both new', async () => {
  const tq = uniqueQueue();
  const q = svc.queue();
  const meter = svc.services.storage.meter;
  const claimOne = async () => {
    const taskId = slugid();
    await q.createTask(taskId, taskDef(tq));
    const [c] = (await q.claimWork(tq, { workerGroup: 'wg', workerId: 'crash', tasks: 1 })).tasks;
    // As on another instance than the claim's: the report reads the row first, so a failure can
    // also hit before its write (on this instance the write is its first call).
    (svc.services.tasks as unknown as { recent: Map<string, unknown> }).recent.clear();
    return { taskId, wq: svc.queue(c.credentials) };
  };
  const probe = await claimOne();
  meter.startCounting();
  await probe.wq.reportCompleted(probe.taskId, 0);
  const calls = meter.disarm();
  expect(calls).toBeGreaterThanOrEqual(2);
  const outcomes = new Set<string>();
  for (let n = 1; n <= calls; n++) {
    const { taskId, wq } = await claimOne();
    meter.failAfterCall(n);
    const failed = await wq.reportCompleted(taskId, 0).then(
      () => false,
      () => true,
    );
    meter.disarm();
    const state = (await q.status(taskId)).status.runs[0].state;
    const newest = (await ops().taskHistory(taskId, { limit: 1 })).history[0];
    expect({ n, state, history: newest.to }).toEqual({ n, state, history: state });
    outcomes.add(`${failed}:${state}`);
    // A retry finishes the job either way.
    await wq.reportCompleted(taskId, 0);
    expect((await ops().taskHistory(taskId, { limit: 1 })).history[0].to).toBe('completed');
  }
  // The injected failure hit both before and after the task write.
  expect(outcomes).toEqual(new Set(['true:running', 'true:completed', 'false:completed']));
});
