/**
 * The in-memory adapter of the storage port, for fast tests of the domain without Azurite. It
 * keeps Azure's semantics where the domain can tell the difference: ETags and StorageConflict
 * exactly where Azure answers 409/412/404, atomic entity-group transactions, PartitionKey/RowKey
 * order with continuation tokens, queue leases (visibility, pop receipts, dequeue counts, TTL) and
 * block blobs. Every call is counted by the meter under the same op names as the Azure adapter.
 *
 * SAS URLs are plain HTTP URLs under the app's own address (`<publicUrl>/memory-storage/<account>/…`):
 * the local host (shared/local/host.ts) hands such requests to `MemoryStorage.fetch`, which answers
 * them as Azure would, with Azure's rules (signature bound to the resource, permissions, protocol,
 * start and expiry). So a worker or taskcluster-client reaches an in-memory store as it reaches Azure.
 */
import crypto from 'node:crypto';
import { XMLBuilder } from 'fast-xml-parser';
import { Meter, StorageMeter } from './counter';
import { ShardedTriggerQueue, triggerShardNames } from './trigger-shards';
import {
  ArtifactContainer,
  checkContinuation,
  checkPrefix,
  checkEntity,
  Condition,
  Entity,
  entityBytes,
  KeyRange,
  MAX_DEQUEUE,
  MAX_MESSAGE_BYTES,
  MAX_TABLE_PAGE,
  MAX_TRANSACTION_BYTES,
  MAX_TRANSACTION_ACTIONS,
  MAX_VISIBILITY_S,
  Page,
  PropertyValue,
  Query,
  Queue,
  QueueMessage,
  SasProtocolChoice,
  Storage,
  StorageConflict,
  StorageLimit,
  Table,
  TableAction,
  TableName,
  TABLES,
  EVENT_TABLES,
  TriggerQueue,
  TRIGGER_QUEUES,
} from './port';

/** An error shaped like the SDKs' RestError, for failures the domain does not handle specially. */
class MemoryRestError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
  ) {
    super(`${code} (${statusCode})`);
    this.name = 'RestError';
  }
}

type Clock = () => number;

function copyValue(v: unknown): unknown {
  if (v instanceof Uint8Array) return new Uint8Array(v);
  if (v instanceof Date) return new Date(v.getTime());
  return v;
}

/** Properties as Azure stores them: no keys, no SDK metadata, no null or undefined values. */
function properties(e: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(e)) {
    if (k === 'partitionKey' || k === 'rowKey' || k === 'etag' || k === 'timestamp' || k.startsWith('odata.')) continue;
    if (v === null || v === undefined) continue;
    out[k] = copyValue(v);
  }
  return out;
}

interface Row {
  pk: string;
  rk: string;
  props: Record<string, unknown>;
  etag: string;
  timestamp: string;
}

function compare(a: PropertyValue, op: string, b: PropertyValue): boolean {
  switch (op) {
    case 'eq':
      return a === b;
    case 'ne':
      return a !== b;
    case 'gt':
      return a > b;
    case 'ge':
      return a >= b;
    case 'lt':
      return a < b;
    case 'le':
      return a <= b;
  }
  throw new Error(`unknown comparison ${op}`);
}

function inKey(k: string, q: string | KeyRange | undefined): boolean {
  if (q === undefined) return true;
  if (typeof q === 'string') return k === q;
  return (q.gt === undefined || k > q.gt) && (q.ge === undefined || k >= q.ge) && (q.lt === undefined || k < q.lt) && (q.le === undefined || k <= q.le);
}

function holds(props: Record<string, unknown>, c: Condition): boolean {
  if ('or' in c) return c.or.some((x) => holds(props, x));
  const v = props[c.prop];
  // As in Azure: a missing property, or one of another type, matches nothing.
  if (v === undefined || typeof v !== typeof c.value) return false;
  return compare(v as PropertyValue, c.op, c.value);
}

function rowKeyOf(pk: string, rk: string): string {
  return `${pk}\u0000${rk}`;
}

function byKeys(a: Row, b: Row): number {
  if (a.pk !== b.pk) return a.pk < b.pk ? -1 : 1;
  return a.rk < b.rk ? -1 : a.rk > b.rk ? 1 : 0;
}

class MemoryTable implements Table {
  exists = false;
  readonly rows = new Map<string, Row>();

  constructor(
    readonly name: string,
    private readonly meter: Meter,
    private readonly store: MemoryStorage,
  ) {}

  private call<T>(op: string, fn: () => T): Promise<T> {
    return this.meter.run(`${this.name}.${op}`, async () => fn());
  }

  private mustExist(): void {
    if (!this.exists) throw new MemoryRestError(404, 'TableNotFound');
  }

  private entity(r: Row): Entity & { etag: string } {
    const out: Record<string, unknown> = { partitionKey: r.pk, rowKey: r.rk, timestamp: r.timestamp, etag: r.etag };
    for (const [k, v] of Object.entries(r.props)) out[k] = copyValue(v);
    return out as Entity & { etag: string };
  }

  private write(pk: string, rk: string, props: Record<string, unknown>): string {
    checkEntity(pk, rk, props);
    const etag = this.store.nextEtag();
    this.rows.set(rowKeyOf(pk, rk), { pk, rk, props, etag, timestamp: new Date(this.store.now()).toISOString() });
    return etag;
  }

