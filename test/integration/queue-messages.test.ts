/**
 * Queue message put and delete go through the Queue SDK's pipeline without its operation client
 * (shared/storage/queue-messages.ts). What that pipeline did for them must still happen: a
 * throttled attempt (503 ServerBusy) is retried after the SDK's back-off, Azure's refusals reach
 * the adapter with their status and error code, and the stored message is what was put.
 */
import crypto from 'node:crypto';
import { AzureStorage } from '../../shared/storage/azure';
import { BusyProxy } from '../helpers/busy-proxy';

const proxy = new BusyProxy('QueueEndpoint', (path) => path.includes('/messages'), {
  contentType: 'application/xml',
  body: '<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code><Message>Operations per second is over the account limit.</Message></Error>',
});
let storage: AzureStorage;
beforeAll(async () => {
  await proxy.start(process.env.TEST_STORAGE_CONNECTION!);
  storage = new AzureStorage(proxy.connectionString, 'qm' + crypto.randomBytes(4).toString('hex'));
});
afterAll(() => proxy.close());

test('a throttled put and delete are retried, and the message put is the one stored', async () => {
  const q = storage.queueNamed(`${storage.prefix}-busy`, 'busy');
  await q.create();
  proxy.busy = 1;
  proxy.seen.length = 0;
  const put = await q.put({ taskId: 'abc', runId: 0 });
  expect(proxy.seen.filter((s) => s.endsWith('/messages'))).toHaveLength(2);
  const [got] = await q.receive(1, 30);
  expect(got.messageId).toBe(put.messageId);
  expect(JSON.parse(Buffer.from(got.messageText, 'base64').toString())).toEqual({ taskId: 'abc', runId: 0 });

  proxy.busy = 1;
  proxy.seen.length = 0;
  await q.delete(got.messageId, got.popReceipt);
  expect(proxy.seen.filter((s) => s.startsWith('DELETE'))).toHaveLength(2);
  expect(await q.approximateCount()).toBe(0);
}, 30_000);

test('a put into a queue that does not exist is refused with its status and Azure error code', async () => {
  const q = storage.queueNamed(`${storage.prefix}-never`, 'never');
  await expect(q.put({ n: 1 })).rejects.toMatchObject({ statusCode: 404, code: 'QueueNotFound' });
});
