/**
 * The Azure adapter of the storage port (Azurite or a real account): the only code that imports
 * the Azure Storage SDKs, builds OData filters or mints SAS. Every call is counted by the meter
 * and has a deadline, so a storage account that stops answering fails a request fast instead of
 * holding it past the client's timeout.
 */
import { TableClient } from '@azure/data-tables';
import { QueueClient, QueueSASPermissions, QueueServiceClient, SASProtocol as QueueSasProtocol, generateQueueSASQueryParameters } from '@azure/storage-queue';
import type { StorageSharedKeyCredential as QueueKey } from '@azure/storage-queue';
import {
  BlobSASPermissions,
  BlobServiceClient,
  BlockBlobClient,
  ContainerClient,
  SASProtocol as BlobSasProtocol,
  generateBlobSASQueryParameters,
} from '@azure/storage-blob';
import type { StorageSharedKeyCredential as BlobKey } from '@azure/storage-blob';
import { Meter, StorageMeter } from './counter';
import { SDK_BACKOFF_MS, SDK_RETRIES } from '../config';
import { ShardedTriggerQueue, triggerShardNames } from './trigger-shards';
import { QueueMessageCalls } from './queue-messages';
import { failedIndexOf, TableTransactions } from './table-transactions';
import {
  ArtifactContainer,
  checkContinuation,
  checkPrefix,
  Condition,
  Entity,
  KeyRange,
  limitOf,
  MAX_DEQUEUE,
  MAX_TABLE_PAGE,
  MAX_VISIBILITY_S,
  Page,
  PropertyValue,
  Query,
  Queue,
  QueueMessage,
  SasProtocolChoice,
  Storage,
  StorageConflict,
  StorageTimeout,
  Table,
  TableAction,
  TableName,
  TABLES,
  EVENT_TABLES,
  TriggerQueue,
  TRIGGER_QUEUES,
} from './port';

/**
 * Deadline of one storage call (the SDK's retries included): far above a healthy call's tens of
 * milliseconds, and well under taskcluster-client's 30 s request timeout, so a hung storage
 * account turns into a quick 5xx that the client retries.
 */
export const STORAGE_CALL_TIMEOUT_MS = 10_000;
/**
 * Azure's own time limit for one attempt of a queue call (the `timeout` parameter; a message is at
 * most 64 KiB): past it Azure answers 500 OperationTimedOut and the SDK tries again inside the
 * deadline. The SDK's default, 30 s, is longer than the whole deadline. (The SDK has no client-side
 * limit per attempt: a connection lost on the way is bounded by the deadline alone.)
 */
const QUEUE_TRY_TIMEOUT_MS = 3_000;
/** The longest back-off between two attempts, so the SDK's retries fit in one deadline. */
const MAX_RETRY_DELAY_MS = 4 * SDK_BACKOFF_MS;
/**
 * The Queue and Blob SDKs' retry policy: the tables SDK's attempts and back-off (theirs wait 4 s
 * before a first retry, and a throttled call would outlast the deadline after two attempts).
 */
const STORAGE_RETRY = { maxTries: SDK_RETRIES + 1, retryDelayInMs: SDK_BACKOFF_MS, maxRetryDelayInMs: MAX_RETRY_DELAY_MS };
/**
 * SDK pipeline policies (core-rest-pipeline's and the storage SDKs' names) that run on every
 * request and do nothing here: no tracer or SDK logger is installed (the tracing policy would
 * still parse and sanitize each URL), storage answers neither with redirects nor compressed
 * bodies, no request has a form or multipart body, and the browser policy acts only in browsers.
 * Kept: user agent and client request id (Azure's own logs show them), proxy (an HTTPS_PROXY
 * still applies), serialization, signing and the one retry policy.
 */
export const IDLE_POLICIES = [
  'tracingPolicy',
  'logPolicy',
  'redirectPolicy',
  'decompressResponsePolicy',
  'formDataPolicy',
  'multipartPolicy',
  'storageBrowserPolicy',
] as const;

/** A core-rest-pipeline pipeline, as far as this adapter trims it. */
interface CorePipeline {
  removePolicy(options: { name: string }): unknown;
}

function dropIdlePolicies(pipeline: CorePipeline): void {
  for (const name of IDLE_POLICIES) pipeline.removePolicy({ name });
}

