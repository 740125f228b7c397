/**
 * Two data accounts (a second Azurite, `QUEUE_STORAGE_MORE_CONNECTIONS`), driven through
 * taskcluster-client: lifecycles, artifacts, dependencies across accounts, poll URLs and the
 * reaper, with the data checked on each account; and an account added to a deployment that
 * already has tasks, which stay where they were and are still found.
 */
import { startAzurite, Azurite } from '../../shared/local/azurite';
import { AccountsStorage, jumpHash } from '../../shared/storage/accounts';
import { taskRowKey } from '../../shared/tasks/model';
import { blobNameFor } from '../../shared/artifacts/blobs';
import { onAzurite, startTestService, TestService, taskDef, slugid } from '../helpers/service';
import { claimOne, reapUntil, status, uniqueQueue, W1 } from '../helpers/work';
import { pollInOrder, deleteMessage } from '../helpers/azure-queue';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const tc10 = require('tc10');

let second: Azurite;
let svc: TestService;
beforeAll(async () => {
  second = await startAzurite();
  // Two Azurite accounts: what the router does with real account endpoints.
  svc = await startTestService({ ...onAzurite(), QUEUE_STORAGE_MORE_CONNECTIONS: second.connectionString, QUEUE_CLAIM_WORK_POLL_S: '1' });
});
afterAll(async () => {
  await svc?.close();
  await second?.stop();
});

const routed = (on: TestService = svc) => on.services.storage as AccountsStorage;
/** A fresh taskId that two accounts place on `account`. */
function taskIdOn(account: number): string {
  for (;;) {
    const id = slugid();
    if (jumpHash(id, 2) === account) return id;
  }
}
/** A fresh task queue whose pending queues two accounts place on `account`. */
function queueOn(account: number, on: TestService = svc): string {
  for (;;) {
    const q = uniqueQueue();
    if (jumpHash(on.services.pending.queueName(q, 'lowest').replace(/-\d$/, ''), 2) === account) return q;
  }
}
/** Which accounts hold the task's row. */
async function rowsOf(taskId: string, on: TestService = svc): Promise<number[]> {
  const found = await Promise.all(routed(on).accounts.map((a) => a.table('Tasks').get(taskId, taskRowKey(taskId))));
  return found.flatMap((row, i) => (row ? [i] : []));
}

async function uploadAndComplete(taskId: string, claim: any, body: string, on: TestService = svc): Promise<void> {
  const wq = on.queue(claim.credentials);
  const bytes = Buffer.from(body);
  const { putUrl } = await wq.createArtifact(taskId, claim.runId, 'public/out.txt', {
    storageType: 's3',
    contentType: 'text/plain',
    expires: new Date(Date.now() + 3600_000).toJSON(),
    contentLength: bytes.length,
  });
  const put = await fetch(putUrl, { method: 'PUT', headers: { 'content-type': 'text/plain', 'content-length': String(bytes.length) }, body: bytes });
  expect(put.status).toBe(201);
  await wq.reportCompleted(taskId, claim.runId);
}

async function readArtifact(taskId: string, on: TestService = svc): Promise<{ url: string; text: string }> {
  const { url } = await on.queue().getArtifact(taskId, 0, 'public/out.txt');
  const res = await fetch(url);
  expect(res.status).toBe(200);
  return { url, text: await res.text() };
}

