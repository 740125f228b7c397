/**
 * Artifacts through taskcluster-client against Azurite: s3 uploads with a plain PUT, downloads
 * through the 303, reference/link/error artifacts, and who may read what.
 */
import crypto from 'node:crypto';
import zlib from 'node:zlib';
import { startTestService, TestService, taskDef, slugid, expectError } from '../helpers/service';
import { ArtifactBlobs, blobNameFor } from '../../shared/artifacts/blobs';
import { ArtifactStore } from '../../shared/artifacts/store';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' });
  await svc.auth().createRole('anonymous', { description: 'public artifacts', scopes: ['queue:get-artifact:public/*'] });
});
afterAll(async () => svc?.close());

const worker = { workerGroup: 'wg', workerId: 'w1' };
const inAnHour = () => new Date(Date.now() + 3600_000).toJSON();

/** Creates a task, claims it, and returns a queue client holding only the claim's credentials. */
async function claimedTask(overrides: Record<string, unknown> = {}) {
  const taskQueueId = `prov/art-${Math.random().toString(36).slice(2, 8)}`;
  const taskId = slugid();
  await svc.queue().createTask(taskId, taskDef(taskQueueId, overrides));
  const { tasks } = await svc.queue().claimWork(taskQueueId, { ...worker, tasks: 1 });
  expect(tasks).toHaveLength(1);
  return { taskId, claim: tasks[0], wq: svc.queue(tasks[0].credentials) };
}

/** What a generic worker does: one PUT with only Content-Type and Content-Length. */
async function plainPut(putUrl: string, contentType: string, body: Buffer): Promise<number> {
  const r = await fetch(putUrl, { method: 'PUT', headers: { 'content-type': contentType, 'content-length': String(body.length) }, body: new Uint8Array(body) });
  await r.arrayBuffer();
  return r.status;
}

async function uploadS3(wq: any, taskId: string, runId: number, name: string, contentType: string, body: Buffer, expires = inAnHour()) {
  const res = await wq.createArtifact(taskId, runId, name, { storageType: 's3', contentType, expires, contentLength: body.length });
  expect(res).toMatchObject({ storageType: 's3', contentType });
  expect(Object.keys(res).sort()).toEqual(['contentType', 'expires', 'putUrl', 'storageType']);
  expect(await plainPut(res.putUrl, contentType, body)).toBe(201);
  return res;
}

async function download(url: string): Promise<{ status: number; type: string | null; bytes: Buffer }> {
  const r = await fetch(url);
  return { status: r.status, type: r.headers.get('content-type'), bytes: Buffer.from(await r.arrayBuffer()) };
}

const queueUrl = (path: string) => `${svc.rootUrl}/api/queue/v1${path}`;

