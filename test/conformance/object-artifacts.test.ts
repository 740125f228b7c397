/**
 * Object artifacts and the Object API (issue 17), driven by the unmodified taskcluster-client v87:
 * its `upload` and `downloadArtifact` helpers round-trip files through a claimed run (small ones
 * inline, large ones through putUrl), with Taskcluster's visibility, credential and hash rules.
 */
import crypto from 'node:crypto';
import { Writable } from 'node:stream';
import { startTestService, TestService, taskDef, slugid, expectError } from '../helpers/service';
import { reapUntil, uploadObject } from '../helpers/work';
import { sweeperFor } from '../helpers/crash';
import { ObjectBlobs } from '../../shared/storage/object-blobs';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' });
});
afterAll(async () => svc?.close());

const worker = { workerGroup: 'wg', workerId: 'w1' };
const inAnHour = () => new Date(Date.now() + 3600_000).toJSON();

async function claimedTask(overrides: Record<string, unknown> = {}) {
  const taskQueueId = `prov/obj-${Math.random().toString(36).slice(2, 8)}`;
  const taskId = slugid();
  await svc.queue().createTask(taskId, taskDef(taskQueueId, { projectId: 'proj-a', ...overrides }));
  const { tasks } = await svc.queue().claimWork(taskQueueId, { ...worker, tasks: 1 });
  expect(tasks).toHaveLength(1);
  return { taskId, wq: svc.queue(tasks[0].credentials) };
}

const objectClient = (credentials: unknown) => new svc.tc.Object({ rootUrl: svc.rootUrl, credentials, retries: 0 });

/** What a worker does: createArtifact, upload with the client's helper, finishArtifact. */
async function uploadArtifact(wq: any, taskId: string, name: string, data: Buffer, contentType: string, expires = inAnHour()) {
  const res = await wq.createArtifact(taskId, 0, name, { storageType: 'object', contentType, expires, contentLength: data.length });
  await uploadObject(svc, res, data, contentType);
  await wq.finishArtifact(taskId, 0, name, { uploadId: res.uploadId });
  return res;
}

async function downloadArtifact(taskId: string, name: string, queue = svc.queue()): Promise<{ contentType: string; data: Buffer }> {
  const chunks: Buffer[] = [];
  const contentType = await svc.tc.downloadArtifact({
    taskId,
    name,
    queue,
    retries: 0,
    streamFactory: async () =>
      new Writable({
        write(chunk, _enc, cb) {
          chunks.push(Buffer.from(chunk));
          cb();
        },
      }),
  });
  return { contentType, data: Buffer.concat(chunks) };
}