test('lifecycles, artifacts and dependencies across two accounts; each account holds its own tasks', async () => {
  const queues = [queueOn(0), queueOn(1)];
  // Task i runs on queue i % 2 and lives on account ⌊i/2⌋: every pairing of task and queue account.
  const ids = [taskIdOn(0), taskIdOn(0), taskIdOn(1), taskIdOn(1)];
  for (const [i, taskId] of ids.entries()) await svc.queue().createTask(taskId, taskDef(queues[i % 2]));
  // A dependent on the other account than its dependency, in the dependency's group.
  const dependent = taskIdOn(1);
  await svc.queue().createTask(dependent, taskDef(queues[0], { dependencies: [ids[0]], taskGroupId: ids[0] }));
  expect((await status(svc, dependent)).state).toBe('unscheduled');

  for (const [i, taskId] of ids.entries()) {
    const claim = await claimOne(svc, queues[i % 2], taskId);
    await uploadAndComplete(taskId, claim, `output of ${taskId}`);
  }
  for (const [i, taskId] of ids.entries()) {
    const account = i < 2 ? 0 : 1;
    expect((await status(svc, taskId)).state).toBe('completed');
    expect(await rowsOf(taskId)).toEqual([account]);
    const { url, text } = await readArtifact(taskId);
    expect(text).toBe(`output of ${taskId}`);
    // The download URL points at the account that holds the bytes.
    expect(new URL(url).port === String(second.ports.blob)).toBe(account === 1);
    expect(await routed().accounts[account].artifacts.exists(blobNameFor(taskId, 0, 'public/out.txt'))).toBe(true);
    expect(await routed().accounts[1 - account].artifacts.exists(blobNameFor(taskId, 0, 'public/out.txt'))).toBe(false);
    expect((await svc.queue().listArtifacts(taskId, 0)).artifacts.map((a: any) => a.name)).toEqual(['public/out.txt']);
  }

  // The dependency (account 0) scheduled its dependent (account 1); the group lists both.
  expect((await status(svc, dependent)).state).toBe('pending');
  expect(await rowsOf(dependent)).toEqual([1]);
  const group = await svc.queue().listTaskGroup(ids[0]);
  expect(group.tasks.map((t: any) => t.status.taskId).sort()).toEqual([ids[0], dependent].sort());
  const c = await claimOne(svc, queues[0], dependent);
  await svc.queue(c.credentials).reportCompleted(dependent, c.runId);

  // Both accounts served tables, queues and blobs.
  const perAccount = routed().meter.byAccount;
  expect(perAccount.get(0)).toBeGreaterThan(0);
  expect(perAccount.get(1)).toBeGreaterThan(0);
});

test('poll URLs of a task queue on the second account point at it and claim its tasks (taskcluster-client@10)', async () => {
  const tq = queueOn(1);
  const [provisionerId, workerType] = tq.split('/');
  const taskId = taskIdOn(0);
  await svc.queue().createTask(taskId, taskDef(tq));
  const creds = await svc.auth().createClient(`test/${slugid()}`, {
    expires: new Date(Date.now() + 3600_000).toJSON(),
    description: 'poll-url worker',
    scopes: [`queue:poll-task-urls:${tq}`, `queue:claim-task:${tq}`, `queue:worker-id:${W1.workerGroup}/${W1.workerId}`],
  });
  const q10 = new tc10.Queue({ rootUrl: svc.rootUrl, credentials: { clientId: creds.clientId, accessToken: creds.accessToken }, retries: 0 });
  const urls = await q10.pollTaskUrls(provisionerId, workerType);
  for (const u of urls.queues) expect(new URL(u.signedPollUrl).port).toBe(String(second.ports.queue));
  const polled = await pollInOrder(urls);
  expect(polled?.messages[0].body).toMatchObject({ taskId, runId: 0 });
  const claim = await q10.claimTask(taskId, 0, W1);
  expect(await deleteMessage(urls.queues[polled!.index].signedDeleteUrl, polled!.messages[0])).toBe(204);
  await new tc10.Queue({ rootUrl: svc.rootUrl, credentials: claim.credentials, retries: 0 }).reportCompleted(taskId, 0);
  expect((await status(svc, taskId)).state).toBe('completed');
});

test('the reaper resolves deadlines of tasks on both accounts', async () => {
  const tq = uniqueQueue();
  const ids = [taskIdOn(0), taskIdOn(1)];
  const deadline = new Date(Date.now() + 2000).toJSON();
  for (const taskId of ids) await svc.queue().createTask(taskId, taskDef(tq, { deadline }));
  // One claimed (its claim-expiry trigger dropped at resolution), one left pending.
  await claimOne(svc, tq, undefined);
  await reapUntil(svc, async () => (await Promise.all(ids.map((id) => status(svc, id)))).every((s) => s.state === 'exception'), 15_000);
  for (const id of ids) expect((await status(svc, id)).runs.at(-1).reasonResolved).toBe('deadline-exceeded');
});