/**
 * The core-rest-pipeline pipeline of a Queue or Blob client. The storage SDKs build it once per
 * `Pipeline` object and every client derived from that service client (`getQueueClient`,
 * `getContainerClient`, `getBlockBlobClient`) shares it; they expose it only to subclasses.
 */
export function corePipelineOf(client: QueueServiceClient | BlobServiceClient): CorePipeline {
  return (client as unknown as { storageClientContext: { pipeline: CorePipeline } }).storageClientContext.pipeline;
}
/** Pending queue permissions of the poll URLs: process (dequeue and delete) only. */
const POLL_SAS_PERMISSIONS = 'p';

function statusOf(err: unknown): number | undefined {
  return (err as { statusCode?: number })?.statusCode;
}

/**
 * Runs `fn` with an abort signal that fires after STORAGE_CALL_TIMEOUT_MS (or when `outer` aborts),
 * and reports a timeout as StorageTimeout.
 */
export async function withDeadline<T>(op: string, fn: (signal: AbortSignal) => Promise<T>, outer?: AbortSignal, ms = STORAGE_CALL_TIMEOUT_MS): Promise<T> {
  // A timer cleared when the call ends: AbortSignal.timeout would still fire 10 s after every call
  // and build a DOMException each time (1 % of the service's CPU in a claimWork drain).
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), ms);
  timer.unref();
  const signal = outer ? AbortSignal.any([deadline.signal, outer]) : deadline.signal;
  try {
    return await fn(signal);
  } catch (err) {
    if (deadline.signal.aborted) throw new StorageTimeout(op, ms);
    throw limitOf(err);
  } finally {
    clearTimeout(timer);
  }
}

// ---- OData, from the port's typed queries ----

/** OData string literal. */
function lit(s: string): string {
  return `'${s.replace(/'/g, "''")}'`;
}

function value(v: PropertyValue): string {
  if (typeof v === 'string') return lit(v);
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (!Number.isFinite(v)) throw new Error(`query value ${v} is not a finite number`);
  return Number.isInteger(v) ? String(v) : `${v}`;
}

function keyClauses(name: 'PartitionKey' | 'RowKey', k: string | KeyRange | undefined): string[] {
  if (k === undefined) return [];
  if (typeof k === 'string') return [`${name} eq ${lit(k)}`];
  return (['gt', 'ge', 'lt', 'le'] as const).filter((op) => k[op] !== undefined).map((op) => `${name} ${op} ${lit(k[op]!)}`);
}

function condition(c: Condition): string {
  if ('or' in c) return `(${c.or.map(condition).join(' or ')})`;
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(c.prop)) throw new Error(`query property name '${c.prop}' is not valid`);
  return `${c.prop} ${c.op} ${value(c.value)}`;
}

/** The OData filter of a typed query (exported for tests of the translation). */
export function odataFilter(q: Query): string {
  return [...keyClauses('PartitionKey', q.partitionKey), ...keyClauses('RowKey', q.rowKey), ...(q.where ?? []).map(condition)].join(' and ');
}

// ---- tables ----

/** A refused transaction as the port reports it; Azure's message names the refused action. */
function conflictOf(err: unknown, table: string): unknown {
  const s = statusOf(err);
  const i = failedIndexOf(err);
  const which = i === undefined ? '' : ` (action ${i})`;
  if (s === 409) return new StorageConflict('exists', `${table}: entity exists${which}`);
  if (s === 412) return new StorageConflict('etag', `${table}: entity changed${which}`);
  if (s === 404) return new StorageConflict('missing', `${table}: entity gone${which}`);
  return err;
}

class AzureTable implements Table {
  private readonly transactions: TableTransactions;

  constructor(
    readonly name: string,
    private readonly client: TableClient,
    private readonly meter: Meter,
  ) {
    this.transactions = new TableTransactions(client);
  }

  /** `pk` and `entities` feed the meter's per-partition tally (when tracked: the bench's scale model). */
  private call<T>(op: string, fn: (signal: AbortSignal) => Promise<T>, outer?: AbortSignal, pk?: string, entities = 1): Promise<T> {
    const name = `${this.name}.${op}`;
    if (pk !== undefined) this.meter.touch?.(`table ${this.name} ${pk}`, entities);
    return this.meter.run(name, () => withDeadline(name, fn, outer));
  }

