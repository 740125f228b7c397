import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ArtifactUploader, UploadError, contentTypeFor } from '../../worker/artifacts';
import { fakeStorage } from '../helpers/fake-storage';

let dir: string;
let file: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'artifacts-test-'));
  file = path.join(dir, 'out.txt');
  fs.writeFileSync(file, 'hello artifact');
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

function queueWith(storageUrl: string, fail: (n: number) => unknown = () => undefined) {
  const calls: any[] = [];
  return {
    calls,
    queue: {
      async createArtifact(taskId: string, runId: number, name: string, body: any) {
        calls.push({ taskId, runId, name, body });
        const err = fail(calls.length);
        if (err) throw err;
        return body.storageType === 's3'
          ? { storageType: 's3', putUrl: `${storageUrl}/blob/${calls.length}?sig=x`, expires: body.expires, contentType: body.contentType }
          : { storageType: body.storageType };
      },
    } as any,
  };
}

test('s3: createArtifact, then a plain PUT with only content-type and content-length', async () => {
  const storage = await fakeStorage();
  try {
    const q = queueWith(storage.url);
    const up = new ArtifactUploader({ queue: () => q.queue, taskId: 'T', runId: 1 });
    expect(await up.uploadFile('public/out.txt', file, { contentType: 'text/plain', expires: '2030-01-01T00:00:00.000Z' })).toEqual({ size: 14 });
    expect(q.calls).toEqual([
      { taskId: 'T', runId: 1, name: 'public/out.txt', body: { storageType: 's3', contentType: 'text/plain', expires: '2030-01-01T00:00:00.000Z' } },
    ]);
    expect(storage.puts).toHaveLength(1);
    expect(storage.puts[0].path).toBe('/blob/1?sig=x');
    expect(storage.puts[0].body.toString()).toBe('hello artifact');
    expect(Object.keys(storage.puts[0].headers).sort()).toEqual(['connection', 'content-length', 'content-type', 'host']);
    expect(storage.puts[0].headers['content-type']).toBe('text/plain');
  } finally {
    await storage.close();
  }
});

test('storage 5xx and a stale signature (403) are retried with a fresh putUrl', async () => {
  const storage = await fakeStorage([503, 403, 201]);
  try {
    const q = queueWith(storage.url);
    const up = new ArtifactUploader({ queue: () => q.queue, taskId: 'T', runId: 0, sleep: async () => undefined });
    await up.uploadFile('a', file, { contentType: 'text/plain', expires: 'e' });
    expect(q.calls).toHaveLength(3);
    expect(storage.puts.map((p) => p.path)).toEqual(['/blob/1?sig=x', '/blob/2?sig=x', '/blob/3?sig=x']);
  } finally {
    await storage.close();
  }
});

test('a 409 from createArtifact is a conflict (the run is not ours any more) and is not retried', async () => {
  const q = queueWith('http://unused', () => Object.assign(new Error('run resolved'), { statusCode: 409 }));
  const up = new ArtifactUploader({ queue: () => q.queue, taskId: 'T', runId: 0, sleep: async () => undefined });
  const err = await up.uploadFile('a', file, { contentType: 'text/plain', expires: 'e' }).catch((e) => e);
  expect(err).toBeInstanceOf(UploadError);
  expect(err.conflict).toBe(true);
  expect(q.calls).toHaveLength(1);
});

test('error artifacts carry the reason and message', async () => {
  const q = queueWith('http://unused');
  const up = new ArtifactUploader({ queue: () => q.queue, taskId: 'T', runId: 0 });
  await up.uploadError('public/x', { reason: 'file-missing-on-worker', message: 'no x', expires: 'e' });
  expect(q.calls[0].body).toEqual({ storageType: 'error', reason: 'file-missing-on-worker', message: 'no x', expires: 'e' });
});

test('content types are guessed from the extension', () => {
  expect(contentTypeFor('a/b.JSON')).toBe('application/json');
  expect(contentTypeFor('x.log')).toBe('text/plain');
  expect(contentTypeFor('binary')).toBe('application/octet-stream');
});

test('object artifacts (--object-artifacts): createArtifact, the data through the Object API, then finishArtifact', async () => {
  const calls: any[] = [];
  const queue = {
    async createArtifact(taskId: string, runId: number, name: string, body: any) {
      calls.push(['createArtifact', name, body]);
      return {
        storageType: 'object',
        name: `t/${taskId}/${runId}/${name}`,
        projectId: 'p',
        uploadId: 'U',
        expires: body.expires,
        credentials: { clientId: 'c', accessToken: 'a' },
      };
    },
    async finishArtifact(taskId: string, runId: number, name: string, body: any) {
      calls.push(['finishArtifact', name, body]);
    },
  } as any;
  const uploads: any[] = [];
  const up = new ArtifactUploader({ queue: () => queue, taskId: 'T', runId: 2, uploadObject: async (o) => void uploads.push(o) });
  expect(await up.uploadFile('public/out.txt', file, { contentType: 'text/plain', expires: 'E' })).toEqual({ size: 14 });
  expect(calls).toEqual([
    ['createArtifact', 'public/out.txt', { storageType: 'object', contentType: 'text/plain', expires: 'E', contentLength: 14 }],
    ['finishArtifact', 'public/out.txt', { uploadId: 'U' }],
  ]);
  expect(uploads).toEqual([
    {
      credentials: { clientId: 'c', accessToken: 'a' },
      projectId: 'p',
      name: 't/T/2/public/out.txt',
      uploadId: 'U',
      expires: 'E',
      contentType: 'text/plain',
      file,
      size: 14,
    },
  ]);
});

test('a failed object upload is retried (createArtifact again keeps the upload), and finish comes only after a success', async () => {
  const calls: string[] = [];
  const queue = {
    createArtifact: async () => (calls.push('create'), { storageType: 'object', name: 'n', projectId: 'p', uploadId: 'U', expires: 'E', credentials: {} }),
    finishArtifact: async () => void calls.push('finish'),
  } as any;
  let n = 0;
  const uploadObject = async () => {
    calls.push('upload');
    if (++n === 1) throw Object.assign(new Error('storage down'), { statusCode: 503 });
  };
  const up = new ArtifactUploader({ queue: () => queue, taskId: 'T', runId: 0, uploadObject, sleep: async () => undefined });
  await up.uploadFile('a', file, { contentType: 'text/plain', expires: 'E' });
  expect(calls).toEqual(['create', 'upload', 'create', 'upload', 'finish']);
});