  create(): Promise<void> {
    return this.call('create', () => {
      this.exists = true;
    });
  }

  get<T extends Entity = Entity>(pk: string, rk: string): Promise<(T & { etag: string }) | undefined> {
    return this.call('get', () => {
      const r = this.exists ? this.rows.get(rowKeyOf(pk, rk)) : undefined;
      return r ? (this.entity(r) as T & { etag: string }) : undefined;
    });
  }

  insert(entity: Entity): Promise<string> {
    return this.call('insert', () => {
      this.mustExist();
      checkEntity(entity.partitionKey, entity.rowKey, properties(entity));
      if (this.rows.has(rowKeyOf(entity.partitionKey, entity.rowKey))) throw new StorageConflict('exists', `${this.name}: entity exists`);
      return this.write(entity.partitionKey, entity.rowKey, properties(entity));
    });
  }

  /** Checks an If-Match write against the current row; returns the row. */
  private guard(pk: string, rk: string, etag: string): Row {
    const r = this.rows.get(rowKeyOf(pk, rk));
    if (!r) throw new StorageConflict('missing', `${this.name}: entity gone`);
    if (etag !== '*' && etag !== r.etag) throw new StorageConflict('etag', `${this.name}: entity changed`);
    return r;
  }

  update(entity: Entity, etag: string): Promise<string> {
    return this.call('update', () => {
      this.mustExist();
      this.guard(entity.partitionKey, entity.rowKey, etag);
      return this.write(entity.partitionKey, entity.rowKey, properties(entity));
    });
  }

  merge(entity: Entity, etag: string): Promise<string> {
    return this.call('merge', () => {
      this.mustExist();
      const r = this.guard(entity.partitionKey, entity.rowKey, etag);
      return this.write(entity.partitionKey, entity.rowKey, { ...r.props, ...properties(entity) });
    });
  }

  upsert(entity: Entity): Promise<string> {
    return this.call('upsert', () => {
      this.mustExist();
      return this.write(entity.partitionKey, entity.rowKey, properties(entity));
    });
  }

  delete(pk: string, rk: string, etag = '*'): Promise<boolean> {
    return this.call('delete', () => {
      this.mustExist();
      const r = this.rows.get(rowKeyOf(pk, rk));
      if (!r) return false;
      if (etag !== '*' && etag !== r.etag) throw new StorageConflict('etag', `${this.name}: entity changed`);
      this.rows.delete(rowKeyOf(pk, rk));
      return true;
    });
  }

  transact(actions: TableAction[]): Promise<(string | undefined)[]> {
    return this.call('transaction', () => {
      this.mustExist();
      // Azure refuses malformed batches as a whole (400), before looking at any row.
      if (actions.length === 0 || actions.length > MAX_TRANSACTION_ACTIONS) throw new MemoryRestError(400, 'InvalidInput');
      const keyOf = (a: TableAction) => (a.op === 'delete' ? { pk: a.partitionKey, rk: a.rowKey } : { pk: a.entity.partitionKey, rk: a.entity.rowKey });
      const keys = actions.map(keyOf);
      if (new Set(keys.map((k) => k.pk)).size !== 1) throw new MemoryRestError(400, 'CommandsInBatchActOnDifferentPartitions');
      if (new Set(keys.map((k) => rowKeyOf(k.pk, k.rk))).size !== keys.length) throw new MemoryRestError(400, 'InvalidDuplicateRow');
      let bytes = 0;
      for (const a of actions) {
        if (a.op === 'delete') continue;
        const props = properties(a.entity);
        checkEntity(a.entity.partitionKey, a.entity.rowKey, props);
        bytes += entityBytes(a.entity.partitionKey, a.entity.rowKey, props);
      }
      if (bytes >= MAX_TRANSACTION_BYTES) throw new StorageLimit('RequestBodyTooLarge', `transaction of ${bytes} bytes; under ${MAX_TRANSACTION_BYTES}`);
      // Check every action against the rows as they are, then apply all: all or nothing.
      for (const a of actions) {
        const k = keyOf(a);
        const r = this.rows.get(rowKeyOf(k.pk, k.rk));
        if (a.op === 'create' && r) throw new StorageConflict('exists', `${this.name}: entity exists`);
        if (a.op === 'update') this.guard(k.pk, k.rk, a.etag);
        if (a.op === 'delete' && !r) throw new StorageConflict('missing', `${this.name}: entity gone`);
        if (a.op === 'delete' && a.etag !== undefined && a.etag !== '*' && a.etag !== r!.etag)
          throw new StorageConflict('etag', `${this.name}: entity changed`);
      }
      return actions.map((a) => {
        if (a.op === 'delete') {
          this.rows.delete(rowKeyOf(a.partitionKey, a.rowKey));
          return undefined;
        }
        const { partitionKey: pk, rowKey: rk } = a.entity;
        const old = this.rows.get(rowKeyOf(pk, rk));
        const merged = (a.op === 'update' || a.op === 'upsert') && a.mode === 'Merge' && old ? { ...old.props, ...properties(a.entity) } : properties(a.entity);
        return this.write(pk, rk, merged);
      });
    });
  }