  async create(): Promise<void> {
    await this.call('create', async (abortSignal) => {
      try {
        await this.client.createTable({ abortSignal });
      } catch (err) {
        // TableAlreadyExists is fine; TableBeingDeleted (Azure keeps a deleted table's name for
        // about 40 s) is not: the table is going away, so start-up fails and is retried.
        if (statusOf(err) !== 409 || (err as { code?: string }).code === 'TableBeingDeleted') throw err;
      }
    });
  }

  async get<T extends Entity = Entity>(pk: string, rk: string, opts: { abortSignal?: AbortSignal } = {}): Promise<(T & { etag: string }) | undefined> {
    return this.call(
      'get',
      async (abortSignal) => {
        try {
          const e = await this.client.getEntity(pk, rk, { disableTypeConversion: false, abortSignal });
          return e as unknown as T & { etag: string };
        } catch (err) {
          if (statusOf(err) === 404) return undefined;
          throw err;
        }
      },
      opts.abortSignal,
      pk,
    );
  }

  async insert(entity: Entity): Promise<string> {
    return this.call(
      'insert',
      async (abortSignal) => {
        try {
          return (await this.client.createEntity(entity, { abortSignal })).etag!;
        } catch (err) {
          if (statusOf(err) === 409) throw new StorageConflict('exists', `${this.name}: entity exists`);
          throw err;
        }
      },
      undefined,
      entity.partitionKey,
    );
  }

  update(entity: Entity, etag: string): Promise<string> {
    return this.guardedUpdate('update', 'Replace', entity, etag);
  }

  merge(entity: Entity, etag: string): Promise<string> {
    return this.guardedUpdate('merge', 'Merge', entity, etag);
  }

  private async guardedUpdate(op: string, mode: 'Replace' | 'Merge', entity: Entity, etag: string): Promise<string> {
    return this.call(
      op,
      async (abortSignal) => {
        try {
          return (await this.client.updateEntity(entity, mode, { etag, abortSignal })).etag!;
        } catch (err) {
          const s = statusOf(err);
          if (s === 412) throw new StorageConflict('etag', `${this.name}: entity changed`);
          if (s === 404) throw new StorageConflict('missing', `${this.name}: entity gone`);
          throw err;
        }
      },
      undefined,
      entity.partitionKey,
    );
  }

  async upsert(entity: Entity): Promise<string> {
    return this.call(
      'upsert',
      async (abortSignal) => (await this.client.upsertEntity(entity, 'Replace', { abortSignal })).etag!,
      undefined,
      entity.partitionKey,
    );
  }

  async delete(pk: string, rk: string, etag = '*'): Promise<boolean> {
    return this.call(
      'delete',
      async (abortSignal) => {
        try {
          await this.client.deleteEntity(pk, rk, { etag, abortSignal });
          return true;
        } catch (err) {
          const s = statusOf(err);
          if (s === 404) return false;
          if (s === 412) throw new StorageConflict('etag', `${this.name}: entity changed`);
          throw err;
        }
      },
      undefined,
      pk,
    );
  }

  async transact(actions: TableAction[]): Promise<(string | undefined)[]> {
    return this.call(
      'transaction',
      async (abortSignal) => {
        try {
          return await this.transactions.submit(actions, abortSignal);
        } catch (err) {
          throw conflictOf(err, this.name);
        }
      },
      undefined,
      actions[0] ? (actions[0].op === 'delete' ? actions[0].partitionKey : actions[0].entity.partitionKey) : undefined,
      actions.length,
    );
  }

  async page<T extends Entity = Entity>(query: Query, limit: number, continuation?: string): Promise<Page<T & { etag: string }>> {
    const filter = odataFilter(query);
    checkContinuation(continuation);
    return this.call(
      'query',
      async (abortSignal) => {
        const iter = this.client
          .listEntities<T>({ queryOptions: { filter: filter || undefined, select: query.select }, abortSignal })
          .byPage({ maxPageSize: Math.min(limit, MAX_TABLE_PAGE), continuationToken: continuation });
        const next = await iter.next();
        if (next.done || !next.value) return { items: [] };
        const page = next.value as unknown as (T & { etag: string })[] & { continuationToken?: string };
        return { items: Array.from(page), continuation: page.continuationToken };
      },
      undefined,
      typeof query.partitionKey === 'string' ? query.partitionKey : '(range)',
    );
  }
}

// ---- queues ----

/**
 * A delete or update that found the message gone (404 MessageNotFound) or leased again by someone
 * else (400 PopReceiptMismatch, or a receipt Azurite cannot parse). Any other 400, such as a
 * visibility out of range, is a real refusal and is not taken for a stale receipt.
 */
