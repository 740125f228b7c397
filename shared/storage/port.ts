/**
 * The storage port: what domain code may ask of storage. Two adapters implement it, Azure
 * (`azure.ts`, Azurite or a real account) and in-memory (`memory.ts`), with the same semantics;
 * `test/integration/storage-port.test.ts` runs one contract suite against both. Queries and
 * entity-group transactions are plain data, so no OData or SDK type leaks out of `storage/`.
 * Every call is counted by the adapter's meter under the op names below (tests and the bench read them).
 */
import type { StorageMeter } from './counter';
import { badArgs } from '../errors';

export type Entity = Record<string, unknown> & { partitionKey: string; rowKey: string };
export type StoredEntity = Entity & { etag: string };

/** A storage write lost an optimistic-concurrency race or hit an existing key (Azure 409/412/404). */
export class StorageConflict extends Error {
  constructor(
    readonly reason: 'exists' | 'etag' | 'missing',
    message: string,
  ) {
    super(message);
    this.name = 'StorageConflict';
  }
}

/** A storage call that did not answer within its deadline; the HTTP layer answers 5xx, which clients retry. */
export class StorageTimeout extends Error {
  constructor(
    readonly op: string,
    readonly ms: number,
  ) {
    super(`storage call ${op} did not answer within ${ms} ms`);
    this.name = 'StorageTimeout';
  }
}

/**
 * A call refused by one of Azure's limits (entity or property too large, too many properties, a
 * key Azure does not accept, a message too large). `code` is Azure's error code. The HTTP layer
 * answers 413 InputTooLarge: the request asked to store more than Azure Storage holds.
 */
export class StorageLimit extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(`${message} (${code})`);
    this.name = 'StorageLimit';
  }
}

/** Azure's error codes of its limits (400 or 413), as both adapters report them. */
export const LIMIT_CODES = [
  'EntityTooLarge',
  'PropertyValueTooLarge',
  'TooManyProperties',
  'KeyValueTooLarge',
  'OutOfRangeInput',
  'RequestBodyTooLarge',
  'MessageTooLarge',
] as const;

/** The StorageLimit an SDK error stands for, or the error itself. */
export function limitOf(err: unknown): unknown {
  const code = (err as { code?: unknown })?.code;
  const status = (err as { statusCode?: unknown })?.statusCode;
  if ((status === 400 || status === 413) && typeof code === 'string' && (LIMIT_CODES as readonly string[]).includes(code)) {
    return new StorageLimit(code, (err as Error).message.split('\n')[0]);
  }
  return err;
}

/** An entity is at most 1 MiB (Azure's size accounting: see entityBytes). */
export const MAX_ENTITY_BYTES = 1024 * 1024;
/** At most 255 properties, PartitionKey, RowKey and Timestamp included: 252 of one's own. */
export const MAX_ENTITY_PROPERTIES = 252;
/** A string property holds at most 64 KiB (32 K UTF-16 code units); a binary one 64 KiB. */
export const MAX_PROPERTY_BYTES = 64 * 1024;
/** PartitionKey and RowKey are at most 1 KiB (1,024 characters). */
export const MAX_KEY_CHARS = 1024;
/** An entity-group transaction's payload is under 4 MiB. */
export const MAX_TRANSACTION_BYTES = 4 * 1024 * 1024;
/** A queue message is at most 64 KiB as sent (base64 text here). */
export const MAX_MESSAGE_BYTES = 64 * 1024;

/** A property's size as Azure counts it toward an entity's 1 MiB. */
function valueBytes(v: unknown): number {
  if (typeof v === 'string') return 4 + v.length * 2;
  if (v instanceof Uint8Array) return 4 + v.length;
  if (typeof v === 'boolean') return 1;
  return 8; // numbers (Int32 4, Int64/Double 8), dates
}

/** An entity's size as Azure counts it: 4 bytes, the keys in UTF-16, 8 bytes plus name plus value per property. */
export function entityBytes(pk: string, rk: string, props: Record<string, unknown>): number {
  let n = 4 + pk.length * 2 + rk.length * 2;
  for (const [k, v] of Object.entries(props)) n += 8 + k.length * 2 + valueBytes(v);
  return n;
}