  page<T extends Entity = Entity>(query: Query, limit: number, continuation?: string): Promise<Page<T & { etag: string }>> {
    checkContinuation(continuation);
    return this.call('query', () => {
      this.mustExist();
      let from: { nextPartitionKey: string; nextRowKey: string } | undefined;
      if (continuation) {
        try {
          from = JSON.parse(Buffer.from(continuation, 'base64').toString('utf8'));
        } catch {
          from = undefined;
        }
        if (typeof from?.nextPartitionKey !== 'string' || typeof from?.nextRowKey !== 'string') throw new MemoryRestError(400, 'InvalidContinuationToken');
      }
      const size = Math.max(1, Math.min(limit, MAX_TABLE_PAGE));
      const matching = [...this.rows.values()]
        .filter((r) => !from || r.pk > from.nextPartitionKey || (r.pk === from.nextPartitionKey && r.rk >= from.nextRowKey))
        .filter((r) => inKey(r.pk, query.partitionKey) && inKey(r.rk, query.rowKey) && (query.where ?? []).every((c) => holds(r.props, c)))
        .sort(byKeys);
      const items = matching.slice(0, size).map((r) => this.project(r, query.select) as T & { etag: string });
      const next = matching[size];
      const token = next ? Buffer.from(JSON.stringify({ nextPartitionKey: next.pk, nextRowKey: next.rk })).toString('base64') : undefined;
      return { items, continuation: token };
    });
  }

  private project(r: Row, select: string[] | undefined): Record<string, unknown> {
    const full = this.entity(r);
    if (!select) return full;
    const out: Record<string, unknown> = { etag: r.etag };
    for (const s of select) {
      if (s === 'PartitionKey') out.partitionKey = r.pk;
      else if (s === 'RowKey') out.rowKey = r.rk;
      else if (s === 'Timestamp') out.timestamp = r.timestamp;
      else if (s in r.props) out[s] = copyValue(r.props[s]);
    }
    return out;
  }
}

/** Azure refuses a message over 64 KiB. */
function checkMessage(text: string): void {
  const bytes = Buffer.byteLength(text);
  if (bytes > MAX_MESSAGE_BYTES) throw new StorageLimit('MessageTooLarge', `queue message of ${bytes} bytes; at most ${MAX_MESSAGE_BYTES}`);
}

interface Message {
  messageId: string;
  popReceipt: string;
  text: string;
  dequeueCount: number;
  insertedOn: number;
  expiresOn: number;
  visibleAt: number;
}

class MemoryQueue implements Queue {
  exists = false;
  messages: Message[] = [];

  constructor(
    readonly name: string,
    private readonly meter: Meter,
    private readonly label: string,
    private readonly now: Clock,
  ) {}

  private call<T>(op: string, fn: () => T): Promise<T> {
    return this.meter.run(`${this.label}.${op}`, async () => fn());
  }

  private mustExist(): void {
    if (!this.exists) throw new MemoryRestError(404, 'QueueNotFound');
  }

  /** Drops messages past their time to live. */
  private live(): Message[] {
    const now = this.now();
    this.messages = this.messages.filter((m) => m.expiresOn > now);
    return this.messages;
  }

  private find(messageId: string, popReceipt: string): Message | undefined {
    return this.live().find((m) => m.messageId === messageId && m.popReceipt === popReceipt);
  }

  create(): Promise<void> {
    return this.call('create', () => {
      this.exists = true;
    });
  }

  deleteQueue(): Promise<void> {
    return this.call('deleteQueue', () => {
      this.exists = false;
      this.messages = [];
    });
  }

  put(body: unknown, opts: { visibilityS?: number; ttlS?: number } = {}): Promise<{ messageId: string; popReceipt: string }> {
    const text = Buffer.from(JSON.stringify(body)).toString('base64');
    return this.call('put', () => this.putText(text, opts));
  }

  putText(text: string, opts: { visibilityS?: number; ttlS?: number }): { messageId: string; popReceipt: string } {
    this.mustExist();
    checkMessage(text);
    // Azure: a message's visibility must end before its time to live does.
    if (opts.ttlS !== undefined && (opts.visibilityS ?? 0) > 0 && (opts.visibilityS ?? 0) >= opts.ttlS)
      throw new MemoryRestError(400, 'OutOfRangeQueryParameterValue');
    const now = this.now();
    const visibilityS = Math.max(0, Math.min(MAX_VISIBILITY_S, Math.floor(opts.visibilityS ?? 0)));
    const m: Message = {
      messageId: crypto.randomUUID(),
      popReceipt: crypto.randomBytes(12).toString('base64'),
      text,
      dequeueCount: 0,
      insertedOn: now,
      expiresOn: opts.ttlS === undefined ? Number.POSITIVE_INFINITY : now + Math.max(1, Math.floor(opts.ttlS)) * 1000,
      visibleAt: now + visibilityS * 1000,
    };
    this.messages.push(m);
    return { messageId: m.messageId, popReceipt: m.popReceipt };
  }

  receive(count: number, visibilityS: number): Promise<QueueMessage[]> {
    return this.call('get', () => this.receiveNow(count, visibilityS));
  }

  receiveNow(count: number, visibilityS: number): QueueMessage[] {
    this.mustExist();
    const now = this.now();
    const n = Math.max(1, Math.min(MAX_DEQUEUE, count));
    const lease = Math.max(1, Math.min(MAX_VISIBILITY_S, Math.floor(visibilityS))) * 1000;
    return this.live()
      .filter((m) => m.visibleAt <= now)
      .slice(0, n)
      .map((m) => {
        m.dequeueCount++;
        m.popReceipt = crypto.randomBytes(12).toString('base64');
        m.visibleAt = now + lease;
        return { messageId: m.messageId, popReceipt: m.popReceipt, messageText: m.text, dequeueCount: m.dequeueCount, insertedOn: new Date(m.insertedOn) };
      });
  }