describe('s3 artifacts', () => {
  test('uploads of a run resolved without a report (cancel) are committed at once, not on first read', async () => {
    const { taskId, wq } = await claimedTask();
    const body = Buffer.from('finished before the cancel');
    await uploadS3(wq, taskId, 0, 'public/out.txt', 'text/plain', body);
    const store = new ArtifactStore(svc.services.storage);
    expect((await store.get(taskId, 0, 'public/out.txt'))?.uncommitted).toBe(true);
    await svc.queue().cancelTask(taskId);
    // Azure drops uncommitted blocks after a week; the cancel must not leave the upload to chance.
    expect((await store.get(taskId, 0, 'public/out.txt'))?.uncommitted).toBeFalsy();
    // A blob with only uncommitted blocks does not exist yet; a committed one does.
    expect(await new ArtifactBlobs(svc.services.storage).exists(blobNameFor(taskId, 0, 'public/out.txt'))).toBe(true);
    const { url } = await svc.queue().getArtifact(taskId, 0, 'public/out.txt');
    expect((await download(url)).bytes.toString()).toBe('finished before the cancel');
  });

  test('a plain PUT to the putUrl, then byte-identical downloads before and after the run resolves', async () => {
    const { taskId, wq } = await claimedTask();
    const log = Buffer.from('line 1\nline 2 ✓\n', 'utf8');
    const name = 'public/logs/live.log';
    const created = await uploadS3(wq, taskId, 0, name, 'text/plain; charset=utf-8', log);
    expect(new Date(created.expires).getTime()).toBeGreaterThan(Date.now() + 40 * 60_000);
    // The upload URL is write-only for one block: it cannot read the artifact back.
    expect((await fetch(created.putUrl)).status).toBeGreaterThanOrEqual(400);

    // While the run is running: the first read commits the upload.
    const got = await svc.queue().getArtifact(taskId, 0, name);
    expect(got.storageType).toBe('s3');
    const before = await download(got.url);
    expect(before).toMatchObject({ status: 200, type: 'text/plain; charset=utf-8' });
    expect(before.bytes.equals(log)).toBe(true);
    // The container is private: the blob URL without its signature is refused.
    expect((await download(got.url.split('?')[0])).status).not.toBe(200);

    // A raw GET sees the 303 with Location, the storage-type header and the JSON body.
    const raw = await fetch(queueUrl(`/task/${taskId}/runs/0/artifacts/${encodeURIComponent(name)}`), { redirect: 'manual' });
    expect(raw.status).toBe(303);
    expect(raw.headers.get('x-taskcluster-artifact-storage-type')).toBe('s3');
    const body = await raw.json();
    expect(body.storageType).toBe('s3');
    expect(raw.headers.get('location')).toBe(body.url);
    // A literal '/' in the name reaches the same artifact; a plain HTTP client follows the 303.
    const followed = await download(queueUrl(`/task/${taskId}/runs/0/artifacts/${name}`));
    expect(followed.bytes.equals(log)).toBe(true);

    // A second artifact is not read before the report: resolving the run commits it.
    const report = Buffer.from(JSON.stringify({ ok: true }));
    await uploadS3(wq, taskId, 0, 'public/report.json', 'application/json', report);
    const blobs = new ArtifactBlobs(svc.services.storage);
    expect(await blobs.exists(blobNameFor(taskId, 0, 'public/report.json'))).toBe(false);
    await wq.reportCompleted(taskId, 0);
    expect(await blobs.exists(blobNameFor(taskId, 0, 'public/report.json'))).toBe(true);

    // After the run resolved: both come back intact, through either form of the API.
    const latest = await svc.queue().getLatestArtifact(taskId, 'public/report.json');
    const after = await download(latest.url);
    expect(after).toMatchObject({ status: 200, type: 'application/json' });
    expect(after.bytes.equals(report)).toBe(true);
    const content = await svc.queue().artifact(taskId, 0, name);
    expect(content.storageType).toBe('s3');
    expect((await download(content.url)).bytes.equals(log)).toBe(true);
    expect((await download((await svc.queue().latestArtifact(taskId, name)).url)).bytes.equals(log)).toBe(true);
  });

  test('an 8 MB artifact round-trips byte-identical', async () => {
    const { taskId, wq } = await claimedTask();
    const big = crypto.randomBytes(8 * 1024 * 1024);
    await uploadS3(wq, taskId, 0, 'public/build/target.bin', 'application/octet-stream', big);
    await wq.reportCompleted(taskId, 0);
    const got = await download((await svc.queue().getArtifact(taskId, 0, 'public/build/target.bin')).url);
    expect(got.type).toBe('application/octet-stream');
    expect(got.bytes.length).toBe(big.length);
    expect(crypto.createHash('sha256').update(got.bytes).digest('hex')).toBe(crypto.createHash('sha256').update(big).digest('hex'));
  });

  test('a gzip-encoded upload as generic-worker sends it is served with Content-Encoding: gzip; a .gz file is served as is', async () => {
    const { taskId, wq } = await claimedTask();
    const text = Buffer.from('hello from the task log\n'.repeat(200));
    const gz = zlib.gzipSync(text);
    // generic-worker: contentLength is the original size; the PUT body is gzipped and says so.
    const res = await wq.createArtifact(taskId, 0, 'public/logs/live_backing.log', {
      storageType: 's3',
      contentType: 'text/plain; charset=utf-8',
      expires: inAnHour(),
      contentLength: text.length,
    });
    const put = await fetch(res.putUrl, {
      method: 'PUT',
      headers: { 'content-type': 'text/plain; charset=utf-8', 'content-length': String(gz.length), 'content-encoding': 'gzip' },
      body: new Uint8Array(gz),
    });
    expect(put.status).toBe(201);
    // A compressed file uploaded as is (identity): its declared length is its size.
    await uploadS3(wq, taskId, 0, 'public/dist.tar.gz', 'application/gzip', gz);
    await wq.reportCompleted(taskId, 0);

    const log = await fetch((await svc.queue().getArtifact(taskId, 0, 'public/logs/live_backing.log')).url);
    expect(log.headers.get('content-encoding')).toBe('gzip');
    expect(log.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(Buffer.from(await log.arrayBuffer()).equals(text)).toBe(true); // fetch decodes gzip
    const dist = await fetch((await svc.queue().getArtifact(taskId, 0, 'public/dist.tar.gz')).url);
    expect(dist.headers.get('content-encoding')).toBeNull();
    expect(Buffer.from(await dist.arrayBuffer()).equals(gz)).toBe(true);
  });

  test('re-creating refreshes the upload URL and a new upload replaces the content', async () => {
    const { taskId, wq } = await claimedTask();
    await uploadS3(wq, taskId, 0, 'public/a.txt', 'text/plain', Buffer.from('first'));
    expect((await download((await svc.queue().getArtifact(taskId, 0, 'public/a.txt')).url)).bytes.toString()).toBe('first');
    await uploadS3(wq, taskId, 0, 'public/a.txt', 'text/plain', Buffer.from('second'));
    await wq.reportCompleted(taskId, 0);
    expect((await download((await svc.queue().getArtifact(taskId, 0, 'public/a.txt')).url)).bytes.toString()).toBe('second');
  });

  test('names HTTP clients would rewrite still round-trip', async () => {
    const { taskId, wq } = await claimedTask();
    for (const name of ['public/x/../y', 'public/back\\slash', 'public/dir/', 'public/a b#c?d%e&f=g']) {
      await uploadS3(wq, taskId, 0, name, 'text/plain', Buffer.from(`content of ${name}`));
      const got = await download((await svc.queue().getArtifact(taskId, 0, name)).url);
      expect(got.bytes.toString()).toBe(`content of ${name}`);
    }
  });

  test('an artifact whose upload never happened redirects to a URL that answers 404', async () => {
    const { taskId, wq } = await claimedTask();
    await wq.createArtifact(taskId, 0, 'public/missing.txt', { storageType: 's3', contentType: 'text/plain', expires: inAnHour() });
    await wq.reportCompleted(taskId, 0);
    const got = await svc.queue().getArtifact(taskId, 0, 'public/missing.txt');
    expect((await download(got.url)).status).toBe(404);
    // The artifact stays pending, so a late upload would still be committed by a later read.
    expect((await new ArtifactStore(svc.services.storage).get(taskId, 0, 'public/missing.txt'))?.uncommitted).toBe(true);
  });
});

describe('reference, link and error artifacts', () => {
  test('a reference redirects to its URL, may change it, and may become a link', async () => {
    const { taskId, wq } = await claimedTask();
    const expires = inAnHour();
    expect(
      await wq.createArtifact(taskId, 0, 'public/ref', { storageType: 'reference', url: 'https://example.com/one', contentType: 'text/html', expires }),
    ).toEqual({ storageType: 'reference' });
    const raw = await fetch(queueUrl(`/task/${taskId}/runs/0/artifacts/public%2Fref`), { redirect: 'manual' });
    expect(raw.status).toBe(303);
    expect(raw.headers.get('location')).toBe('https://example.com/one');
    expect(raw.headers.get('x-taskcluster-artifact-storage-type')).toBe('reference');
    expect(await raw.json()).toEqual({ storageType: 'reference', url: 'https://example.com/one' });

    await wq.createArtifact(taskId, 0, 'public/ref', { storageType: 'reference', url: 'https://example.com/two', contentType: 'text/html', expires });
    expect(await svc.queue().artifact(taskId, 0, 'public/ref')).toEqual({ storageType: 'reference', url: 'https://example.com/two' });

    await wq.createArtifact(taskId, 0, 'public/target', { storageType: 'reference', url: 'https://example.com/target', contentType: 'text/html', expires });
    expect(await wq.createArtifact(taskId, 0, 'public/ref', { storageType: 'link', artifact: 'public/target', expires })).toEqual({ storageType: 'link' });
    expect((await svc.queue().getArtifact(taskId, 0, 'public/ref')).url).toBe('https://example.com/target');
    // ... but a link cannot go back to being a reference.
    await expectError(
      wq.createArtifact(taskId, 0, 'public/ref', { storageType: 'reference', url: 'https://example.com/one', contentType: 'text/html', expires }),
      409,
      'RequestConflict',
    );
    const info = await svc.queue().artifactInfo(taskId, 0, 'public/ref');
    expect(info).toEqual({ storageType: 'link', name: 'public/ref', expires, contentType: 'text/html' });
  });

  test('links are followed through chains, every name needs its scope, and cycles are 400', async () => {
    const { taskId, wq } = await claimedTask();
    const expires = inAnHour();
    await uploadS3(wq, taskId, 0, 'private/data.txt', 'text/plain', Buffer.from('linked bytes'));
    await wq.createArtifact(taskId, 0, 'private/alias', { storageType: 'link', artifact: 'private/data.txt', expires });
    await wq.createArtifact(taskId, 0, 'public/alias', { storageType: 'link', artifact: 'private/alias', expires });
    const got = await svc.queue().getArtifact(taskId, 0, 'public/alias');
    expect(got.storageType).toBe('s3');
    expect((await download(got.url)).bytes.toString()).toBe('linked bytes');
    expect((await svc.queue().latestArtifact(taskId, 'public/alias')).storageType).toBe('s3');

    // Anonymous callers may read public/* but not the private targets behind the link.
    const err = await expectError(svc.queue(null).getArtifact(taskId, 0, 'public/alias'), 403, 'InsufficientScopes');
    expect(err.message).toContain('queue:get-artifact:private/alias');
    const partial = await reader(['queue:get-artifact:public/*', 'queue:get-artifact:private/alias']);
    const err2 = await expectError(partial.getArtifact(taskId, 0, 'public/alias'), 403, 'InsufficientScopes');
    expect(err2.message).toContain('queue:get-artifact:private/data.txt');
    const full = await reader(['queue:get-artifact:public/*', 'queue:get-artifact:private/alias', 'queue:get-artifact:private/data.txt']);
    expect((await download((await full.getArtifact(taskId, 0, 'public/alias')).url)).bytes.toString()).toBe('linked bytes');

    await wq.createArtifact(taskId, 0, 'public/loop-a', { storageType: 'link', artifact: 'public/loop-b', expires });
    await wq.createArtifact(taskId, 0, 'public/loop-b', { storageType: 'link', artifact: 'public/loop-a', expires });
    await expectError(svc.queue().getArtifact(taskId, 0, 'public/loop-a'), 400, 'InputError');
    await expectError(svc.queue().artifact(taskId, 0, 'public/loop-b'), 400, 'InputError');
    // A link to nothing (yet) is allowed, and reads 404.
    await wq.createArtifact(taskId, 0, 'public/dangling', { storageType: 'link', artifact: 'public/later', expires });
    await expectError(svc.queue().getArtifact(taskId, 0, 'public/dangling'), 404, 'ResourceNotFound');
  });

  test('an error artifact answers 424 with {reason, message}, and artifact() describes it', async () => {
    const { taskId, wq } = await claimedTask();
    const expires = inAnHour();
    const message = 'the build never produced target.zip';
    expect(await wq.createArtifact(taskId, 0, 'public/target.zip', { storageType: 'error', reason: 'file-missing-on-worker', message, expires })).toEqual({
      storageType: 'error',
    });
    const err = await expectError(svc.queue().getArtifact(taskId, 0, 'public/target.zip'), 424);
    expect(err.message).toBe(message);
    const raw = await fetch(queueUrl(`/task/${taskId}/runs/0/artifacts/public%2Ftarget.zip`), { redirect: 'manual' });
    expect(raw.status).toBe(424);
    expect(raw.headers.get('x-taskcluster-artifact-storage-type')).toBe('error');
    expect(await raw.json()).toEqual({ reason: 'file-missing-on-worker', message });
    expect(await svc.queue().artifact(taskId, 0, 'public/target.zip')).toEqual({ storageType: 'error', reason: 'file-missing-on-worker', message });
    // The same error again is idempotent; a different message is a conflict.
    await wq.createArtifact(taskId, 0, 'public/target.zip', { storageType: 'error', reason: 'file-missing-on-worker', message, expires });
    await expectError(
      wq.createArtifact(taskId, 0, 'public/target.zip', { storageType: 'error', reason: 'file-missing-on-worker', message: 'other', expires }),
      409,
      'RequestConflict',
    );
  });
});

async function reader(scopes: string[]) {
  const clientId = `test/reader-${slugid()}`;
  const c = await svc.auth().createClient(clientId, { expires: inAnHour(), description: 'artifact reader', scopes });
  return svc.queue({ clientId, accessToken: c.accessToken });
}

describe('who may read', () => {
  test('public/ names are anonymous when the anonymous role allows it; others need a scope or a bewit', async () => {
    const { taskId, wq } = await claimedTask();
    await uploadS3(wq, taskId, 0, 'public/open.txt', 'text/plain', Buffer.from('open'));
    await uploadS3(wq, taskId, 0, 'private/secret.txt', 'text/plain', Buffer.from('secret'));
    await wq.reportCompleted(taskId, 0);

    // Anonymous: a plain GET with no credentials at all follows the redirect to the bytes.
    expect((await download(queueUrl(`/task/${taskId}/runs/0/artifacts/public/open.txt`))).bytes.toString()).toBe('open');
    expect((await svc.queue(null).getLatestArtifact(taskId, 'public/open.txt')).storageType).toBe('s3');
    await expectError(svc.queue(null).getArtifact(taskId, 0, 'private/secret.txt'), 403, 'InsufficientScopes');
    expect((await fetch(queueUrl(`/task/${taskId}/runs/0/artifacts/private/secret.txt`), { redirect: 'manual' })).status).toBe(403);

    // A client holding queue:get-artifact:private/* reads it, by header or by a signed URL.
    const r = await reader(['queue:get-artifact:private/*']);
    expect((await download((await r.getArtifact(taskId, 0, 'private/secret.txt')).url)).bytes.toString()).toBe('secret');
    const signed = r.buildSignedUrl(r.getArtifact, taskId, 0, 'private/secret.txt', { expiration: 600 });
    expect(signed).toContain('bewit=');
    expect((await download(signed)).bytes.toString()).toBe('secret');
    const signedLatest = r.buildSignedUrl(r.getLatestArtifact, taskId, 'private/secret.txt');
    expect((await download(signedLatest)).bytes.toString()).toBe('secret');
    // A bewit from a client without the scope is refused.
    const other = await reader(['queue:get-artifact:public/*']);
    expect((await fetch(other.buildSignedUrl(other.getArtifact, taskId, 0, 'private/secret.txt'), { redirect: 'manual' })).status).toBe(403);

    // Without the anonymous role, public/ is private too.
    await svc.auth().deleteRole('anonymous');
    try {
      await expectError(svc.queue(null).getArtifact(taskId, 0, 'public/open.txt'), 403, 'InsufficientScopes');
    } finally {
      await svc.auth().createRole('anonymous', { description: 'public artifacts', scopes: ['queue:get-artifact:public/*'] });
    }
    expect((await svc.queue(null).getArtifact(taskId, 0, 'public/open.txt')).storageType).toBe('s3');
  });

  test('listing and info need queue:list-artifacts, not the artifact scope', async () => {
    const { taskId, wq } = await claimedTask();
    await wq.createArtifact(taskId, 0, 'private/x', { storageType: 'reference', url: 'https://example.com/x', contentType: 'text/plain', expires: inAnHour() });
    const lister = await reader([`queue:list-artifacts:${taskId}:0`]);
    expect((await lister.listArtifacts(taskId, 0)).artifacts.map((a: any) => a.name)).toEqual(['private/x']);
    expect((await lister.artifactInfo(taskId, 0, 'private/x')).storageType).toBe('reference');
    await expectError(lister.getArtifact(taskId, 0, 'private/x'), 403, 'InsufficientScopes');
    await expectError(lister.listLatestArtifacts(taskId), 403, 'InsufficientScopes');
  });
});