/** Refuses, as Azure does, an entity past a limit (`props`: its own properties, no keys or metadata). */
export function checkEntity(pk: string, rk: string, props: Record<string, unknown>): void {
  for (const [name, key] of [
    ['PartitionKey', pk],
    ['RowKey', rk],
  ]) {
    if (key.length > MAX_KEY_CHARS) throw new StorageLimit('KeyValueTooLarge', `${name} is ${key.length} characters; at most ${MAX_KEY_CHARS}`);
    // eslint-disable-next-line no-control-regex
    if (/[/\\#?\u0000-\u001f\u007f-\u009f]/.test(key)) throw new StorageLimit('OutOfRangeInput', `${name} holds a character Azure does not accept in keys`);
  }
  const names = Object.keys(props);
  if (names.length > MAX_ENTITY_PROPERTIES) throw new StorageLimit('TooManyProperties', `${names.length} properties; at most ${MAX_ENTITY_PROPERTIES}`);
  for (const [k, v] of Object.entries(props)) {
    const bytes = typeof v === 'string' ? v.length * 2 : v instanceof Uint8Array ? v.length : 0;
    if (bytes > MAX_PROPERTY_BYTES) throw new StorageLimit('PropertyValueTooLarge', `property ${k} is ${bytes} bytes; at most ${MAX_PROPERTY_BYTES}`);
  }
  const size = entityBytes(pk, rk, props);
  if (size > MAX_ENTITY_BYTES) throw new StorageLimit('EntityTooLarge', `entity is ${size} bytes; at most ${MAX_ENTITY_BYTES}`);
}

/** Azure Table pages hold at most 1000 entities. */
export const MAX_TABLE_PAGE = 1000;
/** Entity-group transactions hold at most 100 operations, all in one partition. */
export const MAX_TRANSACTION_ACTIONS = 100;
/** Azure Queue Get Messages returns at most 32 messages. */
export const MAX_DEQUEUE = 32;
/** Azure Queue visibility timeouts are capped at 7 days. */
export const MAX_VISIBILITY_S = 7 * 24 * 3600 - 60;

// ---- tables ----

/** A key range; bounds compare as strings (ordinal), as Azure compares keys. */
export interface KeyRange {
  gt?: string;
  ge?: string;
  lt?: string;
  le?: string;
}

export type Comparison = 'eq' | 'ne' | 'gt' | 'ge' | 'lt' | 'le';
export type PropertyValue = string | number | boolean;

/**
 * A property test. As in Azure, a missing property or one of another type matches nothing (not even `ne`).
 * `{ or: [...] }` holds if any of its conditions does.
 */
export type Condition = { prop: string; op: Comparison; value: PropertyValue } | { or: Condition[] };

/** A table query: key equality or ranges, property conditions (all must hold), and a projection. */
export interface Query {
  partitionKey?: string | KeyRange;
  rowKey?: string | KeyRange;
  where?: Condition[];
  /** Property names to return (`RowKey`, `PartitionKey` or entity properties); all when absent. */
  select?: string[];
}

/** One action of an entity-group transaction. */
export type TableAction =
  | { op: 'create'; entity: Entity }
  | { op: 'upsert'; entity: Entity; mode?: 'Replace' | 'Merge' }
  | { op: 'update'; entity: Entity; etag: string; mode?: 'Replace' | 'Merge' }
  | { op: 'delete'; partitionKey: string; rowKey: string; etag?: string };

/**
 * Whether a continuation token (which callers hand back from clients) has the shape both adapters
 * give out: base64 of `{nextPartitionKey, nextRowKey?}` with string keys. Anything else is refused
 * before it reaches a table, as bad input.
 */
export function isTableContinuation(token: string): boolean {
  try {
    const v = JSON.parse(Buffer.from(token, 'base64').toString('utf8'));
    return (
      typeof v === 'object' &&
      v !== null &&
      !Array.isArray(v) &&
      typeof v.nextPartitionKey === 'string' &&
      v.nextPartitionKey !== '' &&
      (v.nextRowKey === undefined || typeof v.nextRowKey === 'string') &&
      Object.keys(v).every((k) => k === 'nextPartitionKey' || k === 'nextRowKey')
    );
  } catch {
    return false;
  }
}

/** A client's continuation token that no table gave out. */
export function checkContinuation(token: string | undefined): void {
  if (token !== undefined && !isTableContinuation(token)) throw badArgs('continuationToken is not valid');
}

export interface Page<T> {
  items: T[];
  continuation?: string;
}

export interface Table {
  readonly name: string;
  /** Creates the table if missing (`<name>.create`). */
  create(): Promise<void>;
  /** `<name>.get`; undefined when missing. */
  get<T extends Entity = Entity>(pk: string, rk: string, opts?: { abortSignal?: AbortSignal }): Promise<(T & { etag: string }) | undefined>;
  /** `<name>.insert`; StorageConflict('exists') if the key is taken. Returns the new ETag. */
  insert(entity: Entity): Promise<string>;
  /** `<name>.update`: replaces If-Match `etag`; StorageConflict('etag'|'missing'). */
  update(entity: Entity, etag: string): Promise<string>;
  /** `<name>.merge`: merges properties If-Match `etag` ('*': unconditionally, but the row must exist). */
  merge(entity: Entity, etag: string): Promise<string>;
  /** `<name>.upsert`: insert or replace. */
  upsert(entity: Entity): Promise<string>;
  /** `<name>.delete`: false when missing; with an etag, StorageConflict('etag') on mismatch. */
  delete(pk: string, rk: string, etag?: string): Promise<boolean>;
  /**
   * `<name>.transaction`: all actions or none (one partition, at most 100, each key once). Conflicts
   * as for the single calls ('exists', 'etag', 'missing', a delete of a missing row included).
   * Returns each action's new ETag (undefined for deletes).
   */
  transact(actions: TableAction[]): Promise<(string | undefined)[]>;
  /** `<name>.query`: one page in PartitionKey, RowKey order; `continuation` is opaque. */
  page<T extends Entity = Entity>(query: Query, limit: number, continuation?: string): Promise<Page<T & { etag: string }>>;
}

// ---- queues ----

export interface QueueMessage {
  messageId: string;
  popReceipt: string;
  messageText: string;
  dequeueCount: number;
  insertedOn?: Date;
}

export interface Queue {
  /** The full queue name. */
  readonly name: string;
  /** `<label>.create`, idempotent; StorageConflict('exists') while Azure still deletes a queue of that name. */
  create(): Promise<void>;
  /** `<label>.deleteQueue`: the queue and its messages; a missing queue is fine. */
  deleteQueue(): Promise<void>;
  /** `<label>.put`: a JSON message (base64 text, as workers polling the queue expect). */
  put(body: unknown, opts?: { visibilityS?: number; ttlS?: number }): Promise<{ messageId: string; popReceipt: string }>;
  /** `<label>.get`: up to `count` (≤32) visible messages, each leased for `visibilityS`. */
  receive(count: number, visibilityS: number): Promise<QueueMessage[]>;
  /** `<label>.delete`: one already gone (or re-leased by someone else) is ignored. */
  delete(messageId: string, popReceipt: string): Promise<void>;
  /** `<label>.update`: makes a leased message visible again after `visibilityS`; a stale receipt is ignored. */
  release(messageId: string, popReceipt: string, visibilityS?: number): Promise<void>;
  /**
   * `<label>.update`: replaces a message's body and shows it after `visibilityS`; its new pop
   * receipt (the old one stops working), or undefined for a stale receipt.
   */
  rearm(messageId: string, popReceipt: string, body: unknown, visibilityS: number): Promise<string | undefined>;
  /** `<label>.properties`: approximate number of messages (0 if the queue is missing). */
  approximateCount(): Promise<number>;
  /** `<label>.peek`: up to `count` (≤32) visible messages from the front, without leasing them. */
  peek(count: number): Promise<{ messageText: string }[]>;
}

export function decodeMessage<T>(m: QueueMessage): T | undefined {
  try {
    return JSON.parse(Buffer.from(m.messageText, 'base64').toString('utf8')) as T;
  } catch {
    return undefined;
  }
}

// ---- artifact blobs ----

export type SasProtocolChoice = 'https' | 'https,http';

/** The artifact container's operations (every one counted as `artifacts.<op>`). */
export interface ArtifactContainer {
  /** `artifacts.putBlock`: stages one uncommitted block (what a worker's PUT to the upload URL does). */
  putBlock(blobName: string, blockId: string, body: Buffer): Promise<void>;
  /** `artifacts.commit`: commits the block list with a content type; false if a block was never uploaded. */
  commitBlocks(blobName: string, blockIds: string[], contentType: string): Promise<boolean>;
  /** `artifacts.setHeaders`. */
  setHeaders(blobName: string, headers: { contentType: string; contentEncoding?: string }): Promise<void>;
  /** `artifacts.sniff`: the first `bytes` bytes and the total size of a committed blob (undefined if it is empty). */
  readHead(blobName: string, bytes: number): Promise<{ head: Buffer; size: number } | undefined>;
  /** `artifacts.download`: the whole committed blob, with its headers (undefined if missing). */
  download(blobName: string): Promise<{ body: Buffer; contentType?: string; contentEncoding?: string } | undefined>;
  /** `artifacts.delete`: the blob and its uncommitted blocks; a missing blob is fine. */
  delete(blobName: string): Promise<void>;
  /** `artifacts.exists`: whether a committed blob exists. */
  exists(blobName: string): Promise<boolean>;
  /** A write-only URL for one plain PUT of block `blockId` (no storage call). */
  blockUploadUrl(blobName: string, blockId: string, expiresOn: Date): string;
  /** A read-only URL for the committed blob (no storage call). */
  readUrl(blobName: string, expiresOn: Date): string;
  /** `artifacts.upload`: the whole blob in one call (small data sent inline to the Object API). */
  upload(blobName: string, body: Buffer, contentType: string): Promise<void>;
  /** A create/write URL for one PUT of the whole blob (`x-ms-blob-type: BlockBlob`; no storage call). */
  putUrl(blobName: string, expiresOn: Date): string;
  /** A URL to append to an append blob (PUT `?comp=appendblock`), and nothing else: no create, no overwrite (no storage call). */
  appendUrl(blobName: string, expiresOn: Date): string;
  /** `artifacts.createAppend`: an empty append blob, unless the blob exists already (then nothing changes). */
  createAppend(blobName: string, contentType: string): Promise<void>;
  /**
   * `artifacts.seal`: no URL can append to the blob any more (an infinite lease the app never
   * shares); reads and the app's `delete` still work. A missing or already sealed blob is fine.
   */
  seal(blobName: string): Promise<void>;
  /** `artifacts.readRange`: up to `count` bytes from `offset` and the blob's size; undefined if missing, no bytes at or past its end. */
  readRange(blobName: string, offset: number, count: number): Promise<{ body: Buffer; size: number } | undefined>;
  /**
   * `artifacts.copy`: a server-side copy of committed blob `from` (bytes and content type) to `to`
   * unless `to` exists already (then nothing is copied). The size `to` has afterwards and whether
   * this call copied it; undefined if neither blob exists.
   */
  copyIfAbsent(from: string, to: string): Promise<{ size: number; copied: boolean } | undefined>;
}

/**
 * The SAS of a pending queue's poll URLs: process permission only (dequeue and delete: no peek,
 * add or update, nothing outside this queue), valid from `startsOn` to `expiresOn`.
 */
export interface QueuePollSas {
  /** The queue service endpoint (of the first account), without a trailing '/'. */
  readonly queueEndpoint: string;
  /** The endpoint of the account that holds `queueName` (several accounts: see accounts.ts). */
  queueEndpointOf(queueName: string): string;
  /** The SAS query string (no storage call). */
  pollSas(queueName: string, opts: { startsOn: Date; expiresOn: Date; protocol: SasProtocolChoice }): string;
}

// ---- the port ----

/** Logical table names; each is prefixed per deployment. */
export const TABLES = [
  'Tasks',
  'TaskDeps',
  'TaskQueues',
  'Workers',
  'Artifacts',
  'Clients',
  'Roles',
  'Indexes',
  'Expiry',
  'Objects',
  'ConcurrencyKeys',
  'IndexTasks',
  'IndexNamespaces',
  'Hooks',
  'HookFires',
  // Per-minute tallies for the dashboard's charts (shared/ops/rollups.ts).
  'Rollups',
  // Which data accounts a deployment has had, in order (shared/storage/accounts.ts).
  'Accounts',
  // The Secrets service's values, encrypted (shared/secrets/secrets.ts).
  'Secrets',
  // Who changed clients, roles and secrets, append-only (shared/audit/history.ts).
  'AuditHistory',
] as const;
/** Event subscriptions (shared/events/subscriptions.ts). */
export const EVENT_TABLES = ['Subscriptions'] as const;
export type TableName = (typeof TABLES)[number] | (typeof EVENT_TABLES)[number];

/** Fixed trigger queues (pending queues are per task queue and priority; `events`: sweeps of undelivered events). */
export const TRIGGER_QUEUES = ['deadline', 'claim', 'resolved', 'events'] as const;
export type TriggerQueue = (typeof TRIGGER_QUEUES)[number];
/**
 * Storage queues per trigger queue and account, placed by a hash of the taskId (trigger-shards.ts):
 * one queue carries about 2,000 messages/s and a lifecycle puts up to about 2.3 into the busiest.
 */
export const TRIGGER_SHARDS = 4;

export interface Storage extends QueuePollSas {
  readonly kind: 'azure' | 'memory';
  readonly meter: StorageMeter;
  readonly prefix: string;
  table(name: TableName): Table;
  /** A queue by its full name; `label` names it in the transaction counts. */
  queueNamed(fullName: string, label: string): Queue;
  trigger(name: TriggerQueue): Queue;
  readonly artifacts: ArtifactContainer;
  /** Creates every table, trigger queue and the artifact container (idempotent; run at start-up). */
  ensureAll(): Promise<void>;
}

/** Storage prefixes name tables and queues, so they are short lowercase alphanumerics. */
export function checkPrefix(prefix: string): void {
  if (!/^[a-z][a-z0-9]{0,19}$/.test(prefix)) throw new Error(`storage prefix '${prefix}' must be 1-20 lowercase letters/digits, starting with a letter`);
}

// ---- reading and writing through the port ----

/**
 * How many storage pages a one-page reader (an API list that hands the continuation to its
 * client) reads to fill its answer: Azure may end any page early (after 5 s, at a partition
 * boundary), even with no rows, and a client should get a full page when there are rows, but one
 * request should not spin through a whole scan of a large table.
 */
export const MAX_PAGE_READS = 8;

export interface RowsOptions {
  /** Rows asked of each page (at most `MAX_TABLE_PAGE`, the default). */
  pageSize?: number;
  /** Stops after this many rows. */
  max?: number;
  /** Where an earlier read stopped. */
  continuation?: string;
}

/**
 * Every row a query matches, page by page to the end. An empty page that carries a continuation
 * is not the end (Azure answers one when a query runs out of its time slice or crosses a
 * partition), so this is the only way domain code should read more than one page.
 */
export async function* rows<T extends Entity = Entity>(table: Table, query: Query, opts: RowsOptions = {}): AsyncGenerator<T & { etag: string }> {
  const pageSize = Math.max(1, Math.min(opts.pageSize ?? MAX_TABLE_PAGE, MAX_TABLE_PAGE));
  let left = opts.max ?? Infinity;
  let continuation = opts.continuation;
  while (left > 0) {
    const page = await table.page<T>(query, Math.min(pageSize, left), continuation);
    for (const r of page.items.slice(0, left)) yield r;
    left -= page.items.length;
    continuation = page.continuation;
    if (!continuation) return;
  }
}

/**
 * `rows` in batches of `size` (the last may be shorter), gathered across short and empty pages: for
 * readers that act on a batch at a time (deletes by transaction, parallel work).
 */
export async function* rowBatches<T extends Entity = Entity>(
  table: Table,
  query: Query,
  size: number,
  opts: RowsOptions = {},
): AsyncGenerator<(T & { etag: string })[]> {
  let batch: (T & { etag: string })[] = [];
  for await (const r of rows<T>(table, query, { pageSize: size, ...opts })) {
    if (batch.push(r) < size) continue;
    yield batch;
    batch = [];
  }
  if (batch.length) yield batch;
}

/** `rows` gathered into an array (for reads bounded by `max` or known to be small). */
export async function allRows<T extends Entity = Entity>(table: Table, query: Query, opts: RowsOptions = {}): Promise<(T & { etag: string })[]> {
  const out: (T & { etag: string })[] = [];
  for await (const r of rows<T>(table, query, opts)) out.push(r);
  return out;
}

/** The first row a query matches, reading through empty pages (a page of one row may come back empty and continue). */
export async function firstRow<T extends Entity = Entity>(table: Table, query: Query): Promise<(T & { etag: string }) | undefined> {
  for await (const r of rows<T>(table, query, { pageSize: 1, max: 1 })) return r;
  return undefined;
}

/**
 * One page for a reader that hands the continuation on (an API list, a bounded pass): up to
 * `limit` rows, reading on through short and empty pages (up to `MAX_PAGE_READS` storage pages) so
 * the answer is full unless the rows ran out, as a client expects. Never answers "no continuation"
 * while rows remain: a page cut short still continues.
 */
export async function readPage<T extends Entity = Entity>(
  table: Table,
  query: Query,
  limit: number,
  continuation?: string,
): Promise<Page<T & { etag: string }>> {
  let page = await table.page<T>(query, limit, continuation);
  const items = page.items;
  for (let reads = 1; items.length < limit && page.continuation && reads < MAX_PAGE_READS; reads++) {
    page = await table.page<T>(query, limit - items.length, page.continuation);
    items.push(...page.items);
  }
  return { items, continuation: page.continuation };
}

/** Every page of a paged reader (one that hands back a continuation, as the API lists do), to the end. */
export async function* pagesOf<P extends { continuation?: string }>(read: (continuation?: string) => Promise<P>): AsyncGenerator<P> {
  let continuation: string | undefined;
  do {
    const page = await read(continuation);
    yield page;
    continuation = page.continuation;
  } while (continuation);
}

/** A write storage refused: the key was taken ('exists'), the row changed ('etag') or is gone ('missing'). */
export interface Refused {
  ok: false;
  reason: StorageConflict['reason'];
}

/** The outcome of a conditional write: done (with what it returned), or refused as Azure's 409/412/404. */
export type Outcome<T> = { ok: true; value: T } | Refused;
/** The outcome of a conditional write of one row: its new ETag, or why storage refused it. */
export type Written = { ok: true; etag: string } | Refused;

/** Whether a row's write was done; its new ETag then goes to `record` (a domain object that keeps its row's ETag). */
export function keptEtag(written: Written, record: { etag?: string }): boolean {
  if (written.ok) record.etag = written.etag;
  return written.ok;
}

/** Runs a conditional write; a StorageConflict becomes a refusal, any other failure still throws. */
export async function unlessConflict<T>(write: Promise<T>): Promise<Outcome<T>> {
  try {
    return { ok: true, value: await write };
  } catch (err) {
    if (err instanceof StorageConflict) return { ok: false, reason: err.reason };
    throw err;
  }
}

async function written(write: Promise<string>): Promise<Written> {
  const r = await unlessConflict(write);
  return r.ok ? { ok: true, etag: r.value } : r;
}

/** Inserts the row unless its key is taken (refused: 'exists'). */
export function insertIfAbsent(table: Table, entity: Entity): Promise<Written> {
  return written(table.insert(entity));
}

/** Replaces the row if it still has `etag` (refused: 'etag', or 'missing'). */
export function replaceIfMatch(table: Table, entity: Entity, etag: string): Promise<Written> {
  return written(table.update(entity, etag));
}

/** A read-then-write: inserts the row if it was missing when read (`etag` undefined), else replaces it if unchanged since. */
export function replaceIfUnchanged(table: Table, entity: Entity, etag: string | undefined): Promise<Written> {
  return etag === undefined ? insertIfAbsent(table, entity) : replaceIfMatch(table, entity, etag);
}

/** Merges properties into the row if it still has `etag` ('*': if it exists). */
export function mergeIfMatch(table: Table, entity: Entity, etag: string): Promise<Written> {
  return written(table.merge(entity, etag));
}

/** Deletes the row if it still has `etag`; the value is false when it was gone already. */
export async function deleteIfMatch(table: Table, pk: string, rk: string, etag: string): Promise<Outcome<boolean>> {
  return unlessConflict(table.delete(pk, rk, etag));
}

/** Runs the transaction unless one of its conditions fails (then none of it applied). */
export function transactIf(table: Table, actions: TableAction[]): Promise<Outcome<(string | undefined)[]>> {
  return unlessConflict(table.transact(actions));
}