  delete(messageId: string, popReceipt: string): Promise<void> {
    return this.call('delete', () => {
      this.deleteNow(messageId, popReceipt);
    });
  }

  /** False when no message has that id and pop receipt (Azure: 404/400). */
  deleteNow(messageId: string, popReceipt: string): boolean {
    this.mustExist();
    const m = this.find(messageId, popReceipt);
    if (m) this.messages = this.messages.filter((x) => x !== m);
    return Boolean(m);
  }

  release(messageId: string, popReceipt: string, visibilityS = 0): Promise<void> {
    return this.call('update', () => {
      this.mustExist();
      const m = this.find(messageId, popReceipt);
      if (!m) return;
      m.visibleAt = this.now() + Math.max(0, Math.min(MAX_VISIBILITY_S, Math.floor(visibilityS))) * 1000;
      m.popReceipt = crypto.randomBytes(12).toString('base64');
    });
  }

  rearm(messageId: string, popReceipt: string, body: unknown, visibilityS: number): Promise<string | undefined> {
    return this.call('update', () => {
      this.mustExist();
      const m = this.find(messageId, popReceipt);
      if (!m) return undefined;
      const text = Buffer.from(JSON.stringify(body)).toString('base64');
      checkMessage(text);
      m.text = text;
      m.visibleAt = this.now() + Math.max(0, Math.min(MAX_VISIBILITY_S, Math.floor(visibilityS))) * 1000;
      m.popReceipt = crypto.randomBytes(12).toString('base64');
      return m.popReceipt;
    });
  }

  approximateCount(): Promise<number> {
    return this.call('properties', () => (this.exists ? this.live().length : 0));
  }

  peek(count: number): Promise<{ messageText: string }[]> {
    return this.call('peek', () => {
      this.mustExist();
      const now = this.now();
      return this.live()
        .filter((m) => m.visibleAt <= now)
        .slice(0, Math.max(1, Math.min(MAX_DEQUEUE, count)))
        .map((m) => ({ messageText: m.text }));
    });
  }
}

interface Blob {
  body: Buffer;
  contentType?: string;
  contentEncoding?: string;
  blocks: Map<string, Buffer>;
  /** An append blob: only appends change it. */
  append?: boolean;
  /** Blocks appended (Azure refuses the 50,001st). */
  appends?: number;
  /** Leased by `seal`: appends and overwrites are refused (Azure: 412 LeaseIdMissing). */
  sealed?: boolean;
}

class MemoryArtifacts implements ArtifactContainer {
  created = false;
  readonly committed = new Map<string, Blob>();
  readonly uncommitted = new Map<string, Map<string, Buffer>>();

  constructor(
    readonly containerName: string,
    private readonly meter: Meter,
    private readonly store: MemoryStorage,
  ) {}

  private call<T>(op: string, fn: () => T): Promise<T> {
    return this.meter.run(`artifacts.${op}`, async () => fn());
  }

  private mustExist(): void {
    if (!this.created) throw new MemoryRestError(404, 'ContainerNotFound');
  }

  createContainer(): Promise<void> {
    return this.call('createContainer', () => {
      this.created = true;
    });
  }

  putBlockNow(blobName: string, blockId: string, body: Buffer): void {
    this.mustExist();
    const blocks = this.uncommitted.get(blobName) ?? new Map<string, Buffer>();
    blocks.set(blockId, Buffer.from(body));
    this.uncommitted.set(blobName, blocks);
  }

  putBlock(blobName: string, blockId: string, body: Buffer): Promise<void> {
    return this.call('putBlock', () => this.putBlockNow(blobName, blockId, body));
  }

  commitBlocks(blobName: string, blockIds: string[], contentType: string): Promise<boolean> {
    return this.call('commit', () => {
      this.mustExist();
      // As Azure's "Latest": the uncommitted block if there is one, else the committed one.
      const fresh = this.uncommitted.get(blobName);
      const old = this.committed.get(blobName)?.blocks;
      const parts = blockIds.map((id) => fresh?.get(id) ?? old?.get(id));
      if (parts.some((p) => p === undefined)) return false;
      const blocks = new Map(blockIds.map((id, i) => [id, parts[i]!]));
      this.committed.set(blobName, { body: Buffer.concat(parts as Buffer[]), contentType, blocks });
      this.uncommitted.delete(blobName);
      return true;
    });
  }

  private blob(blobName: string): Blob {
    this.mustExist();
    const b = this.committed.get(blobName);
    if (!b) throw new MemoryRestError(404, 'BlobNotFound');
    return b;
  }

  setHeaders(blobName: string, headers: { contentType: string; contentEncoding?: string }): Promise<void> {
    return this.call('setHeaders', () => {
      const b = this.blob(blobName);
      b.contentType = headers.contentType;
      b.contentEncoding = headers.contentEncoding;
    });
  }

  readHead(blobName: string, bytes: number): Promise<{ head: Buffer; size: number } | undefined> {
    return this.call('sniff', () => {
      const b = this.blob(blobName);
      if (b.body.length === 0) return undefined;
      return { head: Buffer.from(b.body.subarray(0, bytes)), size: b.body.length };
    });
  }