function staleReceipt(err: unknown): boolean {
  const s = statusOf(err);
  return s === 404 || (s === 400 && (err as { code?: string }).code !== 'OutOfRangeQueryParameterValue');
}

class AzureQueue implements Queue {
  constructor(
    readonly name: string,
    private readonly client: QueueClient,
    private readonly meter: Meter,
    private readonly label: string,
    private readonly messages: QueueMessageCalls,
  ) {}

  private call<T>(op: string, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const name = `${this.label}.${op}`;
    this.meter.touch?.(`queue ${this.name}`, 1);
    return this.meter.run(name, () => withDeadline(name, fn));
  }

  async create(): Promise<void> {
    await this.call('create', async (abortSignal) => {
      try {
        await this.client.createIfNotExists({ abortSignal });
      } catch (err) {
        // QueueBeingDeleted: Azure keeps a deleted queue's name for about 30 s.
        if (statusOf(err) === 409) throw new StorageConflict('exists', `${this.name}: queue is being deleted`);
        throw err;
      }
    });
  }

  async deleteQueue(): Promise<void> {
    await this.call('deleteQueue', async (abortSignal) => {
      await this.client.deleteIfExists({ abortSignal });
    });
  }

  async put(body: unknown, opts: { visibilityS?: number; ttlS?: number } = {}): Promise<{ messageId: string; popReceipt: string }> {
    const text = Buffer.from(JSON.stringify(body)).toString('base64');
    const visibilityS = Math.max(0, Math.min(MAX_VISIBILITY_S, Math.floor(opts.visibilityS ?? 0)));
    const ttlS = opts.ttlS === undefined ? -1 : Math.max(1, Math.floor(opts.ttlS));
    return this.call('put', (abortSignal) => this.messages.put(this.client.url, text, visibilityS, ttlS, abortSignal));
  }

  async receive(count: number, visibilityS: number): Promise<QueueMessage[]> {
    return this.call('get', async (abortSignal) => {
      const r = await this.client.receiveMessages({
        numberOfMessages: Math.max(1, Math.min(MAX_DEQUEUE, count)),
        visibilityTimeout: Math.max(1, Math.min(MAX_VISIBILITY_S, Math.floor(visibilityS))),
        abortSignal,
      });
      return r.receivedMessageItems.map((m) => ({
        messageId: m.messageId,
        popReceipt: m.popReceipt,
        messageText: m.messageText,
        dequeueCount: m.dequeueCount,
        insertedOn: m.insertedOn,
      }));
    });
  }

  async delete(messageId: string, popReceipt: string): Promise<void> {
    await this.call('delete', async (abortSignal) => {
      try {
        await this.messages.delete(this.client.url, messageId, popReceipt, abortSignal);
      } catch (err) {
        if (staleReceipt(err)) return;
        throw err;
      }
    });
  }

  async release(messageId: string, popReceipt: string, visibilityS = 0): Promise<void> {
    await this.call('update', async (abortSignal) => {
      try {
        await this.client.updateMessage(messageId, popReceipt, undefined, Math.max(0, Math.min(MAX_VISIBILITY_S, Math.floor(visibilityS))), { abortSignal });
      } catch (err) {
        if (staleReceipt(err)) return;
        throw err;
      }
    });
  }

  async rearm(messageId: string, popReceipt: string, body: unknown, visibilityS: number): Promise<string | undefined> {
    const text = Buffer.from(JSON.stringify(body)).toString('base64');
    return this.call('update', async (abortSignal) => {
      try {
        const r = await this.client.updateMessage(messageId, popReceipt, text, Math.max(0, Math.min(MAX_VISIBILITY_S, Math.floor(visibilityS))), {
          abortSignal,
        });
        return r.popReceipt;
      } catch (err) {
        if (staleReceipt(err)) return undefined;
        throw err;
      }
    });
  }

  async peek(count: number): Promise<{ messageText: string }[]> {
    return this.call('peek', async (abortSignal) => {
      const r = await this.client.peekMessages({ numberOfMessages: Math.max(1, Math.min(MAX_DEQUEUE, count)), abortSignal });
      return r.peekedMessageItems.map((m) => ({ messageText: m.messageText }));
    });
  }

  async approximateCount(): Promise<number> {
    return this.call('properties', async (abortSignal) => {
      try {
        return (await this.client.getProperties({ abortSignal })).approximateMessagesCount ?? 0;
      } catch (err) {
        if (statusOf(err) === 404) return 0;
        throw err;
      }
    });
  }
}

