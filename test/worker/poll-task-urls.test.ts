import { PollTaskUrlsSource, LegacyQueue, HttpClient, DEQUEUE_WARN_COUNT } from '../../worker/protocols/poll-task-urls';
import { memoryLog } from '../../worker/logger';
import type { Claim } from '../../worker/types';

const msg = (id: string, taskId: string, runId: number, dequeueCount = 1) =>
  `<QueueMessage><MessageId>${id}</MessageId><PopReceipt>pr+${id}/=</PopReceipt><DequeueCount>${dequeueCount}</DequeueCount><MessageText>${Buffer.from(
    JSON.stringify({ taskId, runId }),
  ).toString('base64')}</MessageText></QueueMessage>`;
const list = (...m: string[]) => `<?xml version="1.0" encoding="utf-8"?><QueueMessagesList>${m.join('')}</QueueMessagesList>`;
const queues = ['high', 'low'].map((q) => ({
  signedPollUrl: `https://acct.queue/${q}/messages?visibilitytimeout=300&sig=SECRET`,
  signedDeleteUrl: `https://acct.queue/${q}/messages/{{messageId}}?popreceipt={{popReceipt}}&sig=SECRET`,
}));

function setup(opts: { polls: Record<string, string[]>; claim?: (taskId: string) => Promise<Claim>; deleteStatus?: number; expires?: string }) {
  const log = memoryLog();
  const requests: string[] = [];
  const claimed: string[] = [];
  let urlCalls = 0;
  const http: HttpClient = {
    async request(method, url) {
      requests.push(`${method} ${url}`);
      if (method === 'DELETE') return { status: opts.deleteStatus ?? 204, text: '' };
      const q = new URL(url).pathname.split('/')[1];
      return { status: 200, text: opts.polls[q]?.shift() ?? list() };
    },
  };
  const queue: LegacyQueue = {
    async pollTaskUrls(p, w) {
      urlCalls++;
      expect([p, w]).toEqual(['prov', 'wt']);
      return { queues, expires: opts.expires ?? new Date(Date.now() + 30 * 60_000).toJSON() };
    },
    async claimTask(taskId, runId, body) {
      expect(body).toEqual({ workerGroup: 'g', workerId: 'w' });
      claimed.push(`${taskId}/${runId}`);
      return opts.claim ? opts.claim(taskId) : ({ status: { taskId }, runId } as Claim);
    },
  };
  const sleeps: number[] = [];
  const source = new PollTaskUrlsSource({
    queue,
    provisionerId: 'prov',
    workerType: 'wt',
    workerGroup: 'g',
    workerId: 'w',
    log,
    http,
    sleep: async (ms) => void sleeps.push(ms),
  });
  return { source, log, requests, claimed, sleeps, urlCalls: () => urlCalls };
}

const signal = new AbortController().signal;

test('queues are polled in order; each message is claimed, then deleted with its encoded pop receipt', async () => {
  const s = setup({ polls: { high: [list()], low: [list(msg('m1', 'T1', 0), msg('m2', 'T2', 1))] } });
  const claims = await s.source.claim(4, signal);
  expect(claims.map((c) => c.status.taskId)).toEqual(['T1', 'T2']);
  expect(s.claimed).toEqual(['T1/0', 'T2/1']);
  expect(s.requests).toEqual([
    'GET https://acct.queue/high/messages?visibilitytimeout=300&sig=SECRET&numofmessages=4',
    'GET https://acct.queue/low/messages?visibilitytimeout=300&sig=SECRET&numofmessages=4',
    'DELETE https://acct.queue/low/messages/m1?popreceipt=pr%2Bm1%2F%3D&sig=SECRET',
    'DELETE https://acct.queue/low/messages/m2?popreceipt=pr%2Bm2%2F%3D&sig=SECRET',
  ]);
  expect(s.sleeps).toEqual([]);
});

test('an empty pass sleeps about a second; the signed URLs are reused until close to expiry', async () => {
  const s = setup({ polls: {} });
  expect(await s.source.claim(1, signal)).toEqual([]);
  expect(await s.source.claim(1, signal)).toEqual([]);
  expect(s.sleeps).toEqual([1000, 1000]);
  expect(s.urlCalls()).toBe(1);
  const soon = setup({ polls: {}, expires: new Date(Date.now() + 60_000).toJSON() });
  await soon.source.claim(1, signal);
  await soon.source.claim(1, signal);
  expect(soon.urlCalls()).toBe(2);
});

test('a 4xx from claimTask still deletes the message; a 5xx leaves it for another try', async () => {
  const s = setup({
    polls: { high: [list(msg('m1', 'GONE', 0), msg('m2', 'BUSY', 0))] },
    claim: async (taskId) => {
      throw Object.assign(new Error('nope'), { statusCode: taskId === 'GONE' ? 409 : 503 });
    },
  });
  expect(await s.source.claim(2, signal)).toEqual([]);
  expect(s.requests.filter((r) => r.startsWith('DELETE'))).toEqual(['DELETE https://acct.queue/high/messages/m1?popreceipt=pr%2Bm1%2F%3D&sig=SECRET']);
  expect(s.log.events.map((e) => e.event)).toEqual(['claim-task-rejected', 'claim-task-failed']);
});

test(`a message dequeued more than ${DEQUEUE_WARN_COUNT} times is reported; delete failures are logged without the signature`, async () => {
  const s = setup({ polls: { high: [list(msg('m1', 'T1', 0, DEQUEUE_WARN_COUNT + 1))] }, deleteStatus: 500 });
  expect((await s.source.claim(1, signal)).map((c) => c.status.taskId)).toEqual(['T1']);
  const warn = s.log.events.find((e) => e.event === 'message-dequeued-often')!;
  expect(warn).toMatchObject({ level: 'warn', fields: { messageId: 'm1', dequeueCount: DEQUEUE_WARN_COUNT + 1, queue: 'https://acct.queue/high/messages' } });
  const failed = s.log.events.find((e) => e.event === 'delete-message-failed')!;
  expect(failed).toMatchObject({ level: 'error', fields: { messageId: 'm1', status: 500 } });
  expect(JSON.stringify(s.log.events)).not.toContain('SECRET');
  expect(s.requests.filter((r) => r.startsWith('DELETE'))).toHaveLength(3); // retried before giving up
});

test('an unreadable message is deleted (it could never be claimed) and logged', async () => {
  const bad = '<QueueMessage><MessageId>x</MessageId><PopReceipt>p</PopReceipt><DequeueCount>1</DequeueCount><MessageText>!!!</MessageText></QueueMessage>';
  const s = setup({ polls: { high: [list(bad)] } });
  expect(await s.source.claim(1, signal)).toEqual([]);
  expect(s.claimed).toEqual([]);
  expect(s.requests.filter((r) => r.startsWith('DELETE'))).toHaveLength(1);
  expect(s.log.events.map((e) => e.event)).toEqual(['message-unreadable']);
});