  downloadNow(blobName: string): { body: Buffer; contentType?: string; contentEncoding?: string; append?: boolean } | undefined {
    this.mustExist();
    const b = this.committed.get(blobName);
    return b && { body: Buffer.from(b.body), contentType: b.contentType, contentEncoding: b.contentEncoding, append: b.append };
  }

  download(blobName: string): Promise<{ body: Buffer; contentType?: string; contentEncoding?: string } | undefined> {
    return this.call('download', () => {
      const b = this.downloadNow(blobName);
      return b && { body: b.body, contentType: b.contentType, contentEncoding: b.contentEncoding };
    });
  }

  delete(blobName: string): Promise<void> {
    return this.call('delete', () => {
      this.mustExist();
      this.committed.delete(blobName);
      this.uncommitted.delete(blobName);
    });
  }

  exists(blobName: string): Promise<boolean> {
    return this.call('exists', () => {
      this.mustExist();
      return this.committed.has(blobName);
    });
  }

  blockUploadUrl(blobName: string, blockId: string, expiresOn: Date): string {
    const sas = this.store.sign(`blob/${this.containerName}/${blobName}`, 'w', { expiresOn });
    return `${this.url(blobName)}?comp=block&blockid=${encodeURIComponent(blockId)}&${sas}`;
  }

  readUrl(blobName: string, expiresOn: Date): string {
    return `${this.url(blobName)}?${this.store.sign(`blob/${this.containerName}/${blobName}`, 'r', { expiresOn })}`;
  }

  upload(blobName: string, body: Buffer, contentType: string): Promise<void> {
    return this.call('upload', () => this.uploadNow(blobName, body, contentType));
  }

  uploadNow(blobName: string, body: Buffer, contentType?: string): void {
    this.mustExist();
    this.committed.set(blobName, { body: Buffer.from(body), contentType, blocks: new Map() });
    this.uncommitted.delete(blobName);
  }

  putUrl(blobName: string, expiresOn: Date): string {
    return `${this.url(blobName)}?${this.store.sign(`blob/${this.containerName}/${blobName}`, 'cw', { expiresOn })}`;
  }

  appendUrl(blobName: string, expiresOn: Date): string {
    return `${this.url(blobName)}?${this.store.sign(`blob/${this.containerName}/${blobName}`, 'a', { expiresOn })}`;
  }

  createAppend(blobName: string, contentType: string): Promise<void> {
    return this.call('createAppend', () => {
      this.mustExist();
      if (!this.committed.has(blobName)) this.createAppendNow(blobName, contentType);
    });
  }

  seal(blobName: string): Promise<void> {
    return this.call('seal', () => {
      this.mustExist();
      const b = this.committed.get(blobName);
      if (b) b.sealed = true;
    });
  }

  /** Creates an empty append blob (replacing any blob of that name, as Put Blob does). */
  createAppendNow(blobName: string, contentType?: string): void {
    this.mustExist();
    this.committed.set(blobName, { body: Buffer.alloc(0), contentType, blocks: new Map(), append: true });
    this.uncommitted.delete(blobName);
  }

  /**
   * Appends to an append blob: 'missing' if there is none (Azure: 404 or 409 InvalidBlobType),
   * 'sealed' if `seal` leased it (Azure: 412), 'blocks' at Azure's block limit (409),
   * 'position' if `position` is given and is not the blob's length (Azure: 412).
   */
  appendNow(blobName: string, body: Buffer, position?: number): 'ok' | 'missing' | 'sealed' | 'blocks' | 'position' {
    this.mustExist();
    const b = this.committed.get(blobName);
    if (!b?.append) return 'missing';
    if (b.sealed) return 'sealed';
    if ((b.appends ?? 0) >= APPEND_BLOB_MAX_BLOCKS) return 'blocks';
    if (position !== undefined && position !== b.body.length) return 'position';
    b.body = Buffer.concat([b.body, body]);
    b.appends = (b.appends ?? 0) + 1;
    return 'ok';
  }

  readRange(blobName: string, offset: number, count: number): Promise<{ body: Buffer; size: number } | undefined> {
    return this.call('readRange', () => {
      this.mustExist();
      const b = this.committed.get(blobName);
      return b && { body: Buffer.from(b.body.subarray(offset, offset + count)), size: b.body.length };
    });
  }

  copyIfAbsent(from: string, to: string): Promise<{ size: number; copied: boolean } | undefined> {
    return this.call('copy', () => {
      this.mustExist();
      const existing = this.committed.get(to);
      if (existing) return { size: existing.body.length, copied: false };
      const b = this.committed.get(from);
      if (!b) return undefined;
      this.committed.set(to, { body: Buffer.from(b.body), contentType: b.contentType, contentEncoding: b.contentEncoding, blocks: new Map() });
      this.uncommitted.delete(to);
      return { size: b.body.length, copied: true };
    });
  }

  private url(blobName: string): string {
    return `${this.store.blobEndpoint}/${this.containerName}/${blobName.split('/').map(encodeURIComponent).join('/')}`;
  }
}

/** The path under which an app serves its in-memory stores' blob and queue endpoints (per account). */
export const MEMORY_STORAGE_PATH = '/memory-storage';

/**
 * The origin the local host serves the in-memory stores from: the app's own host and port under
 * the other loopback name, so that an artifact (an HTML page, say) never runs in the dashboard's
 * origin, where the signed-in user's credentials are (as Azure's blob endpoint is another origin).
 */