// ---- blobs ----

async function readAll(stream: NodeJS.ReadableStream | undefined): Promise<Buffer> {
  if (!stream) return Buffer.alloc(0);
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(Buffer.isBuffer(c) ? c : Buffer.from(c as string));
  return Buffer.concat(chunks);
}

/** The shared-key credential SAS are signed with; a SAS or token connection cannot mint them. */
function sharedKeyOf<K>(client: { credential: unknown }, what: string): K {
  const c = client.credential as { accountName?: string; computeHMACSHA256?: unknown };
  if (!c?.accountName || typeof c.computeHMACSHA256 !== 'function') {
    throw new Error(`${what} SAS need an account-key connection string (AccountName and AccountKey)`);
  }
  return c as K;
}

/** A server-side copy that has not completed (still pending, or failed and removed): the caller retries. */
class CopyNotDone extends Error {
  readonly statusCode = 503;
  readonly code = 'CopyNotDone';
  constructor(blobName: string, status: string) {
    super(`copy to ${blobName} is ${status}; retry`);
    this.name = 'RestError';
  }
}

/** Copy Blob's source SAS: the copy within one account completes in well under this. */
const COPY_SOURCE_SAS_MS = 10 * 60 * 1000;
/** How often a copy still pending (a large blob) is checked. */
const COPY_POLL_MS = 500;

class AzureArtifacts implements ArtifactContainer {
  constructor(
    private readonly container: ContainerClient,
    private readonly meter: Meter,
  ) {}

  private call<T>(op: string, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const name = `artifacts.${op}`;
    return this.meter.run(name, () => withDeadline(name, fn));
  }

  private blob(blobName: string): BlockBlobClient {
    return this.container.getBlockBlobClient(blobName);
  }

  async createContainer(): Promise<void> {
    await this.call('createContainer', async (abortSignal) => {
      await this.container.createIfNotExists({ abortSignal });
    });
  }

  async putBlock(blobName: string, blockId: string, body: Buffer): Promise<void> {
    await this.call('putBlock', async (abortSignal) => {
      await this.blob(blobName).stageBlock(blockId, body, body.length, { abortSignal });
    });
  }

  async commitBlocks(blobName: string, blockIds: string[], contentType: string): Promise<boolean> {
    return this.call('commit', async (abortSignal) => {
      try {
        await this.blob(blobName).commitBlockList(blockIds, { blobHTTPHeaders: { blobContentType: contentType }, abortSignal });
        return true;
      } catch (err) {
        const e = err as { statusCode?: number; code?: string };
        if (e.statusCode === 400 && e.code === 'InvalidBlockList') return false;
        throw err;
      }
    });
  }

  async setHeaders(blobName: string, headers: { contentType: string; contentEncoding?: string }): Promise<void> {
    await this.call('setHeaders', async (abortSignal) => {
      await this.blob(blobName).setHTTPHeaders({ blobContentType: headers.contentType, blobContentEncoding: headers.contentEncoding }, { abortSignal });
    });
  }

  async readHead(blobName: string, bytes: number): Promise<{ head: Buffer; size: number } | undefined> {
    return this.call('sniff', async (abortSignal) => {
      try {
        const r = await this.blob(blobName).download(0, bytes, { abortSignal });
        const head = await readAll(r.readableStreamBody);
        const size = Number(/\/(\d+)$/.exec(r.contentRange ?? '')?.[1] ?? r.contentLength ?? 0);
        return { head, size };
      } catch (err) {
        if (statusOf(err) === 416) return undefined; // an empty blob has no first byte
        throw err;
      }
    });
  }

  async download(blobName: string): Promise<{ body: Buffer; contentType?: string; contentEncoding?: string } | undefined> {
    return this.call('download', async (abortSignal) => {
      try {
        const r = await this.blob(blobName).download(0, undefined, { abortSignal });
        return { body: await readAll(r.readableStreamBody), contentType: r.contentType, contentEncoding: r.contentEncoding };
      } catch (err) {
        if (statusOf(err) === 404) return undefined;
        throw err;
      }
    });
  }

