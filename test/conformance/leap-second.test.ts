/**
 * A leap second (`23:59:60`) is valid RFC 3339 but no instant JavaScript or Azure Table Storage
 * can hold: every route that takes a date refuses it with a 400, as Taskcluster does, instead of
 * a 500 (insertTask, createUpload) or a run resumed at once (suspendRun's resumeAt).
 */
import { startTestService, TestService, taskDef, slugid, expectError } from '../helpers/service';
import { claimOne, uniqueQueue } from '../helpers/work';
import { eventsClient } from '../helpers/events';

const LEAP = '2026-12-31T23:59:60Z';

let svc: TestService;
let queue: any;
beforeAll(async () => {
  svc = await startTestService();
  const ref = await (await fetch(`${svc.rootUrl}/api/references/queue/v1/api.json`)).json();
  queue = (opts: Record<string, unknown> = {}) => new (svc.tc.createClient(ref, 'queue'))({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0, ...opts });
});
afterAll(async () => svc?.close());

test('createTask: created, deadline, expires', async () => {
  for (const field of ['created', 'deadline', 'expires']) {
    await expectError(svc.queue().createTask(slugid(), taskDef(uniqueQueue(), { [field]: LEAP })), 400);
  }
});

test('insertTask', async () => {
  const index = new svc.tc.Index({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
  const err = await expectError(
    index.insertTask(
      `leap.${slugid()
        .toLowerCase()
        .replace(/[^a-z0-9]/g, '')}`,
      { taskId: slugid(), rank: 0, data: {}, expires: LEAP },
    ),
    400,
  );
  expect(err.message).toMatch(/expires/);
});

test('createUpload', async () => {
  const o = new svc.tc.Object({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
  await expectError(o.createUpload(`tests/${slugid()}/x`, { projectId: 'p', uploadId: slugid(), expires: LEAP, proposedUploadMethods: {} }), 400);
});

test("suspendRun's resumeAt is refused, not read as now", async () => {
  const tq = uniqueQueue();
  const taskId = slugid();
  await svc.queue().createTask(taskId, taskDef(tq));
  const c = await claimOne(svc, tq, taskId);
  const err = await expectError(queue({ credentials: c.credentials }).suspendRun(taskId, c.runId, { continuation: 'x', resumeAt: LEAP }), 400);
  expect(err.message).toMatch(/resumeAt/);
  expect((await svc.queue().status(taskId)).status.runs).toEqual([expect.objectContaining({ state: 'running' })]);
});

test('createSubscription and createClient', async () => {
  await expectError(
    eventsClient(svc).createSubscription('leap', {
      bindings: [{ exchange: 'exchange/taskcluster-queue/v1/task-defined', routingKeyPattern: '#' }],
      expires: LEAP,
    }),
    400,
  );
  await expectError(svc.auth().createClient(`leap/${slugid()}`, { description: 'x', expires: LEAP, scopes: [] }), 400);
});