test('an account added later moves nothing: tasks stored before are found, new ones use it', async () => {
  const prefix = 'acc' + Math.random().toString(36).slice(2, 8);
  const one = await startTestService({ ...onAzurite(), QUEUE_STORAGE_PREFIX: prefix });
  const secrets = {
    QUEUE_STORAGE_PREFIX: prefix,
    QUEUE_ROOT_ACCESS_TOKEN: one.services.config.rootAccessToken,
    QUEUE_TOKEN_ENCRYPTION_KEY: one.services.config.tokenEncryptionKey.toString('base64'),
  };
  // Stored with one account, under keys that two accounts would place on the second.
  const old = taskIdOn(1);
  const tq = queueOn(0, one);
  // Pending in a task queue whose pending queues two accounts place on the new one.
  const movedTq = queueOn(1, one);
  const waiting = taskIdOn(0);
  await one.queue().createTask(waiting, taskDef(movedTq));
  await one.queue().createTask(old, taskDef(tq));
  await uploadAndComplete(old, await claimOne(one, tq, old), 'from before', one);
  const dependency = taskIdOn(1);
  const dependent = taskIdOn(1);
  await one.queue().createTask(dependency, taskDef(tq));
  await one.queue().createTask(dependent, taskDef(tq, { dependencies: [dependency] }));
  // A group no task is named after (its rows in the Tasks partition of its id), placed by that id.
  const group = taskIdOn(1);
  const member = taskIdOn(0);
  await one.queue().createTask(member, taskDef(tq, { taskGroupId: group }));
  await one.close();

  const two = await startTestService({ ...onAzurite(), ...secrets, QUEUE_STORAGE_MORE_CONNECTIONS: second.connectionString, QUEUE_CLAIM_WORK_POLL_S: '1' });
  try {
    expect(routed(two).generations).toEqual([1, 2]);
    expect(await rowsOf(old, two)).toEqual([0]);
    expect((await status(two, old)).state).toBe('completed');
    expect((await readArtifact(old, two)).text).toBe('from before');
    // The old dependency, claimed and completed now, still schedules its old dependent.
    const c = await claimOne(two, tq, dependency);
    await two.queue(c.credentials).reportCompleted(dependency, c.runId);
    expect((await status(two, dependent)).state).toBe('pending');
    expect(await rowsOf(dependent, two)).toEqual([0]);
    // Changes to an old task stay on its account.
    await two.queue().rerunTask(old);
    expect((await status(two, old)).runs).toHaveLength(2);
    expect(await rowsOf(old, two)).toEqual([0]);

    // Its hint, put on the first account, is still claimed; new hints of that task queue go to the second.
    const w = await claimOne(two, movedTq, waiting);
    await two.queue(w.credentials).reportCompleted(waiting, w.runId);
    const next = taskIdOn(0);
    await two.queue().createTask(next, taskDef(movedTq));
    const queueName = two.services.pending.queueName(movedTq, 'lowest');
    expect(await routed(two).accounts[1].queueNamed(queueName, 'pending').approximateCount()).toBe(1);
    expect((await claimOne(two, movedTq, next)).status.taskId).toBe(next);

    const fresh = taskIdOn(1);
    await two.queue().createTask(fresh, taskDef(queueOn(0, two)));
    expect(await rowsOf(fresh, two)).toEqual([1]);
    // The old group is found by its meta row on the first account; a new member joins it there.
    const joiner = taskIdOn(1);
    await two.queue().createTask(joiner, taskDef(tq, { taskGroupId: group }));
    expect((await two.queue().listTaskGroup(group)).tasks.map((t: any) => t.status.taskId).sort()).toEqual([member, joiner].sort());
    expect((await routed(two).accounts[1].table('Tasks').page({ partitionKey: group }, 10)).items).toEqual([]);

    // Creating the old task again is still idempotent, not a second copy on the new account.
    await expect(two.queue().createTask(old, taskDef(tq))).rejects.toMatchObject({ statusCode: 409 });
    expect(await rowsOf(old, two)).toEqual([0]);
  } finally {
    await two.close();
  }
});
