/**
 * Workers (acceptance case 25): claimWork registers the worker and its task queue and records its
 * claims; quarantine; declareWorker; listWorkers; and "seen" bookkeeping that writes at most once per
 * claimWork call. Driven by taskcluster-client v87 over HTTP against Azurite.
 */
import { startTestService, TestService, taskDef, slugid, expectError } from '../helpers/service';
import { encodeKey } from '../../shared/storage/keys';
import { passTime } from '../helpers/work';

const POLL_S = 1;
/** recentTasks write interval on the service's clock: real time never reaches it, only the test moves the clock past it. */
const RECENT_WRITE_MS = 60_000;
let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: String(POLL_S) }, { tuning: { recentTasksWriteMs: RECENT_WRITE_MS } });
});
afterAll(async () => svc?.close());

const uniqueType = () => `t-${Math.random().toString(36).slice(2, 10)}`;

function workerWrites(): number {
  const ops = svc.services.storage.meter.snapshot().byOp;
  return (ops['Workers.insert'] ?? 0) + (ops['Workers.merge'] ?? 0) + (ops['Workers.update'] ?? 0) + (ops['Workers.upsert'] ?? 0);
}
const workerReads = () => svc.services.storage.meter.snapshot().byOp['Workers.get'] ?? 0;

async function clientWith(scopes: string[]) {
  const clientId = `test/${slugid()}`;
  const c = await svc.auth().createClient(clientId, { expires: new Date(Date.now() + 3600_000).toJSON(), description: 'test', scopes });
  return svc.queue({ clientId, accessToken: c.accessToken });
}

test('claimWork registers the worker and its task queue; later calls read nothing and write only the claims they list', async () => {
  const wt = uniqueType();
  const tq = `prov/${wt}`;
  const q = svc.queue();
  await expectError(q.getWorker('prov', wt, 'wg', 'w1'), 404, 'ResourceNotFound');
  expect((await q.claimWork(tq, { workerGroup: 'wg', workerId: 'w1', tasks: 1 })).tasks).toEqual([]);
  const w = await q.getWorker('prov', wt, 'wg', 'w1');
  expect(w).toEqual({
    provisionerId: 'prov',
    workerType: wt,
    taskQueueId: tq,
    workerGroup: 'wg',
    workerId: 'w1',
    recentTasks: [],
    expires: expect.any(String),
    firstClaim: expect.any(String),
    lastDateActive: expect.any(String),
    actions: [],
  });
  expect(Date.parse(w.expires) - Date.now()).toBeGreaterThan(23 * 3600_000);
  expect((await q.getTaskQueue(tq)).taskQueueId).toBe(tq);

  // Later calls: no worker-row read while the instance's short cache of the row is fresh
  // (SEEN_CACHE_MS); no write for an empty poll; for calls that claimed, one recentTasks write per
  // recentTasksWriteMs: the first claim's at once, the next ones together at the interval's end.
  const [writes, reads] = [workerWrites(), workerReads()];
  expect((await q.claimWork(tq, { workerGroup: 'wg', workerId: 'w1', tasks: 1 })).tasks).toEqual([]);
  expect(workerWrites() - writes).toBe(0);
  const started = svc.clock.ms();
  const claimed: { taskId: string; runId: number }[] = [];
  const claimOne = async () => {
    await q.createTask(slugid(), taskDef(tq));
    const [c] = (await q.claimWork(tq, { workerGroup: 'wg', workerId: 'w1', tasks: 1 })).tasks;
    claimed.push({ taskId: c.status.taskId, runId: c.runId });
  };
  for (let i = 0; i < 3; i++) await claimOne();
  expect(svc.clock.ms() - started).toBeLessThan(RECENT_WRITE_MS); // else the test proves nothing
  expect(workerWrites() - writes).toBe(1);
  expect(workerReads() - reads).toBe(0);
  // This instance shows every claim at once; another one (the stored row) the first, then all of
  // them once the interval has passed.
  expect((await q.getWorker('prov', wt, 'wg', 'w1')).recentTasks).toEqual(claimed);
  const stored = async () => JSON.parse(((await svc.services.storage.table('Workers').get(encodeKey(tq), 'wg~w1'))!.recentTasks as string) ?? '[]');
  expect(await stored()).toEqual(claimed.slice(0, 1));
  // Once the interval has passed on the service's clock, the worker's next claim writes the waiting
  // ones with its own, in claim order (the interval's timer, on real time: test/unit/workers-registry.test.ts).
  await passTime(RECENT_WRITE_MS);
  await claimOne();
  expect(await stored()).toEqual(claimed);
  expect(workerWrites() - writes).toBe(2);
  expect((await q.getWorker('prov', wt, 'wg', 'w1')).lastDateActive).toBe(w.lastDateActive);

  // Once lastDateActive is older than the interval, the next call refreshes it (one guarded write).
  const table = svc.services.storage.table('Workers');
  const old = new Date(Date.now() - 31 * 60_000).toJSON();
  await table.merge({ partitionKey: encodeKey(tq), rowKey: 'wg~w1', lastDateActive: old }, '*');
  (svc.services.workers as unknown as { seenCache: Map<string, unknown> }).seenCache.clear(); // as if SEEN_CACHE_MS had passed
  await q.claimWork(tq, { workerGroup: 'wg', workerId: 'w1', tasks: 1 });
  const refreshed = await q.getWorker('prov', wt, 'wg', 'w1');
  expect(Date.parse(refreshed.lastDateActive)).toBeGreaterThan(Date.now() - 60_000);
  expect(refreshed.firstClaim).toBe(w.firstClaim);
});

