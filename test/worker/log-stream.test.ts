/**
 * The worker streams the task log to the live-log append blob as it is written (worker/log-stream.ts),
 * against the in-memory storage's SAS answers; the queue's reader (shared/artifacts/live-log.ts)
 * then serves exactly the bytes written, never a repeated append.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { MemoryStorage } from '../../shared/storage/memory';
import { LiveLogStream, BlobSend } from '../../worker/log-stream';
import { liveLogBlob } from '../../shared/artifacts/blobs';

const quiet = { info: () => {}, warn: () => {}, error: () => {} };

async function setup(send?: (inner: BlobSend) => BlobSend, maxBytes?: number) {
  const storage = new MemoryStorage('live');
  await storage.ensureAll();
  const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'live-'));
  const file = path.join(dir, 'live.log');
  await fs.promises.writeFile(file, '');
  const inner: BlobSend = async (method, url, body, headers) => storage.fetch(method, url, body, headers).status;
  const stream = new LiveLogStream({
    file,
    createUrl: async () => {
      await storage.artifacts.createAppend(liveLogBlob('T', 0), 'text/plain');
      return { url: storage.artifacts.appendUrl(liveLogBlob('T', 0), new Date(Date.now() + 3600_000)), maxBytes };
    },
    send: send ? send(inner) : inner,
    log: quiet,
    ids: {},
    intervalMs: 3600_000, // the test flushes by hand
  });
  const stored = async () => (await storage.artifacts.readRange(liveLogBlob('T', 0), 0, 1 << 20))?.body.toString();
  return { file, stream, stored };
}

test('bytes written to the log reach the append blob at each flush, in order', async () => {
  const { file, stream, stored } = await setup();
  stream.start();
  await stream.flush();
  expect(await stored()).toBe('');
  await fs.promises.appendFile(file, 'step 1\n');
  await stream.flush();
  expect(await stored()).toBe('step 1\n');
  await fs.promises.appendFile(file, 'step 2\nstep 3\n');
  await stream.stop();
  expect(await stored()).toBe('step 1\nstep 2\nstep 3\n');
  expect(stream.streamed).toBe(21);
});

test('an append whose answer was lost is sent again as it was and not written twice', async () => {
  let lose = 1;
  const { file, stream, stored } = await setup((inner) => async (method, url, body, headers) => {
    const status = await inner(method, url, body, headers);
    if (url.includes('comp=appendblock') && lose-- > 0) throw new Error('socket hang up');
    return status;
  });
  stream.start();
  await stream.flush();
  await fs.promises.appendFile(file, 'first\n');
  await stream.flush(); // appended, answer lost
  await fs.promises.appendFile(file, 'second\n');
  await stream.flush(); // the same bytes again: 412, so they landed; then the rest
  await stream.stop();
  expect(await stored()).toBe('first\nsecond\n');
});

test("streaming stops at the queue's maxBytes", async () => {
  const { file, stream, stored } = await setup(undefined, 10);
  stream.start();
  await fs.promises.appendFile(file, 'line one\nline two\n');
  await stream.stop();
  expect(await stored()).toBe('line one\nl');
  expect(stream.streamed).toBe(10);
});
