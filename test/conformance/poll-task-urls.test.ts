/**
 * The poll-URL worker protocols, driven the way old workers do it: the unmodified
 * taskcluster-client@10 for the queue API and raw HTTP against the signed URLs (the faithful
 * in-memory store's, served by the app's host; what a URL does not allow, also Azurite's).
 * Seed 000: pollTaskUrls → poll → claimTask → delete → reclaim → report.
 * Seed 001: pollTaskUrls → poll → claimWork({xmlMessage}).
 */
import { startTestService, TestService, taskDef, slugid, expectError, onAzurite } from '../helpers/service';
import { poll, pollInOrder, deleteMessage, PollUrls, PolledMessage } from '../helpers/azure-queue';
import { PRIORITIES } from '../../shared/tasks/vocabulary';
import { endpoints } from '../helpers/storage-sdk';
import { memoryStoresOf } from '../../shared/storage/storage';
import { duplicatedPuts } from '../helpers/ambiguity';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const tc10 = require('tc10');

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => svc?.close());

const PROV = 'prov';
const worker = { workerGroup: 'wg', workerId: 'w1' };
const newWorkerType = () => `wt-${Math.random().toString(36).slice(2, 10)}`;

type Creds = { clientId: string; accessToken: string; certificate?: string };

async function clientWith(scopes: string[]): Promise<Creds> {
  const clientId = `test/${slugid()}`;
  const c = await svc.auth().createClient(clientId, { expires: new Date(Date.now() + 3600_000).toJSON(), description: 'test worker', scopes });
  return { clientId, accessToken: c.accessToken };
}

/** A taskcluster-client@10 Queue (rootUrl style; v10 refuses `baseUrl`). */
function queue10(credentials: Creds | Record<string, never>, on: TestService = svc): any {
  return new tc10.Queue({ rootUrl: on.rootUrl, credentials, retries: 0 });
}

/** Credentials an old-style worker of this worker type holds. */
function workerScopes(workerType: string): string[] {
  return [
    `queue:poll-task-urls:${PROV}/${workerType}`,
    `queue:claim-task:${PROV}/${workerType}`,
    `queue:claim-work:${PROV}/${workerType}`,
    `queue:worker-id:${worker.workerGroup}/${worker.workerId}`,
  ];
}

async function createTask(workerType: string, overrides: Record<string, unknown> = {}): Promise<string> {
  const taskId = slugid();
  await svc.queue().createTask(taskId, taskDef(`${PROV}/${workerType}`, overrides));
  return taskId;
}

async function pendingCount(workerType: string): Promise<number> {
  const counts = await Promise.all(PRIORITIES.map((p) => svc.services.pending.queue(`${PROV}/${workerType}`, p).approximateCount()));
  return counts.reduce((a, b) => a + b, 0);
}

const state = async (taskId: string) => (await svc.queue().status(taskId)).status.state;

/** Copies of hints that a put whose answer was lost stored twice in this worker type's queues (Azure keeps both). */
function extraCopies(workerType: string): number {
  const names = PRIORITIES.map((p) => svc.services.pending.queueName(`${PROV}/${workerType}`, p));
  return duplicatedPuts(svc.services.storage).filter((d) => names.includes(d.queue)).length;
}

/** SAS query string of a signed URL (everything after the first `&`, past the endpoint's own query). */
function sasOf(url: string): string {
  const q = new URL(url.replace('{{messageId}}', 'x').replace('{{popReceipt}}', 'x')).searchParams;
  for (const k of ['visibilitytimeout', 'popreceipt']) q.delete(k);
  return q.toString();
}

async function status(url: string, init?: RequestInit): Promise<number> {
  const res = await fetch(url, init);
  await res.arrayBuffer();
  return res.status;
}