describe('object artifacts through taskcluster-client upload / downloadArtifact', () => {
  test.each([
    ['small, inline', 'public/small.txt', Buffer.from('hello, object world\n'), 'text/plain'],
    ['large, through putUrl', 'public/big.bin', crypto.randomBytes(3 * 1024 * 1024 + 17), 'application/octet-stream'],
  ])(
    '%s: invisible until finished, then byte-identical downloads',
    async (_label, name, data, contentType) => {
      const { taskId, wq } = await claimedTask();
      const expires = inAnHour();
      const res = await wq.createArtifact(taskId, 0, name, { storageType: 'object', contentType, expires, contentLength: data.length });
      expect(Object.keys(res).sort()).toEqual(['credentials', 'expires', 'name', 'projectId', 'storageType', 'uploadId']);
      expect(res).toMatchObject({ storageType: 'object', name: `t/${taskId}/0/${name}`, projectId: 'proj-a', expires });
      expect(res.credentials.clientId).toBe(`artifact-upload/${taskId}/0/on/wg/w1`);

      // Not present before finishArtifact.
      await expectError(svc.queue().getArtifact(taskId, 0, name), 404, 'ResourceNotFound');
      await expectError(svc.queue().artifact(taskId, 0, name), 404, 'ResourceNotFound');
      await expectError(svc.queue().artifactInfo(taskId, 0, name), 404, 'ResourceNotFound');
      expect((await svc.queue().listArtifacts(taskId, 0)).artifacts).toEqual([]);
      await expectError(wq.finishArtifact(taskId, 0, name, { uploadId: res.uploadId }), 400, 'InputError'); // nothing uploaded yet

      await uploadObject(svc, res, data, contentType);
      await expectError(wq.finishArtifact(taskId, 0, name, { uploadId: slugid() }), 400, 'InputError');
      await expectError(svc.queue().getArtifact(taskId, 0, name), 404, 'ResourceNotFound');
      await wq.finishArtifact(taskId, 0, name, { uploadId: res.uploadId });
      await wq.finishArtifact(taskId, 0, name, { uploadId: res.uploadId }); // idempotent

      const got = await downloadArtifact(taskId, name);
      expect(got.contentType).toBe(contentType);
      expect(got.data.equals(data)).toBe(true);

      const content = await svc.queue().artifact(taskId, 0, name);
      expect(Object.keys(content).sort()).toEqual(['credentials', 'name', 'storageType']);
      expect(content).toMatchObject({ storageType: 'object', name: res.name });
      expect((await svc.queue().listArtifacts(taskId, 0)).artifacts).toEqual([
        { storageType: 'object', name, expires, contentType, contentLength: data.length },
      ]);

      // getArtifact: a 303 to the data (the client hands back the JSON body).
      const redirect = await svc.queue().getLatestArtifact(taskId, name);
      expect(redirect.storageType).toBe('object');
      const r = await fetch(redirect.url);
      expect(r.status).toBe(200);
      expect(Buffer.from(await r.arrayBuffer()).equals(data)).toBe(true);

      // The metadata carries the hashes the client computed.
      const meta = await objectClient(content.credentials).object(res.name);
      expect(meta).toEqual({
        projectId: 'proj-a',
        expires,
        hashes: { sha256: crypto.createHash('sha256').update(data).digest('hex'), sha512: expect.any(String) },
      });
    },
    60_000,
  );

  test('upload credentials reach that one object only; download credentials only read it', async () => {
    const { taskId, wq } = await claimedTask();
    const res = await uploadArtifact(wq, taskId, 'private/a.txt', Buffer.from('a'), 'text/plain');
    const other = await wq.createArtifact(taskId, 0, 'private/b.txt', { storageType: 'object', contentType: 'text/plain', expires: inAnHour() });
    const up = objectClient(res.credentials);
    const body = { projectId: 'proj-a', uploadId: other.uploadId, expires: other.expires, proposedUploadMethods: {} };
    await expectError(up.createUpload(other.name, body), 403, 'InsufficientScopes');
    await expectError(up.createUpload(other.name, { ...body, projectId: 'proj-b' }), 403, 'InsufficientScopes');
    await expectError(up.startDownload(res.name, { acceptDownloadMethods: { getUrl: true } }), 403, 'InsufficientScopes');

    const { credentials } = await svc.queue().artifact(taskId, 0, 'private/a.txt');
    const down = objectClient(credentials);
    expect((await down.startDownload(res.name, { acceptDownloadMethods: { getUrl: true } })).method).toBe('getUrl');
    await expectError(down.startDownload(other.name, { acceptDownloadMethods: { getUrl: true } }), 403, 'InsufficientScopes');
    await expectError(down.createUpload(res.name, body), 403, 'InsufficientScopes');
    // Reading the artifact needs queue:get-artifact:<name>, as for every other type.
    await expectError(downloadArtifact(taskId, 'private/a.txt', svc.queue(null)), 403, 'InsufficientScopes');
  });

  test('a repeated createArtifact before finishing keeps the upload; after finishing it conflicts', async () => {
    const { taskId, wq } = await claimedTask();
    const expires = inAnHour();
    const first = await wq.createArtifact(taskId, 0, 'public/r.txt', { storageType: 'object', contentType: 'text/plain', expires });
    const again = await wq.createArtifact(taskId, 0, 'public/r.txt', { storageType: 'object', contentType: 'text/plain', expires });
    expect(again.uploadId).toBe(first.uploadId);
    await expectError(wq.createArtifact(taskId, 0, 'public/r.txt', { storageType: 'object', contentType: 'text/html', expires }), 409, 'RequestConflict');
    await expectError(wq.finishArtifact(taskId, 0, 'public/nothing.txt', { uploadId: first.uploadId }), 404, 'ResourceNotFound');
    await uploadArtifact(wq, taskId, 'public/done.txt', Buffer.from('done'), 'text/plain', expires);
    await expectError(wq.createArtifact(taskId, 0, 'public/done.txt', { storageType: 'object', contentType: 'text/plain', expires }), 409, 'RequestConflict');
    expect((await downloadArtifact(taskId, 'public/done.txt')).data.toString()).toBe('done');
    await wq.createArtifact(taskId, 0, 'public/err', { storageType: 'error', expires, reason: 'file-missing-on-worker', message: 'gone' });
    await expectError(wq.finishArtifact(taskId, 0, 'public/err', { uploadId: first.uploadId }), 400, 'InputError');
  });

  test('a crash after any storage call of an object createArtifact is repaired by the client retrying', async () => {
    const { taskId, wq } = await claimedTask();
    const create = (name: string, expires: string) => wq.createArtifact(taskId, 0, name, { storageType: 'object', contentType: 'text/plain', expires });
    const failed = await sweeperFor(svc)(async (faulty, n) => {
      const name = `public/crash-${n}`;
      const expires = new Date(Date.now() + 3600_000 + n * 1000).toJSON();
      const r = await faulty(() => create(name, expires));
      if (r.hit) expect(r.error?.statusCode).toBe(500);
      const res = r.hit ? await create(name, expires) : r.value;
      const data = Buffer.from(`crash ${n}`);
      await uploadObject(svc, res, data);
      await wq.finishArtifact(taskId, 0, name, { uploadId: res.uploadId });
      expect((await downloadArtifact(taskId, name)).data.toString()).toBe(`crash ${n}`);
    });
    expect(failed.length).toBeGreaterThanOrEqual(3);
  }, 60_000);

  test('object artifacts expire with the rest: artifact, object row and data', async () => {
    const { taskId, wq } = await claimedTask();
    const expires = new Date(Date.now() + 1500).toJSON();
    const res = await uploadArtifact(wq, taskId, 'public/short.txt', Buffer.from('short-lived'), 'text/plain', expires);
    const root = objectClient(svc.root);
    expect((await root.object(res.name)).expires).toBe(expires);
    const blobs = new ObjectBlobs(svc.services.storage);
    expect(await blobs.exists(res.name)).toBe(true);
    await reapUntil(svc, async () => (await svc.queue().listArtifacts(taskId, 0)).artifacts.length === 0 && !(await blobs.exists(res.name)), 15_000);
    await expectError(root.object(res.name), 404, 'ResourceNotFound');
  }, 30_000);
});