export function storageOriginFor(publicUrl: string): string {
  const u = new URL(publicUrl);
  u.hostname = u.hostname === 'localhost' ? '127.0.0.1' : 'localhost';
  return u.origin;
}
/** Azure's largest Append Block. */
export const APPEND_BLOCK_MAX_BYTES = 4 * 1024 * 1024;
/** Azure's limit of blocks in one append blob. */
export const APPEND_BLOB_MAX_BLOCKS = 50_000;
/**
 * The largest block or blob one request may put here. Azure takes up to 4,000 MiB a block; this
 * store keeps every byte in the process's memory, so it takes less, and says so as Azure would.
 */
export const MEMORY_UPLOAD_MAX_BYTES = 256 * 1024 * 1024;
/** Get Messages accepts a visibility timeout of up to 7 days. */
const GET_MESSAGES_MAX_VISIBILITY_S = 7 * 24 * 3600;
/** Where a store no host serves says it is (tests that call `fetch` themselves). */
const UNSERVED_ORIGIN = 'http://localhost';

/** An answer of `MemoryStorage.fetch`, shaped like the HTTP response Azure would give. */
export interface MemoryResponse {
  status: number;
  body: string | Buffer;
  headers: Record<string, string>;
}

const xml = new XMLBuilder({ ignoreAttributes: true, suppressEmptyNode: false });

export class MemoryStorage implements Storage {
  readonly kind = 'memory' as const;
  readonly meter: StorageMeter;
  /** The meter this account's calls go through (tallied under its account index). */
  private readonly counted: Meter;
  /** `<origin>/memory-storage/<account>`: the blob and queue endpoints are below it. */
  readonly endpoint: string;
  readonly queueEndpoint: string;
  readonly blobEndpoint: string;
  readonly artifacts: MemoryArtifacts;
  private readonly tables = new Map<string, MemoryTable>();
  private readonly queues = new Map<string, MemoryQueue>();
  /** The account key SAS are signed with: random per instance. */
  private readonly key = crypto.randomBytes(32);
  private etags = 0;
  readonly now: Clock;

  constructor(
    readonly prefix: string,
    opts: { now?: Clock; meter?: StorageMeter; account?: number; origin?: string } = {},
  ) {
    checkPrefix(prefix);
    this.endpoint = `${(opts.origin ?? UNSERVED_ORIGIN).replace(/\/+$/, '')}${MEMORY_STORAGE_PATH}/${opts.account ?? 0}`;
    this.queueEndpoint = `${this.endpoint}/queue`;
    this.blobEndpoint = `${this.endpoint}/blob`;
    this.now = opts.now ?? Date.now;
    this.meter = opts.meter ?? new StorageMeter();
    this.counted = this.meter.forAccount(opts.account ?? 0);
    this.artifacts = new MemoryArtifacts(`${prefix}-artifacts`, this.counted, this);
  }

  nextEtag(): string {
    return `W/"datetime'${new Date(this.now()).toISOString()}'-${++this.etags}"`;
  }

  table(name: TableName): Table {
    let t = this.tables.get(name);
    if (!t) {
      t = new MemoryTable(name, this.counted, this);
      this.tables.set(name, t);
    }
    return t;
  }

  private memoryQueue(fullName: string, label: string): MemoryQueue {
    let q = this.queues.get(fullName);
    if (!q) {
      q = new MemoryQueue(fullName, this.counted, label, this.now);
      this.queues.set(fullName, q);
    }
    return q;
  }

  queueNamed(fullName: string, label: string): Queue {
    return this.memoryQueue(fullName, label);
  }

  private readonly triggers = new Map<TriggerQueue, Queue>();
  trigger(name: TriggerQueue): Queue {
    let q = this.triggers.get(name);
    if (!q) {
      q = new ShardedTriggerQueue(triggerShardNames(this.prefix, name).map((full) => this.queueNamed(full, name)));
      this.triggers.set(name, q);
    }
    return q;
  }

  queueEndpointOf(): string {
    return this.queueEndpoint;
  }

  async ensureAll(): Promise<void> {
    await Promise.all([...TABLES, ...EVENT_TABLES].map((t) => this.table(t).create()));
    await Promise.all(TRIGGER_QUEUES.map((q) => this.trigger(q).create()));
    await this.artifacts.createContainer();
  }

  /** A SAS query string for `resource`, with Azure's fields (sp, st, se, spr, sig). */
  sign(resource: string, permissions: string, opts: { startsOn?: Date; expiresOn: Date; protocol?: SasProtocolChoice }): string {
    const st = opts.startsOn ? opts.startsOn.toISOString().replace(/\.\d{3}Z$/, 'Z') : '';
    const se = opts.expiresOn.toISOString().replace(/\.\d{3}Z$/, 'Z');
    const spr = opts.protocol ?? 'https,http';
    const sig = crypto.createHmac('sha256', this.key).update([resource, permissions, st, se, spr].join('\n')).digest('base64');
    const q = new URLSearchParams({ sv: '2025-01-05', sp: permissions, ...(st ? { st } : {}), se, spr, sig });
    return q.toString();
  }

  pollSas(queueName: string, opts: { startsOn: Date; expiresOn: Date; protocol: SasProtocolChoice }): string {
    return this.sign(`queue/${queueName}`, 'p', opts);
  }

