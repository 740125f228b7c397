/**
 * The last worker-metadata differences from Taskcluster (issue 17): getWorker's recentTasks in
 * exact claim order, declareWorker extending the task queue's expiry, and the deprecated
 * declareProvisioner / declareWorkerType that taskcluster-client v87 still calls.
 */
import { startTestService, TestService, taskDef, slugid, expectError } from '../helpers/service';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' });
});
afterAll(async () => svc?.close());

const uniqueType = () => `t-${Math.random().toString(36).slice(2, 10)}`;
const days = (n: number) => new Date(Date.now() + n * 24 * 3600_000).toJSON();

async function clientWith(scopes: string[]) {
  const clientId = `test/${slugid()}`;
  const c = await svc.auth().createClient(clientId, { expires: new Date(Date.now() + 3600_000).toJSON(), description: 'test', scopes });
  return svc.queue({ clientId, accessToken: c.accessToken });
}

describe('recentTasks', () => {
  test('lists the claims of one claimWork in the order claimWork returned them, and the 20-entry cut keeps the latest', async () => {
    const wt = uniqueType();
    const tq = `prov/${wt}`;
    const q = svc.queue();
    const claimed: { taskId: string; runId: number }[] = [];
    // A clock of one-second resolution gives every claim of a batch the same start time, as claims
    // in one millisecond have; ordering by time then cannot tell them apart.
    const services = svc.services as { now: () => Date };
    const realNow = services.now;
    services.now = () => new Date(Math.floor(Date.now() / 1000) * 1000);
    try {
      // Batches of several tasks claimed in one call (their claims share a millisecond or two);
      // 3 × 8 = 24 claims, so the cut at 20 falls inside the first batch.
      for (let batch = 0; batch < 3; batch++) {
        const ids = Array.from({ length: 8 }, () => slugid());
        for (const id of ids) await q.createTask(id, taskDef(tq));
        const got: any[] = [];
        while (got.length < ids.length) {
          const { tasks } = await q.claimWork(tq, { workerGroup: 'wg', workerId: 'batch', tasks: ids.length - got.length });
          got.push(...tasks);
        }
        claimed.push(...got.map((c) => ({ taskId: c.status.taskId, runId: c.runId })));
        const w = await q.getWorker('prov', wt, 'wg', 'batch');
        expect(w.recentTasks).toEqual(claimed.slice(-20));
      }
      const list = await q.listWorkers('prov', wt);
      expect(list.workers[0].latestTask).toEqual(claimed[claimed.length - 1]);
    } finally {
      services.now = realNow;
    }
  });
});

describe('declareWorker with expires', () => {
  test("extends the task queue's, worker type's and provisioner's expiry to the later date, never earlier", async () => {
    const prov = `p-${uniqueType()}`;
    const wt = uniqueType();
    const tq = `${prov}/${wt}`;
    const q = svc.queue();
    await q.claimWork(tq, { workerGroup: 'wg', workerId: 'w1', tasks: 1 });
    const before = await q.getTaskQueue(tq);
    expect(Date.parse(before.expires)).toBeLessThan(Date.parse(days(6)));

    const far = days(20);
    await q.declareWorker(prov, wt, 'wg', 'w1', { expires: far });
    expect((await q.getTaskQueue(tq)).expires).toBe(far);
    expect((await q.getWorkerType(prov, wt)).expires).toBe(far);
    expect((await q.getProvisioner(prov)).expires).toBe(far);

    // An earlier date changes the worker's expiry only.
    const near = days(2);
    expect((await q.declareWorker(prov, wt, 'wg', 'w1', { expires: near })).expires).toBe(near);
    expect((await q.getTaskQueue(tq)).expires).toBe(far);
  });
});

describe('declareProvisioner and declareWorkerType (deprecated, still in taskcluster-client v87)', () => {
  test('declareProvisioner checks a scope per property and answers the provisioner, 404 for an unknown one', async () => {
    const prov = `p-${uniqueType()}`;
    const q = svc.queue();
    await expectError(q.declareProvisioner(prov, { description: 'x' }), 404, 'ResourceNotFound');
    await q.claimWork(`${prov}/wt`, { workerGroup: 'wg', workerId: 'w1', tasks: 1 });
    const p = await q.declareProvisioner(prov, { description: 'great' });
    expect(p).toMatchObject({ provisionerId: prov, stability: 'experimental', expires: expect.any(String), lastDateActive: expect.any(String), actions: [] });
    expect(p).toEqual(await q.getProvisioner(prov));
    await expectError((await clientWith([])).declareProvisioner(prov, { description: 'x' }), 403, 'InsufficientScopes');
    expect(await (await clientWith([`queue:declare-provisioner:${prov}#description`])).declareProvisioner(prov, { description: 'x' })).toEqual(p);
    await expectError(q.declareProvisioner(prov, { colour: 'red' }), 400, 'InputValidationError');
  });

  test('declareWorkerType creates or updates the task queue: description, stability, expiry only later', async () => {
    const prov = `p-${uniqueType()}`;
    const wt = uniqueType();
    const q = svc.queue();
    await expectError(q.getWorkerType(prov, wt), 404, 'ResourceNotFound');
    const created = await q.declareWorkerType(prov, wt, { description: 'big machines', stability: 'stable' });
    expect(created).toMatchObject({
      provisionerId: prov,
      workerType: wt,
      taskQueueId: `${prov}/${wt}`,
      description: 'big machines',
      stability: 'stable',
      actions: [],
    });
    expect(Date.parse(created.expires)).toBeGreaterThan(Date.parse(days(4.9)));
    expect(await q.getWorkerType(prov, wt)).toEqual(created);
    expect((await q.getTaskQueue(`${prov}/${wt}`)).description).toBe('big machines');

    const far = days(30);
    const updated = await q.declareWorkerType(prov, wt, { expires: far });
    expect(updated).toMatchObject({ description: 'big machines', stability: 'stable', expires: far });
    expect((await q.declareWorkerType(prov, wt, { expires: days(1) })).expires).toBe(far);

    await expectError(
      (await clientWith([`queue:declare-worker-type:${prov}/${wt}#description`])).declareWorkerType(prov, wt, { stability: 'deprecated' }),
      403,
      'InsufficientScopes',
    );
    const scoped = await clientWith([`queue:declare-worker-type:${prov}/${wt}#stability`]);
    expect((await scoped.declareWorkerType(prov, wt, { stability: 'deprecated' })).stability).toBe('deprecated');
    await expectError(q.declareWorkerType(prov, wt, { stability: 'shiny' }), 400, 'InputValidationError');
  });
});