describe('pollTaskUrls', () => {
  test('returns one signed poll/delete URL pair per priority, highest first, for queues that exist', async () => {
    const wt = newWorkerType();
    const before = Date.now();
    const q = queue10(await clientWith(workerScopes(wt)));
    const urls: PollUrls = await q.pollTaskUrls(PROV, wt);
    expect(urls.queues).toHaveLength(PRIORITIES.length);
    const endpoint = svc.services.storage.queueEndpoint;
    urls.queues.forEach(({ signedPollUrl, signedDeleteUrl }, i) => {
      const base = `${endpoint}/${svc.services.pending.queueName(`${PROV}/${wt}`, PRIORITIES[i])}/messages`;
      expect(signedPollUrl.startsWith(`${base}?visibilitytimeout=300&`)).toBe(true);
      expect(signedDeleteUrl.startsWith(`${base}/{{messageId}}?popreceipt={{popReceipt}}&`)).toBe(true);
      const sas = new URLSearchParams(sasOf(signedPollUrl));
      expect(sas.get('sp')).toBe('p');
      expect(sas.get('spr')).toBe('https,http'); // the Azurite endpoint is http
      expect(sas.get('sig')).toBeTruthy();
      expect(new Date(sas.get('st')!).getTime()).toBeLessThanOrEqual(before - 14 * 60_000);
      expect(sas.get('se')).toBe(urls.expires.replace('.000Z', 'Z'));
    });
    const expires = new Date(urls.expires).getTime();
    expect(expires).toBeGreaterThan(before + 29 * 60_000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 30 * 60_000);
    // Every queue exists already: an empty poll is 200 with an empty list, not 404.
    for (const q of urls.queues) {
      const r = await poll(q.signedPollUrl);
      expect(r.status).toBe(200);
      expect(r.messages).toEqual([]);
    }
    // Handing out URLs does not mark the priorities as used, so claimWork does not start polling them.
    expect(await svc.services.pending.usedPriorities(`${PROV}/${wt}`, true)).toEqual([]);
    // Minting is local: once the queues exist, a refresh costs no storage call (the first call also
    // read the client for authentication).
    await q.pollTaskUrls(PROV, wt);
    const calls = svc.log.records.filter((r) => r.event === 'request' && r.fn === 'pollTaskUrls').map((r) => r.storageCalls);
    expect(calls.slice(-2)).toEqual([PRIORITIES.length + 1, 0]);
  });

  test('needs queue:poll-task-urls:<provisionerId>/<workerType>, or the legacy pair', async () => {
    const wt = newWorkerType();
    await expect(queue10(await clientWith([`queue:poll-task-urls:${PROV}/${wt}`])).pollTaskUrls(PROV, wt)).resolves.toHaveProperty('queues');
    await expect(queue10(await clientWith(['queue:poll-task-urls', `assume:worker-type:${PROV}/${wt}`])).pollTaskUrls(PROV, wt)).resolves.toHaveProperty(
      'queues',
    );
    await expectError(queue10(await clientWith(['queue:poll-task-urls'])).pollTaskUrls(PROV, wt), 403, 'InsufficientScopes');
    await expectError(queue10(await clientWith([`queue:poll-task-urls:${PROV}/${wt}`])).pollTaskUrls(PROV, 'other'), 403, 'InsufficientScopes');
    await expectError(queue10({}).pollTaskUrls(PROV, wt), 403, 'InsufficientScopes');
  });
});