test("getWorker shows the worker's 20 most recent claims, oldest first", async () => {
  const wt = uniqueType();
  const tq = `prov/${wt}`;
  const q = svc.queue();
  const claimed: { taskId: string; runId: number }[] = [];
  for (let i = 0; i < 22; i++) {
    const taskId = slugid();
    await q.createTask(taskId, taskDef(tq));
    const [c] = (await q.claimWork(tq, { workerGroup: 'wg', workerId: 'busy', tasks: 1 })).tasks;
    claimed.push({ taskId: c.status.taskId, runId: c.runId });
    if (i === 0) await svc.queue(c.credentials).reportCompleted(c.status.taskId, 0);
  }
  const w = await q.getWorker('prov', wt, 'wg', 'busy');
  expect(w.recentTasks).toEqual(claimed.slice(-20));
  const list = await q.listWorkers('prov', wt);
  expect(list.workers).toEqual([{ workerGroup: 'wg', workerId: 'busy', firstClaim: w.firstClaim, lastDateActive: w.lastDateActive, latestTask: claimed[21] }]);
});

test('quarantineWorker: getWorker shows it, listWorkers filters on it, claimWork answers [] after the full poll', async () => {
  const wt = uniqueType();
  const tq = `prov/${wt}`;
  const q = svc.queue();
  await expectError(q.quarantineWorker('prov', wt, 'wg', 'nobody', { quarantineUntil: new Date(Date.now() + 3600_000).toJSON() }), 404, 'ResourceNotFound');
  await q.claimWork(tq, { workerGroup: 'wg', workerId: 'bad', tasks: 1 });
  await q.claimWork(tq, { workerGroup: 'wg', workerId: 'good', tasks: 1 });
  const until = new Date(Date.now() + 3600_000).toJSON();
  const w = await q.quarantineWorker('prov', wt, 'wg', 'bad', { quarantineUntil: until, quarantineInfo: 'disk is failing' });
  expect(w).toMatchObject({
    workerId: 'bad',
    quarantineUntil: until,
    quarantineDetails: [{ clientId: 'static/root', quarantineUntil: until, quarantineInfo: 'disk is failing', updatedAt: expect.any(String) }],
  });
  expect((await q.getWorker('prov', wt, 'wg', 'bad')).quarantineUntil).toBe(until);

  expect((await q.listWorkers('prov', wt, { quarantined: true })).workers.map((x: any) => x.workerId)).toEqual(['bad']);
  expect((await q.listWorkers('prov', wt, { quarantined: false })).workers.map((x: any) => x.workerId)).toEqual(['good']);
  const both = await q.listWorkers('prov', wt, { limit: 1 });
  expect(both.workers).toHaveLength(1);
  const rest = await q.listWorkers('prov', wt, { limit: 1, continuationToken: both.continuationToken });
  expect([...both.workers, ...rest.workers].map((x: any) => x.workerId).sort()).toEqual(['bad', 'good']);
  expect((await q.listWorkers('prov', wt)).workers.find((x: any) => x.workerId === 'bad').quarantineUntil).toBe(until);

  const taskId = slugid();
  await q.createTask(taskId, taskDef(tq));
  const started = Date.now();
  expect(await q.claimWork(tq, { workerGroup: 'wg', workerId: 'bad', tasks: 1 })).toEqual({ tasks: [] });
  expect(Date.now() - started).toBeGreaterThanOrEqual(POLL_S * 1000 - 50);
  expect((await q.status(taskId)).status.state).toBe('pending');
  // claimTask (deprecated) answers {} to a quarantined worker.
  expect(await q.claimTask(taskId, 0, { workerGroup: 'wg', workerId: 'bad' })).toEqual({});
  expect((await q.status(taskId)).status.state).toBe('pending');

  // Lifting the quarantine (until now) lets it claim again.
  const lifted = await q.quarantineWorker('prov', wt, 'wg', 'bad', { quarantineUntil: new Date().toJSON() });
  expect(lifted.quarantineDetails).toHaveLength(2);
  const { tasks } = await q.claimWork(tq, { workerGroup: 'wg', workerId: 'bad', tasks: 1 });
  expect(tasks.map((t: any) => t.status.taskId)).toEqual([taskId]);
  expect((await q.listWorkers('prov', wt, { quarantined: true })).workers).toEqual([]);
  await expectError(q.listWorkers('prov', wt, { quarantined: 'maybe' } as any), 400, 'InvalidRequestArguments');
  await expectError((await clientWith([])).quarantineWorker('prov', wt, 'wg', 'good', { quarantineUntil: until }), 403, 'InsufficientScopes');
});