  async delete(blobName: string): Promise<void> {
    await this.call('delete', async (abortSignal) => {
      try {
        await this.blob(blobName).deleteIfExists({ abortSignal });
      } catch (err) {
        // 412: sealed (leased, see `seal`): end the lease at once, then delete.
        if (statusOf(err) !== 412) throw err;
        await this.blob(blobName).getBlobLeaseClient().breakLease(0, { abortSignal });
        await this.blob(blobName).deleteIfExists({ abortSignal });
      }
    });
  }

  async createAppend(blobName: string, contentType: string): Promise<void> {
    await this.call('createAppend', async (abortSignal) => {
      await this.container.getAppendBlobClient(blobName).createIfNotExists({ blobHTTPHeaders: { blobContentType: contentType }, abortSignal });
    });
  }

  async seal(blobName: string): Promise<void> {
    await this.call('seal', async (abortSignal) => {
      try {
        // A random lease id nobody else learns: an append (which needs the id while the lease lasts) is refused.
        await this.blob(blobName).getBlobLeaseClient().acquireLease(-1, { abortSignal });
      } catch (err) {
        // 404: never created; 409: leased already (an earlier seal).
        const status = statusOf(err);
        if (status !== 404 && status !== 409) throw err;
      }
    });
  }

  async exists(blobName: string): Promise<boolean> {
    return this.call('exists', (abortSignal) => this.blob(blobName).exists({ abortSignal }));
  }

  private sas(blobName: string, permissions: string, expiresOn: Date): string {
    // Azurite serves plain http; an https-only SAS would be refused there.
    const protocol = this.container.url.startsWith('https:') ? BlobSasProtocol.Https : BlobSasProtocol.HttpsAndHttp;
    return generateBlobSASQueryParameters(
      { containerName: this.container.containerName, blobName, permissions: BlobSASPermissions.parse(permissions), expiresOn, protocol },
      sharedKeyOf<BlobKey>(this.container, 'blob'),
    ).toString();
  }

  blockUploadUrl(blobName: string, blockId: string, expiresOn: Date): string {
    return `${this.blob(blobName).url}?comp=block&blockid=${encodeURIComponent(blockId)}&${this.sas(blobName, 'w', expiresOn)}`;
  }

  readUrl(blobName: string, expiresOn: Date): string {
    return `${this.blob(blobName).url}?${this.sas(blobName, 'r', expiresOn)}`;
  }

  async upload(blobName: string, body: Buffer, contentType: string): Promise<void> {
    await this.call('upload', async (abortSignal) => {
      await this.blob(blobName).upload(body, body.length, { blobHTTPHeaders: { blobContentType: contentType }, abortSignal });
    });
  }

  putUrl(blobName: string, expiresOn: Date): string {
    return `${this.blob(blobName).url}?${this.sas(blobName, 'cw', expiresOn)}`;
  }

  appendUrl(blobName: string, expiresOn: Date): string {
    // Add (Append Block) only: the app creates the blob, so no URL can create it again, empty or overwrite it.
    return `${this.blob(blobName).url}?${this.sas(blobName, 'a', expiresOn)}`;
  }

  async readRange(blobName: string, offset: number, count: number): Promise<{ body: Buffer; size: number } | undefined> {
    return this.call('readRange', async (abortSignal) => {
      try {
        const r = await this.blob(blobName).download(offset, count, { abortSignal });
        const body = await readAll(r.readableStreamBody);
        const size = Number(/\/(\d+)$/.exec(r.contentRange ?? '')?.[1] ?? offset + body.length);
        return { body, size };
      } catch (err) {
        const status = statusOf(err);
        if (status === 404) return undefined;
        // At or past the end (416): no bytes; the size is the offset's lower bound, so ask for it.
        if (status === 416) {
          const p = await this.blob(blobName).getProperties({ abortSignal });
          return { body: Buffer.alloc(0), size: p.contentLength ?? 0 };
        }
        throw err;
      }
    });
  }