  /**
   * The permissions a SAS grants on `resource` now over `protocol`, or Azure's error code when it
   * grants nothing: forged, for another resource, not yet valid or expired (AuthenticationFailed),
   * or https-only and used over http (AuthorizationProtocolMismatch).
   */
  private granted(resource: string, q: URLSearchParams, protocol: string): { sp: string } | { refused: string } {
    const sp = q.get('sp') ?? '';
    const st = q.get('st') ?? '';
    const se = q.get('se') ?? '';
    const spr = q.get('spr') ?? '';
    const expected = crypto.createHmac('sha256', this.key).update([resource, sp, st, se, spr].join('\n')).digest();
    const got = Buffer.from(q.get('sig') ?? '', 'base64');
    if (got.length !== expected.length || !crypto.timingSafeEqual(got, expected)) return { refused: 'AuthenticationFailed' };
    const now = this.now();
    if ((st && Date.parse(st) > now) || !(Date.parse(se) > now)) return { refused: 'AuthenticationFailed' };
    if (protocol === 'http:' && !spr.split(',').includes('http')) return { refused: 'AuthorizationProtocolMismatch' };
    return { sp };
  }

  /** Whether a request path is one of this store's endpoints (the host routes by it). */
  serves(pathname: string): boolean {
    return pathname.startsWith(`${new URL(this.endpoint).pathname}/`);
  }

  /**
   * What Azure would answer to a request on a SAS URL minted by this adapter: a worker's PUT of an
   * artifact block or blob, the create and appends of a live log, a GET (or HEAD) of an artifact, a
   * poll (GET messages) and a delete of a polled message. Anything the SAS does not allow is 403
   * with Azure's error code, in Azure's XML error shape; no storage call is counted (as the app's
   * meter does not see a worker's requests to Azure).
   */
  fetch(method: string, url: string, body: Buffer = Buffer.alloc(0), headers: Record<string, string> = {}): MemoryResponse {
    const p = this.prepare(method, url, headers);
    if ('answer' in p) return p.answer;
    return body.length > p.maxBody ? azureError(413, 'RequestBodyTooLarge') : p.run(body);
  }

  /**
   * A request up to its body: Azure's answer when the SAS, the path or the operation refuses it
   * already (so a host need not read a body that will be refused), else the most bytes the
   * operation takes and the operation itself.
   */
  prepare(method: string, url: string, headers: Record<string, string> = {}): Prepared {
    const u = new URL(url);
    const q = u.searchParams;
    if (!this.serves(u.pathname)) return answer(azureError(400, 'InvalidUri'));
    let path: string[];
    try {
      path = u.pathname
        .slice(new URL(this.endpoint).pathname.length + 1)
        .split('/')
        .map((s) => decodeURIComponent(s));
    } catch {
      return answer(azureError(400, 'InvalidUri'));
    }
    const [service, ...rest] = path;
    const authorized = (resource: string, needs: (sp: string) => boolean): MemoryResponse | undefined => {
      const g = this.granted(resource, q, u.protocol);
      if ('refused' in g) return azureError(403, g.refused);
      return needs(g.sp) ? undefined : azureError(403, 'AuthorizationPermissionMismatch');
    };
    const has =
      (...perms: string[]) =>
      (sp: string) =>
        perms.some((p) => sp.includes(p));
    if (service === 'blob') {
      const [container, ...names] = rest;
      const blobName = names.join('/');
      const resource = `blob/${container}/${blobName}`;
      const refusal = (needs: (sp: string) => boolean) =>
        container !== this.artifacts.containerName ? azureError(403, 'AuthenticationFailed') : authorized(resource, needs);
      const created = (): MemoryResponse => ({ status: 201, body: '', headers: {} });
      if (method === 'PUT' && q.get('comp') === 'block' && q.get('blockid')) {
        const no = refusal(has('w'));
        if (no) return answer(no);
        return takes(MEMORY_UPLOAD_MAX_BYTES, (body) => (this.artifacts.putBlockNow(blobName, q.get('blockid')!, body), created()));
      }
      if (method === 'PUT' && !q.get('comp') && headers['x-ms-blob-type'] === 'AppendBlob') {
        const no = refusal(has('c', 'w')) ?? this.overwrite(blobName, q);
        if (no) return answer(no);
        return takes(0, () => (this.artifacts.createAppendNow(blobName, headers['content-type'] ?? headers['x-ms-blob-content-type']), created()));
      }
      if (method === 'PUT' && q.get('comp') === 'appendblock') {
        const no = refusal(has('a', 'w'));
        if (no) return answer(no);
        const pos = headers['x-ms-blob-condition-appendpos'];
        return takes(APPEND_BLOCK_MAX_BYTES, (body) => {
          const r = this.artifacts.appendNow(blobName, body, pos === undefined ? undefined : Number(pos));
          if (r === 'position') return azureError(412, 'AppendPositionConditionNotMet');
          if (r === 'sealed') return azureError(412, 'LeaseIdMissing');
          if (r === 'blocks') return azureError(409, 'BlockCountExceedsLimit');
          return r === 'ok' ? created() : azureError(404, 'BlobNotFound');
        });
      }
      if (method === 'PUT' && !q.get('comp')) {
        // Put Blob needs its blob type, as on Azure (a block blob here).
        if (headers['x-ms-blob-type'] !== undefined && headers['x-ms-blob-type'] !== 'BlockBlob') return answer(azureError(400, 'InvalidHeaderValue'));
        const no = refusal(has('w')) ?? this.overwrite(blobName, q);
        if (no) return answer(no);
        return takes(
          MEMORY_UPLOAD_MAX_BYTES,
          (body) => (this.artifacts.uploadNow(blobName, body, headers['x-ms-blob-content-type'] ?? headers['content-type']), created()),
        );
      }
      if ((method === 'GET' || method === 'HEAD') && !q.get('comp')) {
        const no = refusal(has('r'));
        if (no) return answer(no);
        return takes(0, () => {
          const b = this.artifacts.downloadNow(blobName);
          if (!b) return azureError(404, 'BlobNotFound');
          const out: Record<string, string> = { 'x-ms-blob-type': b.append ? 'AppendBlob' : 'BlockBlob' };
          if (b.contentType) out['content-type'] = b.contentType;
          if (b.contentEncoding) out['content-encoding'] = b.contentEncoding;
          return { status: 200, body: b.body, headers: out };
        });
      }
      return answer(refusal(() => false) ?? azureError(403, 'AuthorizationPermissionMismatch'));
    }
    if (service === 'queue') {
      const [queueName, messages, messageId, ...extra] = rest;
      const queue = this.queues.get(queueName);
      if (messages !== 'messages' || extra.length || (method === 'DELETE' && !messageId) || (method === 'GET' && messageId))
        return answer(authorized(`queue/${queueName}`, () => false) ?? azureError(403, 'AuthorizationPermissionMismatch'));
      // Process (p) covers dequeue and delete; peek needs r, add a, update u.
      const needs = method === 'GET' ? (q.get('peekonly') === 'true' ? 'r' : 'p') : method === 'DELETE' ? 'p' : method === 'POST' ? 'a' : 'u';
      const no = authorized(`queue/${queueName}`, has(needs));
      if (no) return answer(no);
      if (!queue?.exists) return answer(azureError(404, 'QueueNotFound'));
      if (method === 'DELETE')
        return takes(0, () =>
          queue.deleteNow(messageId, q.get('popreceipt') ?? '') ? { status: 204, body: '', headers: {} } : azureError(404, 'MessageNotFound'),
        );
      if (method !== 'GET') return answer(azureError(403, 'AuthorizationPermissionMismatch'));
      const visibilityS = Number(q.get('visibilitytimeout') ?? 30);
      const count = Number(q.get('numofmessages') ?? 1);
      if (!Number.isInteger(visibilityS) || visibilityS < 1 || visibilityS > GET_MESSAGES_MAX_VISIBILITY_S)
        return answer(azureError(400, 'OutOfRangeQueryParameterValue'));
      if (!Number.isInteger(count) || count < 1 || count > MAX_DEQUEUE) return answer(azureError(400, 'OutOfRangeQueryParameterValue'));
      return takes(0, () => this.receiveXml(queue, count, visibilityS));
    }
    return answer(azureError(400, 'InvalidUri'));
  }