test('declareWorker needs expires, cannot set quarantineUntil, and needs a scope per property', async () => {
  const wt = uniqueType();
  const q = svc.queue();
  await expectError(q.declareWorker('prov', wt, 'wg', 'decl', {}), 400, 'InputValidationError');
  await expectError(
    q.declareWorker('prov', wt, 'wg', 'decl', { expires: new Date(Date.now() + 3600_000).toJSON(), quarantineUntil: new Date().toJSON() }),
    400,
    'InputValidationError',
  );
  const expires = new Date(Date.now() + 7 * 24 * 3600_000).toJSON();
  await expectError((await clientWith([])).declareWorker('prov', wt, 'wg', 'decl', { expires }), 403, 'InsufficientScopes');
  const scoped = await clientWith([`queue:declare-worker:prov/${wt}/wg/decl#expires`]);
  const w = await scoped.declareWorker('prov', wt, 'wg', 'decl', { expires });
  expect(w).toMatchObject({ provisionerId: 'prov', workerType: wt, workerGroup: 'wg', workerId: 'decl', expires, recentTasks: [] });
  expect(w.quarantineUntil).toBeUndefined();
  const later = new Date(Date.now() + 8 * 24 * 3600_000).toJSON();
  expect((await q.declareWorker('prov', wt, 'wg', 'decl', { expires: later })).expires).toBe(later);
  expect((await q.getTaskQueue(`prov/${wt}`)).taskQueueId).toBe(`prov/${wt}`);
});
