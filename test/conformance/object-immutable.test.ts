/**
 * An object's bytes are fixed at finishUpload: a putUrl upload lands in a staging blob, whose
 * size is checked against the declared one and which is then copied to the object's blob. What
 * the putUrl receives later, or more bytes than declared, never reaches a download.
 */
import crypto from 'node:crypto';
import { startTestService, TestService, slugid, expectError } from '../helpers/service';

let svc: TestService;
let o: any;
beforeAll(async () => {
  svc = await startTestService();
  o = new svc.tc.Object({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
});
afterAll(async () => svc?.close());

const inAnHour = () => new Date(Date.now() + 3600_000).toJSON();
const sha256 = (s: string) => crypto.createHash('sha256').update(s).digest('hex');

async function putUrlUpload(name: string, contentLength: number) {
  const uploadId = slugid();
  const r = await o.createUpload(name, {
    projectId: 'p',
    uploadId,
    expires: inAnHour(),
    proposedUploadMethods: { putUrl: { contentType: 'text/plain', contentLength } },
  });
  const put = (body: string | Buffer) =>
    fetch(r.uploadMethod.putUrl.url, {
      method: 'PUT',
      headers: { ...r.uploadMethod.putUrl.headers, 'Content-Length': String(body.length) },
      body: new Uint8Array(Buffer.from(body)),
    });
  return { uploadId, put };
}

test('more bytes than declared are refused at finishUpload; the right bytes then finish', async () => {
  const name = `tests/${slugid()}/five.txt`;
  const { uploadId, put } = await putUrlUpload(name, 5);
  expect((await put(Buffer.alloc(100_000, 'x'))).status).toBe(201);
  const err = await expectError(o.finishUpload(name, { projectId: 'p', uploadId, hashes: { sha256: sha256('hello') } }), 400, 'InputError');
  expect(err.message).toMatch(/100000 bytes, but 5 were declared/);
  await expectError(o.startDownload(name, { acceptDownloadMethods: { simple: true } }), 404);
  expect((await put('hello')).status).toBe(201);
  await o.finishUpload(name, { projectId: 'p', uploadId, hashes: { sha256: sha256('hello') } });
  const d = await o.startDownload(name, { acceptDownloadMethods: { simple: true } });
  expect(await (await fetch(d.url)).text()).toBe('hello');
});

test('a putUrl used after finishUpload changes nothing readers get', async () => {
  const name = `tests/${slugid()}/fixed.txt`;
  const { uploadId, put } = await putUrlUpload(name, 5);
  expect((await put('hello')).status).toBe(201);
  await o.finishUpload(name, { projectId: 'p', uploadId, hashes: { sha256: sha256('hello') } });
  // The URL is still valid for its 45 minutes; whatever it receives stays out of the object.
  await put('HACKD');
  await put(Buffer.alloc(100_000, 'y'));
  for (const method of ['simple', 'getUrl'] as const) {
    const d = await o.startDownload(name, { acceptDownloadMethods: { [method]: true } });
    const body = await (await fetch(d.url)).text();
    expect(body).toBe('hello');
    if (method === 'getUrl') expect(d.hashes.sha256).toBe(sha256(body));
  }
});

test('dataInline objects are staged and published the same way', async () => {
  const name = `tests/${slugid()}/inline.txt`;
  const uploadId = slugid();
  const base = { projectId: 'p', uploadId, expires: inAnHour() };
  await o.createUpload(name, {
    ...base,
    proposedUploadMethods: { dataInline: { contentType: 'text/plain', objectData: Buffer.from('first').toString('base64') } },
  });
  await expectError(o.startDownload(name, { acceptDownloadMethods: { simple: true } }), 404);
  await o.finishUpload(name, { projectId: 'p', uploadId });
  const d = await o.startDownload(name, { acceptDownloadMethods: { simple: true } });
  expect(await (await fetch(d.url)).text()).toBe('first');
});

describe('createUpload input that storage could not hold is a 400', () => {
  const body = (over: Record<string, unknown> = {}, methods: Record<string, unknown> = { dataInline: { contentType: 'text/plain', objectData: 'aGk=' } }) => ({
    projectId: 'p',
    uploadId: slugid(),
    expires: inAnHour(),
    proposedUploadMethods: methods,
    ...over,
  });
  test.each([
    ['a leap second in expires', body({ expires: '2026-12-31T23:59:60Z' })],
    ['1,000 hash algorithms', body({ hashes: Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`algo${i}`, 'ab'])) })],
    ['one 1 MB hash', body({ hashes: { md5: 'a'.repeat(1024 * 1024) } })],
    ['a non-ASCII content type', body({}, { dataInline: { contentType: 'text/plain; charset=ütf-8', objectData: 'aGk=' } })],
    ['a 100,000-character content type', body({}, { dataInline: { contentType: 'a/' + 'b'.repeat(100_000), objectData: 'aGk=' } })],
    ["a putUrl beyond Azure's largest blob", body({}, { putUrl: { contentType: 'text/plain', contentLength: 6000 * 1024 * 1024 } })],
  ])('%s', async (_label, b) => {
    await expectError(o.createUpload(`tests/${slugid()}/bad`, b), 400);
  });
});