describe('worker flow with claimTask (seed 000)', () => {
  test('drains the highest priority first: poll → claimTask → delete → reclaim → reportCompleted', async () => {
    const wt = newWorkerType();
    // Created lowest first, so order of creation cannot explain the order of claims.
    const low = await createTask(wt, { priority: 'low' });
    const high = await createTask(wt, { priority: 'high' });
    const highest = await createTask(wt, { priority: 'highest' });
    const q = queue10(await clientWith(workerScopes(wt)));
    const urls: PollUrls = await q.pollTaskUrls(PROV, wt);

    const order: [string, number][] = [];
    for (;;) {
      const got = await pollInOrder(urls);
      if (!got) break;
      for (const m of got.messages) {
        const { taskId, runId } = m.body;
        if (order.some(([t]) => t === taskId)) {
          // A second copy of a hint (Azure may keep both copies of a put whose answer was lost):
          // its run is no longer pending, so the claim is refused and the worker drops it.
          await expectError(q.claimTask(taskId, runId, worker), 409, 'RequestConflict');
          expect(await deleteMessage(urls.queues[got.index].signedDeleteUrl, m)).toBe(204);
          continue;
        }
        order.push([taskId, got.index]);
        const claim = await q.claimTask(taskId, runId, worker);
        expect(claim).toMatchObject({ runId, ...worker, status: { taskId, state: 'running' } });
        expect(await deleteMessage(urls.queues[got.index].signedDeleteUrl, m)).toBe(204);
        const re = await queue10(claim.credentials).reclaimTask(taskId, runId);
        expect(re.status.state).toBe('running');
        const done = await queue10(re.credentials).reportCompleted(taskId, runId);
        expect(done.status.state).toBe('completed');
      }
    }
    expect(order).toEqual([
      [highest, PRIORITIES.indexOf('highest')],
      [high, PRIORITIES.indexOf('high')],
      [low, PRIORITIES.indexOf('low')],
    ]);
    expect(await Promise.all([low, high, highest].map(state))).toEqual(['completed', 'completed', 'completed']);
    expect(await pendingCount(wt)).toBe(0);
  });

  test('&numofmessages=N returns up to N messages in one poll', async () => {
    const wt = newWorkerType();
    const ids = [await createTask(wt), await createTask(wt), await createTask(wt)];
    const q = queue10(await clientWith(workerScopes(wt)));
    const urls: PollUrls = await q.pollTaskUrls(PROV, wt);
    const lowest = urls.queues[PRIORITIES.indexOf('lowest')];
    const one = await poll(lowest.signedPollUrl);
    expect(one.messages).toHaveLength(1);
    const rest = await poll(lowest.signedPollUrl, 32);
    expect(rest.messages).toHaveLength(2 + extraCopies(wt));
    const all: PolledMessage[] = [...one.messages, ...rest.messages];
    expect([...new Set(all.map((m) => m.body.taskId))].sort()).toEqual([...ids].sort());
    for (const m of all) {
      // A second copy of a hint: this worker claimed its run already, and a repeat claim answers the same claim.
      const c = await q.claimTask(m.body.taskId, m.body.runId, worker);
      expect(c).toMatchObject({ runId: m.body.runId, ...worker, status: { state: 'running' } });
      expect(await deleteMessage(lowest.signedDeleteUrl, m)).toBe(204);
    }
    expect(await Promise.all(ids.map(state))).toEqual(['running', 'running', 'running']);
    expect(await pendingCount(wt)).toBe(0);
    // Azure caps a poll at 32 messages.
    expect((await poll(lowest.signedPollUrl, 33)).status).toBe(400);
  });

  test('a claimTask 4xx (canceled task) still lets the worker delete the message', async () => {
    const wt = newWorkerType();
    const taskId = await createTask(wt);
    await svc.queue().cancelTask(taskId);
    const q = queue10(await clientWith(workerScopes(wt)));
    const urls: PollUrls = await q.pollTaskUrls(PROV, wt);
    // Every hint polled (one, or copies of one) is for this task, refused, and deleted by the worker.
    let polled = 0;
    for (let got = await pollInOrder(urls); got; got = await pollInOrder(urls)) {
      for (const m of got.messages) {
        expect(m.body.taskId).toBe(taskId);
        await expectError(q.claimTask(taskId, m.body.runId, worker), 409, 'RequestConflict');
        expect(await deleteMessage(urls.queues[got.index].signedDeleteUrl, m)).toBe(204);
        polled++;
      }
    }
    expect(polled).toBeGreaterThanOrEqual(1);
    expect(await pendingCount(wt)).toBe(0);
    expect(await state(taskId)).toBe('exception');
  });
});

