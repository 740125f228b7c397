/**
 * The local host reads no body past its limit: an API call's (MAX_BODY_BYTES) or, on the in-memory
 * store, what the storage operation takes, and nothing of a request the store refuses anyway. A
 * 400 MB body, declared or chunked, is answered at once and costs no more than the limit; the
 * connection closes behind the answer. Its admin route needs the root client's access token.
 */
import http from 'node:http';
import { startTestService, TestService } from '../helpers/service';
import { runningTask } from '../helpers/work';
import { MAX_BODY_BYTES } from '../../shared/api/body';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => svc?.close());

const MB = 1024 * 1024;
/** The body the prober sent. */
const HUGE = 400 * MB;

/**
 * Sends up to `total` bytes (chunked unless `declare`) and returns the answer and how many bytes
 * the server took before it answered.
 */
function push(url: string, opts: { method?: string; total: number; declare?: boolean; headers?: Record<string, string> }) {
  return new Promise<{ status: number; body: string; sent: number }>((resolve, reject) => {
    const chunk = Buffer.alloc(MB, 'x');
    let sent = 0;
    let answered = false;
    const req = http.request(url, {
      method: opts.method ?? 'POST',
      headers: { 'content-type': 'application/json', ...(opts.declare ? { 'content-length': String(opts.total) } : {}), ...opts.headers },
    });
    req.on('response', (res) => {
      answered = true;
      const parts: Buffer[] = [];
      res.on('data', (c) => parts.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(parts).toString(), sent }));
    });
    req.on('error', (e) => (answered ? undefined : reject(e)));
    const write = () => {
      while (!answered && sent < opts.total) {
        sent += chunk.length;
        if (!req.write(chunk)) return void req.once('drain', write);
      }
      if (!answered) req.end();
    };
    write();
  });
}

test('a chunked 400 MB body to an API route is refused once it passes the limit; the rest is dropped as it comes, never kept', async () => {
  const before = process.memoryUsage().arrayBuffers;
  const r = await push(`${svc.rootUrl}/api/queue/v1/task/abc/define`, { total: HUGE });
  expect(r.status).toBe(413);
  expect(JSON.parse(r.body).code).toBe('InputTooLarge');
  // What the client had handed to its socket when the answer came: the limit plus what the
  // connection's buffers hold, nowhere near 400 MB.
  expect(r.sent).toBeLessThan(MAX_BODY_BYTES + 32 * MB);
  expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(64 * MB);
});

test('a body declared larger than the limit is refused before a byte of it is read', async () => {
  const r = await push(`${svc.rootUrl}/api/queue/v1/task/abc/define`, { total: HUGE, declare: true });
  expect(r.status).toBe(413);
  expect(r.sent).toBeLessThan(32 * MB);
});

test('an upload the in-memory store refuses (a forged signature) is answered before its body is read', async () => {
  const { taskId, wq } = await runningTask(svc);
  const { putUrl } = await wq.createArtifact(taskId, 0, 'public/big.bin', {
    storageType: 's3',
    contentType: 'application/octet-stream',
    expires: new Date(Date.now() + 3600_000).toJSON(),
  });
  const forged = putUrl.replace(/sig=[^&]+/, 'sig=AAAA');
  const r = await push(forged, { method: 'PUT', total: HUGE });
  expect(r.status).toBe(403);
  expect(r.sent).toBeLessThan(32 * MB);
  // A signed upload over the store's limit is cut off at the limit, with Azure's code.
  const over = await push(putUrl, { method: 'PUT', total: HUGE });
  expect(over.status).toBe(413);
  expect(over.body).toContain('RequestBodyTooLarge');
});

test('POST /admin/functions/<name> runs a timer only for the root access token', async () => {
  const url = `${svc.rootUrl}/admin/functions/reaper`;
  expect((await fetch(url, { method: 'POST' })).status).toBe(401);
  expect((await fetch(url, { method: 'POST', headers: { 'x-functions-key': 'wrong' } })).status).toBe(401);
  expect((await fetch(url, { method: 'POST', headers: { 'x-functions-key': svc.root.accessToken } })).status).toBe(202);
});