  async copyIfAbsent(from: string, to: string): Promise<{ size: number; copied: boolean } | undefined> {
    return this.call('copy', async (abortSignal) => {
      // Copy Blob within one account: the source is read through a short read SAS.
      const source = this.readUrl(from, new Date(Date.now() + COPY_SOURCE_SAS_MS));
      let copied = true;
      try {
        const poller = await this.blob(to).beginCopyFromURL(source, { abortSignal, intervalInMs: COPY_POLL_MS, conditions: { ifNoneMatch: '*' } });
        await poller.pollUntilDone();
      } catch (err) {
        const status = statusOf(err);
        if (status === 409 || status === 412)
          copied = false; // `to` exists: the condition held it
        else if (status !== 404) throw err;
        else if (!(await this.blob(to).exists({ abortSignal }))) return undefined;
        else copied = false;
      }
      const p = await this.blob(to).getProperties({ abortSignal });
      // Azure may finish a copy asynchronously (Azurite never does): until it succeeded, the
      // target's bytes are not there. A failed or aborted copy is removed so the next one starts afresh.
      if (p.copyStatus === 'failed' || p.copyStatus === 'aborted') await this.blob(to).deleteIfExists({ abortSignal });
      if (p.copyStatus === 'pending' || p.copyStatus === 'failed' || p.copyStatus === 'aborted') throw new CopyNotDone(to, p.copyStatus);
      return { size: p.contentLength ?? 0, copied };
    });
  }
}

// ---- the adapter ----

export class AzureStorage implements Storage {
  readonly kind = 'azure' as const;
  readonly meter: StorageMeter;
  /** The meter this account's calls go through (tallied under its account index). */
  private readonly counted: Meter;
  readonly queueEndpoint: string;
  readonly artifacts: AzureArtifacts;
  private readonly tables = new Map<string, AzureTable>();
  private readonly queues = new Map<string, AzureQueue>();
  private readonly queueService: QueueServiceClient;
  private readonly messages: QueueMessageCalls;

  constructor(
    private readonly connectionString: string,
    readonly prefix: string,
    opts: { meter?: StorageMeter; account?: number } = {},
  ) {
    checkPrefix(prefix);
    this.meter = opts.meter ?? new StorageMeter();
    this.counted = this.meter.forAccount(opts.account ?? 0);
    // The SDKs read the connection string themselves (UseDevelopmentStorage=true included).
    this.queueService = QueueServiceClient.fromConnectionString(connectionString, { retryOptions: { ...STORAGE_RETRY, tryTimeoutInMs: QUEUE_TRY_TIMEOUT_MS } });
    dropIdlePolicies(corePipelineOf(this.queueService));
    this.messages = new QueueMessageCalls(this.queueService);
    this.queueEndpoint = this.queueService.url.replace(/\/+$/, '');
    // A blob call may move megabytes: Azure may take the whole deadline for one attempt.
    const blobService = BlobServiceClient.fromConnectionString(connectionString, {
      retryOptions: { ...STORAGE_RETRY, tryTimeoutInMs: STORAGE_CALL_TIMEOUT_MS },
    });
    dropIdlePolicies(corePipelineOf(blobService));
    this.artifacts = new AzureArtifacts(blobService.getContainerClient(`${prefix}-artifacts`), this.counted);
  }

  table(name: TableName): Table {
    let t = this.tables.get(name);
    if (!t) {
      const client = TableClient.fromConnectionString(this.connectionString, `${this.prefix}${name}`, {
        allowInsecureConnection: true,
        retryOptions: { maxRetries: SDK_RETRIES, retryDelayInMs: SDK_BACKOFF_MS, maxRetryDelayInMs: MAX_RETRY_DELAY_MS },
      });
      dropIdlePolicies(client.pipeline);
      t = new AzureTable(name, client, this.counted);
      this.tables.set(name, t);
    }
    return t;
  }

  queueNamed(fullName: string, label: string): Queue {
    let q = this.queues.get(fullName);
    if (!q) {
      q = new AzureQueue(fullName, this.queueService.getQueueClient(fullName), this.counted, label, this.messages);
      this.queues.set(fullName, q);
    }
    return q;
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

  pollSas(queueName: string, opts: { startsOn: Date; expiresOn: Date; protocol: SasProtocolChoice }): string {
    return generateQueueSASQueryParameters(
      {
        queueName,
        permissions: QueueSASPermissions.parse(POLL_SAS_PERMISSIONS),
        startsOn: opts.startsOn,
        expiresOn: opts.expiresOn,
        protocol: opts.protocol === 'https' ? QueueSasProtocol.Https : QueueSasProtocol.HttpsAndHttp,
      },
      sharedKeyOf<QueueKey>(this.queueService as unknown as { credential: unknown }, 'queue'),
    ).toString();
  }

  async ensureAll(): Promise<void> {
    await Promise.all([...TABLES, ...EVENT_TABLES].map((t) => this.table(t).create()));
    await Promise.all(TRIGGER_QUEUES.map((q) => this.trigger(q).create()));
    await this.artifacts.createContainer();
  }
}