  /**
   * Azure's refusal of a Put Blob over an existing blob: a leased (sealed) one needs the lease id
   * (412), and a SAS with create but not write permission may not overwrite (403).
   */
  private overwrite(blobName: string, q: URLSearchParams): MemoryResponse | undefined {
    const b = this.artifacts.committed.get(blobName);
    if (!b) return undefined;
    if (b.sealed) return azureError(412, 'LeaseIdMissing');
    return (q.get('sp') ?? '').includes('w') ? undefined : azureError(403, 'UnauthorizedBlobOverwrite');
  }

  /** Get Messages' XML answer. */
  private receiveXml(queue: MemoryQueue, count: number, visibilityS: number): MemoryResponse {
    const got = queue.receiveNow(count, visibilityS);
    const doc = {
      QueueMessagesList: {
        QueueMessage: got.map((m) => ({
          MessageId: m.messageId,
          InsertionTime: m.insertedOn!.toUTCString(),
          ExpirationTime: new Date(9999, 11, 31).toUTCString(),
          PopReceipt: m.popReceipt,
          TimeNextVisible: new Date(this.now() + visibilityS * 1000).toUTCString(),
          DequeueCount: m.dequeueCount,
          MessageText: m.messageText,
        })),
      },
    };
    return { status: 200, body: `<?xml version="1.0" encoding="utf-8"?>${xml.build(doc)}`, headers: { 'content-type': 'application/xml' } };
  }
}

/** What `MemoryStorage.prepare` makes of a request before its body. */
export type Prepared = { answer: MemoryResponse } | { maxBody: number; run: (body: Buffer) => MemoryResponse };
const answer = (r: MemoryResponse): Prepared => ({ answer: r });
const takes = (maxBody: number, run: (body: Buffer) => MemoryResponse): Prepared => ({ maxBody, run });

/** An error answer as Azure Storage gives one: the code in `x-ms-error-code` and an XML body. */
function azureError(status: number, code: string): MemoryResponse {
  const body = `<?xml version="1.0" encoding="utf-8"?>${xml.build({ Error: { Code: code, Message: `${code} (in-memory storage)` } })}`;
  return { status, body, headers: { 'content-type': 'application/xml', 'x-ms-error-code': code } };
}

export function isMemoryStorage(s: Storage): s is MemoryStorage {
  return s.kind === 'memory';
}