describe('claimWork with xmlMessage (seed 001)', () => {
  async function polledXml(wt: string, n?: number): Promise<{ urls: PollUrls; xml: string; messages: PolledMessage[] }> {
    const urls: PollUrls = await queue10(await clientWith(workerScopes(wt))).pollTaskUrls(PROV, wt);
    const got = await pollInOrder(urls, n);
    if (!got) throw new Error('no message to poll');
    return { urls, xml: got.xml, messages: got.messages };
  }

  test('claims the runs of a raw poll response, and the queue deletes the messages', async () => {
    const wt = newWorkerType();
    const ids = [await createTask(wt, { priority: 'high' }), await createTask(wt, { priority: 'high' })];
    const { urls, xml, messages } = await polledXml(wt, 32);
    expect(xml).toContain('<MessageId>');
    const { tasks } = await queue10(await clientWith(workerScopes(wt))).claimWork(PROV, wt, { ...worker, tasks: 2, xmlMessage: xml });
    expect(tasks.map((t: any) => t.status.taskId).sort()).toEqual([...ids].sort());
    expect(tasks[0]).toMatchObject({ runId: 0, ...worker, status: { state: 'running' } });
    expect(await pendingCount(wt)).toBe(0);
    // The worker's own delete is now a harmless 404.
    expect(await deleteMessage(urls.queues[PRIORITIES.indexOf('high')].signedDeleteUrl, messages[0])).toBe(404);
    // Sending the same response again claims nothing new.
    const again = await queue10(await clientWith(workerScopes(wt))).claimWork(PROV, wt, { ...worker, xmlMessage: xml });
    expect(again.tasks).toEqual([]);
  });

  test('an empty poll response returns no tasks at once', async () => {
    const wt = newWorkerType();
    const urls: PollUrls = await queue10(await clientWith(workerScopes(wt))).pollTaskUrls(PROV, wt);
    const empty = await poll(urls.queues[0].signedPollUrl);
    const { tasks } = await queue10(await clientWith(workerScopes(wt))).claimWork(PROV, wt, { ...worker, xmlMessage: empty.xml });
    expect(tasks).toEqual([]);
  });

  test('a forged or altered message is refused with 400 and claims nothing', async () => {
    const wt = newWorkerType();
    const taskId = await createTask(wt);
    const other = await createTask(wt);
    const { xml, messages } = await polledXml(wt, 32);
    expect(messages).toHaveLength(2 + extraCopies(wt));
    const q = queue10(await clientWith(workerScopes(wt)));
    const reencode = (m: PolledMessage, body: object) => xml.replace(m.messageText, Buffer.from(JSON.stringify(body)).toString('base64'));
    // Two different hints (a second copy of one is the same message text).
    const a = messages[0];
    const b = messages.find((m) => m.body.taskId !== a.body.taskId)!;
    const forgeries = [
      reencode(a, { ...a.body, runId: 1 }), // altered run
      reencode(a, { ...a.body, taskId: slugid() }), // altered task
      reencode(a, { taskId: a.body.taskId, runId: 0 }), // unsigned, as a 2019 hint looked
      reencode(b, { ...b.body, sig: a.body.sig }), // another message's signature
      xml.replace(a.messageText, Buffer.from('not json').toString('base64')),
      'hello',
      xml.replace('</QueueMessagesList>', ''),
    ];
    for (const xmlMessage of forgeries) {
      await expectError(q.claimWork(PROV, wt, { ...worker, xmlMessage }), 400);
    }
    expect(await Promise.all([taskId, other].map(state))).toEqual(['pending', 'pending']);
    // The untouched response still works.
    const { tasks } = await q.claimWork(PROV, wt, { ...worker, xmlMessage: xml });
    expect(tasks).toHaveLength(2);
  });

  test('a message of another worker type is refused', async () => {
    const wtA = newWorkerType();
    const wtB = newWorkerType();
    const taskId = await createTask(wtA);
    const { xml } = await polledXml(wtA);
    await expectError(queue10(await clientWith(workerScopes(wtB))).claimWork(PROV, wtB, { ...worker, xmlMessage: xml }), 400, 'InputError');
    expect(await state(taskId)).toBe('pending');
  });

  test('warns when a message was dequeued more than 10 times', async () => {
    const wt = newWorkerType();
    const taskId = await createTask(wt);
    const { xml } = await polledXml(wt);
    const tired = xml.replace(/<DequeueCount>\d+<\/DequeueCount>/, '<DequeueCount>11</DequeueCount>');
    const { tasks } = await queue10(await clientWith(workerScopes(wt))).claimWork(PROV, wt, { ...worker, xmlMessage: tired });
    expect(tasks).toHaveLength(1);
    expect(svc.log.records).toContainEqual(expect.objectContaining({ level: 'warn', event: 'hint-dequeued-many-times', taskId, dequeueCount: 11 }));
  });
});

