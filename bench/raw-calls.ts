/**
 * The 7 calls of (f)'s raw lifecycle, behind one interface, so the same loop (bench/raw.ts) runs
 * through the storage port (the service's own storage code) or through the storage SDKs' default
 * clients (bench/raw-sdk.ts).
 */
import { createStorage } from '../shared/storage/storage';
import { Entity } from '../shared/storage/port';

export interface RawMessage {
  messageId: string;
  popReceipt: string;
  /** The message's body as put (`put`'s object). */
  body: { taskId: string };
}

export interface RawCalls {
  /** Storage calls made so far. */
  readonly calls: number;
  create(withResident: boolean): Promise<void>;
  /** Leaves one invisible message in another queue of the account (see `rawCeiling`'s `resident`). */
  park(): Promise<void>;
  insert(entity: Entity): Promise<void>;
  put(body: { taskId: string; [k: string]: unknown }): Promise<void>;
  receive(): Promise<RawMessage | undefined>;
  /** Merges `props` into the task row, unconditionally or under `etag`. */
  merge(pk: string, rk: string, props: Record<string, unknown>, etag?: string): Promise<void>;
  delete(m: RawMessage): Promise<void>;
  get(pk: string, rk: string): Promise<{ etag: string } | undefined>;
}

/** A pending message's visibility once received, seconds (as a claim's hint). */
export const RAW_VISIBILITY_S = 300;
/** A pending message's time to live, seconds. */
export const RAW_TTL_S = 3600;
/** A resident message stays invisible this long, and lives twice as long (the loop lasts seconds). */
export const RESIDENT_VISIBILITY_S = 3600;

/** The raw calls through the storage port, as the service makes them (table names and queues under `prefix`). */
export function portRawCalls(connection: string, prefix: string): RawCalls {
  const storage = createStorage(connection, prefix);
  const tasks = storage.table('Tasks');
  const queue = (n: string) => storage.queueNamed(`${storage.prefix}-${n}`, n);
  const pending = queue('pending');
  const parked = queue('resident');
  return {
    get calls() {
      return storage.meter.total;
    },
    async create(withResident) {
      await Promise.all([tasks.create(), pending.create(), withResident ? parked.create() : undefined]);
    },
    async park() {
      await parked.put({ resident: true }, { visibilityS: RESIDENT_VISIBILITY_S, ttlS: 2 * RESIDENT_VISIBILITY_S });
    },
    async insert(entity) {
      await tasks.insert(entity);
    },
    async put(body) {
      await pending.put(body, { ttlS: RAW_TTL_S });
    },
    async receive() {
      const m = (await pending.receive(1, RAW_VISIBILITY_S))[0];
      return m && { messageId: m.messageId, popReceipt: m.popReceipt, body: JSON.parse(Buffer.from(m.messageText, 'base64').toString()) };
    },
    async merge(pk, rk, props, etag = '*') {
      await tasks.merge({ partitionKey: pk, rowKey: rk, ...props }, etag);
    },
    async delete(m) {
      await pending.delete(m.messageId, m.popReceipt);
    },
    get: (pk, rk) => tasks.get(pk, rk),
  };
}