describe('the Object API', () => {
  const root = () => objectClient(svc.root);

  async function put(name: string, data: Buffer, hashes?: Record<string, string>) {
    const uploadId = slugid();
    const expires = inAnHour();
    const o = root();
    const r = await o.createUpload(name, {
      projectId: 'p',
      uploadId,
      expires,
      proposedUploadMethods: { dataInline: { contentType: 'application/x-test', objectData: data.toString('base64') } },
    });
    expect(r).toEqual({ projectId: 'p', uploadId, expires, uploadMethod: { dataInline: true } });
    await o.finishUpload(name, { projectId: 'p', uploadId, hashes: hashes ?? { sha256: crypto.createHash('sha256').update(data).digest('hex') } });
    return { uploadId, expires };
  }

  test('createUpload reserves the name for one uploadId; putUrl hands out a URL with the headers to send', async () => {
    const o = root();
    const name = `tests/${slugid()}/data.bin`;
    const uploadId = slugid();
    const expires = inAnHour();
    const base = { projectId: 'p', uploadId, expires };
    expect(await o.createUpload(name, { ...base, proposedUploadMethods: {} })).toEqual({ ...base, uploadMethod: {} });
    await expectError(o.createUpload(name, { ...base, uploadId: slugid(), proposedUploadMethods: {} }), 409, 'RequestConflict');
    const r = await o.createUpload(name, { ...base, proposedUploadMethods: { putUrl: { contentType: 'text/plain', contentLength: 5 } } });
    expect(Object.keys(r.uploadMethod)).toEqual(['putUrl']);
    expect(r.uploadMethod.putUrl.headers).toMatchObject({ 'Content-Type': 'text/plain', 'Content-Length': '5' });
    await expectError(o.startDownload(name, { acceptDownloadMethods: { simple: true } }), 404, 'ResourceNotFound');
    const p = await fetch(r.uploadMethod.putUrl.url, { method: 'PUT', headers: r.uploadMethod.putUrl.headers, body: 'hello' });
    expect(p.status).toBe(201);
    await expectError(o.finishUpload(name, { projectId: 'q', uploadId }), 400, 'InputError');
    await expectError(o.finishUpload(name, { projectId: 'p', uploadId: slugid() }), 409, 'RequestConflict');
    await o.finishUpload(name, { projectId: 'p', uploadId, hashes: { sha256: crypto.createHash('sha256').update('hello').digest('hex') } });
    await o.finishUpload(name, { projectId: 'p', uploadId });
    await expectError(o.finishUpload(name, { projectId: 'p', uploadId, hashes: { sha512: 'a'.repeat(128) } }), 409, 'RequestConflict');
    await expectError(o.createUpload(name, { ...base, proposedUploadMethods: {} }), 409, 'RequestConflict');
    const simple = await o.startDownload(name, { acceptDownloadMethods: { simple: true } });
    expect(simple).toEqual({ method: 'simple', url: expect.any(String) });
    expect(await (await fetch(simple.url)).text()).toBe('hello');
  });

  test('startDownload prefers getUrl and returns the hashes; 406 when no method matches; download redirects', async () => {
    const name = `tests/${slugid()}`;
    const data = Buffer.from('some bytes');
    await put(name, data);
    const o = root();
    const g = await o.startDownload(name, { acceptDownloadMethods: { simple: true, getUrl: true } });
    expect(g).toEqual({
      method: 'getUrl',
      url: expect.any(String),
      expires: expect.any(String),
      hashes: { sha256: crypto.createHash('sha256').update(data).digest('hex') },
    });
    await expectError(o.startDownload(name, { acceptDownloadMethods: { 'HTTP:GET': true } }), 406, 'NoMatchingMethod');
    const r = await fetch(o.buildSignedUrl(o.download, name), { redirect: 'manual' });
    expect(r.status).toBe(303);
    expect(await (await fetch(r.headers.get('location')!)).text()).toBe('some bytes');
    await expectError(o.object(`tests/${slugid()}`), 404, 'ResourceNotFound');
    expect((await objectClient(undefined).ping()).alive).toBe(true);
  });

  test('an upload never finished is dropped after a day, data and all; a finished object stays', async () => {
    const o = root();
    const open = `tests/${slugid()}/open`;
    const done = `tests/${slugid()}/done`;
    const services = svc.services as { now: () => Date };
    const realNow = services.now;
    // Both uploads began 25 hours ago (the service's clock says so); only one was finished.
    services.now = () => new Date(Date.now() - 25 * 3600_000);
    try {
      const body = (uploadId: string) => ({
        projectId: 'p',
        uploadId,
        expires: new Date(Date.now() + 30 * 24 * 3600_000).toJSON(),
        proposedUploadMethods: { dataInline: { contentType: 'text/plain', objectData: Buffer.from('x').toString('base64') } },
      });
      await o.createUpload(open, body(slugid()));
      const doneId = slugid();
      await o.createUpload(done, body(doneId));
      await o.finishUpload(done, { projectId: 'p', uploadId: doneId });
    } finally {
      services.now = realNow;
    }
    const blobs = new ObjectBlobs(svc.services.storage);
    await reapUntil(svc, async () => !(await blobs.exists(open)), 15_000);
    await expectError(o.finishUpload(open, { projectId: 'p', uploadId: slugid() }), 404, 'ResourceNotFound');
    expect((await o.object(done)).projectId).toBe('p');
    expect(await blobs.exists(done)).toBe(true);
  }, 30_000);

  test('the client refuses data whose hash does not match the recorded one', async () => {
    const { taskId, wq } = await claimedTask();
    const name = 'public/tampered.txt';
    const res = await wq.createArtifact(taskId, 0, name, { storageType: 'object', contentType: 'text/plain', expires: inAnHour() });
    const o = objectClient(res.credentials);
    await o.createUpload(res.name, {
      projectId: res.projectId,
      uploadId: res.uploadId,
      expires: res.expires,
      proposedUploadMethods: { dataInline: { contentType: 'text/plain', objectData: Buffer.from('real').toString('base64') } },
    });
    await o.finishUpload(res.name, {
      projectId: res.projectId,
      uploadId: res.uploadId,
      hashes: { sha256: crypto.createHash('sha256').update('fake').digest('hex') },
    });
    await wq.finishArtifact(taskId, 0, name, { uploadId: res.uploadId });
    await expect(downloadArtifact(taskId, name)).rejects.toThrow(/sha256 hash does not match/);
  });
});