/** The endpoints a poll URL must not reach beyond its queue (an in-memory store serves no tables). */
function storageEndpoints(on: TestService): { queueEndpoint: string; tableEndpoint?: string; blobEndpoint: string } {
  const [memory] = memoryStoresOf(on.services.storage);
  return memory ? { queueEndpoint: memory.queueEndpoint, blobEndpoint: memory.blobEndpoint } : endpoints(on.services);
}

// On the faithful in-memory store, and on Azurite: the smoke test of the Azure adapter's SAS.
describe.each([
  ['the in-memory store', () => ({})],
  ['Azurite', onAzurite],
])('what a poll URL does not allow (%s)', (_where, storageEnv) => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService(storageEnv());
  });
  afterAll(async () => svc?.close());
  const createTask = async (workerType: string) => {
    const taskId = slugid();
    await svc.queue().createTask(taskId, taskDef(`${PROV}/${workerType}`));
    return taskId;
  };
  const queue10 = (credentials: Creds | Record<string, never>, on: TestService = svc) => new tc10.Queue({ rootUrl: on.rootUrl, credentials, retries: 0 });
  const clientWith = async (scopes: string[]): Promise<Creds> => {
    const clientId = `test/${slugid()}`;
    const c = await svc.auth().createClient(clientId, { expires: new Date(Date.now() + 3600_000).toJSON(), description: 'test worker', scopes });
    return { clientId, accessToken: c.accessToken };
  };

  test('another worker type, peeking, adding, updating, clearing, queue admin, tables and blobs are all 403', async () => {
    const wtA = newWorkerType();
    const wtB = newWorkerType();
    await createTask(wtA);
    await createTask(wtB);
    const urlsA: PollUrls = await queue10(await clientWith(workerScopes(wtA))).pollTaskUrls(PROV, wtA);
    const urlsB: PollUrls = await queue10(await clientWith(workerScopes(wtB))).pollTaskUrls(PROV, wtB);
    const i = PRIORITIES.indexOf('lowest');
    const sasA = sasOf(urlsA.queues[i].signedPollUrl);
    const { queueEndpoint, tableEndpoint, blobEndpoint } = storageEndpoints(svc);
    const queueA = `${queueEndpoint}/${svc.services.pending.queueName(`${PROV}/${wtA}`, 'lowest')}`;
    const queueB = `${queueEndpoint}/${svc.services.pending.queueName(`${PROV}/${wtB}`, 'lowest')}`;
    const xmlBody = { method: 'POST', body: `<QueueMessage><MessageText>${Buffer.from('{}').toString('base64')}</MessageText></QueueMessage>` };

    // Another worker type's queue: neither poll nor delete.
    expect(await status(`${queueB}/messages?visibilitytimeout=300&${sasA}`)).toBe(403);
    const msgB = (await poll(urlsB.queues[i].signedPollUrl)).messages[0];
    const deleteBWithA = `${queueB}/messages/${encodeURIComponent(msgB.messageId)}?popreceipt=${encodeURIComponent(msgB.popReceipt)}&${sasA}`;
    expect(await status(deleteBWithA, { method: 'DELETE' })).toBe(403);
    expect(await deleteMessage(urlsB.queues[i].signedDeleteUrl, msgB)).toBe(204);

    // Own queue: only dequeue and delete.
    const msgA = (await poll(urlsA.queues[i].signedPollUrl)).messages[0];
    expect(msgA).toBeDefined();
    expect(await status(`${queueA}/messages?peekonly=true&${sasA}`)).toBe(403);
    expect(await status(`${queueA}/messages?${sasA}`, xmlBody)).toBe(403); // put message
    const updateA = `${queueA}/messages/${encodeURIComponent(msgA.messageId)}?popreceipt=${encodeURIComponent(msgA.popReceipt)}&visibilitytimeout=0&${sasA}`;
    expect(await status(updateA, { ...xmlBody, method: 'PUT' })).toBe(403); // update message
    expect(await status(`${queueA}/messages?${sasA}`, { method: 'DELETE' })).toBe(403); // clear
    expect(await status(`${queueA}?comp=metadata&${sasA}`)).toBe(403);
    expect(await status(`${queueA}?${sasA}`, { method: 'DELETE' })).toBe(403);
    expect(await status(`${queueEndpoint}?comp=list&${sasA}`)).toBe(403);

    // Other storage services of the account.
    const prefix = svc.services.storage.prefix;
    if (tableEndpoint) {
      expect(await status(`${tableEndpoint}/${prefix}Tasks()?${sasA}`, { headers: { accept: 'application/json;odata=nometadata' } })).toBe(403);
      expect(
        await status(`${tableEndpoint}/${prefix}Tasks?${sasA}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ PartitionKey: 'x', RowKey: 'y' }),
        }),
      ).toBe(403);
    }
    expect(await status(`${blobEndpoint}/${prefix}-artifacts?restype=container&comp=list&${sasA}`)).toBe(403);
    expect(await status(`${blobEndpoint}/${prefix}-artifacts/x?${sasA}`, { method: 'PUT', headers: { 'x-ms-blob-type': 'BlockBlob' }, body: 'x' })).toBe(403);

    // The message that was polled with the right URL is still deletable with it.
    expect(await deleteMessage(urlsA.queues[i].signedDeleteUrl, msgA)).toBe(204);
  });

  test('QUEUE_SAS_PROTOCOL=https makes the URLs useless over http', async () => {
    const httpsOnly = await startTestService({ ...storageEnv(), QUEUE_SAS_PROTOCOL: 'https' });
    try {
      const wt = newWorkerType();
      const urls: PollUrls = await queue10(httpsOnly.root, httpsOnly).pollTaskUrls(PROV, wt);
      expect(new URLSearchParams(sasOf(urls.queues[0].signedPollUrl)).get('spr')).toBe('https');
      expect((await poll(urls.queues[0].signedPollUrl)).status).toBe(403);
    } finally {
      await httpsOnly.close();
    }
  });

  test('QUEUE_PUBLIC_QUEUE_ENDPOINT is the endpoint workers are given', async () => {
    const pub = await startTestService({ ...storageEnv(), QUEUE_PUBLIC_QUEUE_ENDPOINT: 'https://queues.example.com/acct/' });
    try {
      const urls: PollUrls = await queue10(pub.root, pub).pollTaskUrls(PROV, newWorkerType());
      for (const q of urls.queues) {
        expect(q.signedPollUrl.startsWith('https://queues.example.com/acct/')).toBe(true);
        expect(q.signedPollUrl).not.toContain('acct//');
        expect(new URLSearchParams(sasOf(q.signedPollUrl)).get('spr')).toBe('https');
      }
    } finally {
      await pub.close();
    }
  });
});
