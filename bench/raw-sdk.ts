/**
 * (f)'s raw calls through the storage SDKs' default clients: `TableClient` and `QueueClient` from
 * the connection string, with every option left at its default (the one needed for Azurite's
 * http endpoint aside): the raw loop as the side-by-side measurement against Taskcluster defines
 * it, whose client it does not name (docs/performance.md, "The raw ceiling's clients").
 */
import { TableClient } from '@azure/data-tables';
import { QueueServiceClient } from '@azure/storage-queue';
import { StorageConflict } from '../shared/storage/port';
import { RAW_TTL_S, RAW_VISIBILITY_S, RawCalls, RESIDENT_VISIBILITY_S } from './raw-calls';

/** A refused conditional write (the row exists, the ETag moved on) as the loop counts it. */
function conflictOf(err: unknown): unknown {
  const status = (err as { statusCode?: number })?.statusCode;
  return status === 409 || status === 412 ? new StorageConflict(status === 409 ? 'exists' : 'etag', String((err as Error).message)) : err;
}

export function sdkRawCalls(connection: string, prefix: string): RawCalls {
  const tasks = TableClient.fromConnectionString(connection, `${prefix}Tasks`, { allowInsecureConnection: true });
  const queues = QueueServiceClient.fromConnectionString(connection);
  const pending = queues.getQueueClient(`${prefix}-pending`);
  const parked = queues.getQueueClient(`${prefix}-resident`);
  let calls = 0;
  const call = async <T>(fn: () => Promise<T>): Promise<T> => {
    calls++;
    try {
      return await fn();
    } catch (err) {
      throw conflictOf(err);
    }
  };
  const text = (body: unknown) => Buffer.from(JSON.stringify(body)).toString('base64');
  return {
    get calls() {
      return calls;
    },
    async create(withResident) {
      await Promise.all([call(() => tasks.createTable()), call(() => pending.create()), withResident ? call(() => parked.create()) : undefined]);
    },
    async park() {
      await call(() =>
        parked.sendMessage(text({ resident: true }), { visibilityTimeout: RESIDENT_VISIBILITY_S, messageTimeToLive: 2 * RESIDENT_VISIBILITY_S }),
      );
    },
    async insert(entity) {
      await call(() => tasks.createEntity(entity));
    },
    async put(body) {
      await call(() => pending.sendMessage(text(body), { messageTimeToLive: RAW_TTL_S }));
    },
    async receive() {
      const m = (await call(() => pending.receiveMessages({ numberOfMessages: 1, visibilityTimeout: RAW_VISIBILITY_S }))).receivedMessageItems[0];
      return m && { messageId: m.messageId, popReceipt: m.popReceipt, body: JSON.parse(Buffer.from(m.messageText, 'base64').toString()) };
    },
    async merge(pk, rk, props, etag) {
      await call(() => tasks.updateEntity({ partitionKey: pk, rowKey: rk, ...props }, 'Merge', etag ? { etag } : undefined));
    },
    async delete(m) {
      await call(() => pending.deleteMessage(m.messageId, m.popReceipt));
    },
    async get(pk, rk) {
      try {
        const e = await call(() => tasks.getEntity(pk, rk));
        return { etag: e.etag };
      } catch (err) {
        if ((err as { statusCode?: number })?.statusCode === 404) return undefined;
        throw err;
      }
    },
  };
}
