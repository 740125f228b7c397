/**
 * Queue message put and delete go through the Queue SDK's pipeline without its operation client
 * (shared/storage/queue-messages.ts). What that pipeline did for them must still happen: a
 * throttled attempt (503 ServerBusy) is retried after the SDK's back-off, Azure's refusals reach
 * the adapter with their status and error code, and the stored message is what was put.
 */
import crypto from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { AzureStorage } from '../../shared/storage/azure';

/** An HTTP proxy in front of the test Azurite's queue endpoint that answers the first `busy` message calls with 503. */
class BusyProxy {
  busy = 0;
  readonly seen: string[] = [];
  private server!: http.Server;
  private readonly agent = new http.Agent({ keepAlive: true });
  connectionString = '';

  async start(connection: string): Promise<void> {
    const m = /QueueEndpoint=http:\/\/([^:/]+):(\d+)/.exec(connection)!;
    const [host, port] = [m[1], Number(m[2])];
    this.server = http.createServer((req, res) => {
      const body: Buffer[] = [];
      req.on('data', (c: Buffer) => body.push(c));
      req.on('end', () => {
        this.seen.push(`${req.method} ${req.url!.split('?')[0].split('/').slice(2).join('/')}`);
        if (this.busy > 0 && req.url!.includes('/messages')) {
          this.busy--;
          res.writeHead(503, { 'x-ms-error-code': 'ServerBusy', 'content-type': 'application/xml' });
          res.end(
            '<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code><Message>Operations per second is over the account limit.</Message></Error>',
          );
          return;
        }
        const up = http.request({ host, port, path: req.url, method: req.method, headers: req.headers, agent: this.agent }, (r) => {
          res.writeHead(r.statusCode!, r.headers);
          r.pipe(res);
        });
        up.on('error', () => res.destroy());
        up.end(Buffer.concat(body));
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    const own = (this.server.address() as net.AddressInfo).port;
    this.connectionString = connection.replace(m[0], `QueueEndpoint=http://127.0.0.1:${own}`);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    this.agent.destroy();
    await new Promise((r) => this.server.close(r));
  }
}

const proxy = new BusyProxy();
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
