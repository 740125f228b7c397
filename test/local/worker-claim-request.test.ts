import http from 'node:http';
import { abortableClaimWork } from '../../worker/claim-request';
import { ClaimWorkSource } from '../../worker/protocols/claim-work';
import { CredentialsRejected } from '../../worker/protocols/source';
import { memoryLog } from '../../worker/logger';

/** A queue stand-in: `answer` decides per request; by default it never answers (a long poll). */
async function fakeQueue(answer?: (req: http.IncomingMessage, res: http.ServerResponse) => void) {
  const seen: { url: string; authorization: string; closed: Promise<void> }[] = [];
  const server = http.createServer((req, res) => {
    seen.push({ url: req.url ?? '', authorization: String(req.headers.authorization), closed: new Promise((r) => res.once('close', () => r())) });
    answer?.(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const rootUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    rootUrl,
    seen,
    close: () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(r));
    },
  };
}

const ids = { taskQueueId: 'prov/type', workerGroup: 'g', workerId: 'w' };

test('aborting the signal ends a long poll at once and closes its connection', async () => {
  const q = await fakeQueue();
  try {
    const source = new ClaimWorkSource({ queue: abortableClaimWork(q.rootUrl, { clientId: 'c', accessToken: 't' }), ...ids, log: memoryLog() });
    const stop = new AbortController();
    const claimed = source.claim(1, stop.signal);
    while (!q.seen.length) await new Promise((r) => setImmediate(r));
    expect(q.seen[0].url).toBe('/api/queue/v1/claim-work/prov/type');
    expect(q.seen[0].authorization).toMatch(/^Hawk id="c"/);
    stop.abort('SIGTERM');
    expect(await claimed).toEqual([]);
    await q.seen[0].closed;
  } finally {
    await q.close();
  }
});

test('a 401 is CredentialsRejected with the queue message; a 500 is logged and retried later', async () => {
  let status = 401;
  const q = await fakeQueue((_req, res) => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ code: 'AuthenticationFailed', message: 'Bad mac' }));
  });
  try {
    const log = memoryLog();
    const sleeps: number[] = [];
    const source = new ClaimWorkSource({
      queue: abortableClaimWork(q.rootUrl, { clientId: 'c', accessToken: 't' }),
      ...ids,
      log,
      sleep: async (ms) => void sleeps.push(ms),
    });
    await expect(source.claim(1, new AbortController().signal)).rejects.toThrow(CredentialsRejected);
    await expect(source.claim(1, new AbortController().signal)).rejects.toThrow('Bad mac');
    status = 500;
    expect(await source.claim(1, new AbortController().signal)).toEqual([]);
    expect(log.events.map((e) => [e.event, e.fields.status])).toEqual([['claim-work-failed', 500]]);
    expect(sleeps).toHaveLength(1);
  } finally {
    await q.close();
  }
});
