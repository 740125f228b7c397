/**
 * The only code that talks to Azure Storage. Tables, queues and the artifact container are reached
 * through small counted wrappers, so every storage transaction is metered in one place.
 */
import { TableClient, TableTransaction, TableTransactionResponse } from '@azure/data-tables';
import { QueueClient, QueueServiceClient, StorageSharedKeyCredential as QueueKey } from '@azure/storage-queue';
import { BlobServiceClient, ContainerClient } from '@azure/storage-blob';
import { StorageMeter } from './counter';

export type Entity = Record<string, unknown> & { partitionKey: string; rowKey: string };
export type StoredEntity = Entity & { etag: string };

/** A storage write lost an optimistic-concurrency race or hit an existing key. */
export class StorageConflict extends Error {
  constructor(
    readonly reason: 'exists' | 'etag' | 'missing',
    message: string,
  ) {
    super(message);
    this.name = 'StorageConflict';
  }
}

/** Azure Table pages hold at most 1000 entities. */
export const MAX_TABLE_PAGE = 1000;
/** Azure Queue Get Messages returns at most 32 messages. */
export const MAX_DEQUEUE = 32;
/** Azure Queue visibility timeouts are capped at 7 days. */
export const MAX_VISIBILITY_S = 7 * 24 * 3600 - 60;

function statusOf(err: unknown): number | undefined {
  return (err as { statusCode?: number })?.statusCode;
}

export interface ParsedConnection {
  accountName: string;
  accountKey: string;
  tableEndpoint: string;
  queueEndpoint: string;
  blobEndpoint: string;
}

/** Parses an account-key connection string (or UseDevelopmentStorage=true). */
export function parseConnectionString(cs: string): ParsedConnection {
  if (/^UseDevelopmentStorage=true/i.test(cs.trim())) {
    cs =
      'DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;' +
      'BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;TableEndpoint=http://127.0.0.1:10002/devstoreaccount1';
  }
  const parts = new Map<string, string>();
  for (const kv of cs.split(';')) {
    const i = kv.indexOf('=');
    if (i > 0) parts.set(kv.slice(0, i).trim().toLowerCase(), kv.slice(i + 1).trim());
  }
  const accountName = parts.get('accountname');
  const accountKey = parts.get('accountkey');
  if (!accountName || !accountKey) throw new Error('the storage connection string needs AccountName and AccountKey');
  const proto = parts.get('defaultendpointsprotocol') || 'https';
  const suffix = parts.get('endpointsuffix') || 'core.windows.net';
  const ep = (svc: string) => parts.get(`${svc}endpoint`) || `${proto}://${accountName}.${svc}.${suffix}`;
  return {
    accountName,
    accountKey,
    tableEndpoint: ep('table').replace(/\/+$/, ''),
    queueEndpoint: ep('queue').replace(/\/+$/, ''),
    blobEndpoint: ep('blob').replace(/\/+$/, ''),
  };
}

export interface Page<T> {
  items: T[];
  continuation?: string;
}

export class CountedTable {
  constructor(
    readonly name: string,
    private readonly client: TableClient,
    private readonly meter: StorageMeter,
  ) {}

  async create(): Promise<void> {
    await this.meter.run(`${this.name}.create`, async () => {
      try {
        await this.client.createTable();
      } catch (err) {
        if (statusOf(err) !== 409) throw err;
      }
    });
  }

  async get<T extends Entity = Entity>(pk: string, rk: string, opts: { abortSignal?: AbortSignal } = {}): Promise<(T & { etag: string }) | undefined> {
    return this.meter.run(`${this.name}.get`, async () => {
      try {
        const e = await this.client.getEntity(pk, rk, { disableTypeConversion: false, abortSignal: opts.abortSignal });
        return e as unknown as T & { etag: string };
      } catch (err) {
        if (statusOf(err) === 404) return undefined;
        throw err;
      }
    });
  }

  /** Inserts; throws StorageConflict('exists') if the key is taken. Returns the new ETag. */
  async insert(entity: Entity): Promise<string> {
    return this.meter.run(`${this.name}.insert`, async () => {
      try {
        const r = await this.client.createEntity(entity);
        return r.etag!;
      } catch (err) {
        if (statusOf(err) === 409) throw new StorageConflict('exists', `${this.name}: entity exists`);
        throw err;
      }
    });
  }

  /** Replaces the entity if its ETag still matches; throws StorageConflict('etag'|'missing'). */
  async update(entity: Entity, etag: string): Promise<string> {
    return this.guardedUpdate('update', 'Replace', entity, etag);
  }

  /** Merges properties into the entity if its ETag matches (or unconditionally with etag '*'). */
  async merge(entity: Entity, etag: string): Promise<string> {
    return this.guardedUpdate('merge', 'Merge', entity, etag);
  }

  private async guardedUpdate(op: string, mode: 'Replace' | 'Merge', entity: Entity, etag: string): Promise<string> {
    return this.meter.run(`${this.name}.${op}`, async () => {
      try {
        const r = await this.client.updateEntity(entity, mode, { etag });
        return r.etag!;
      } catch (err) {
        const s = statusOf(err);
        if (s === 412) throw new StorageConflict('etag', `${this.name}: entity changed`);
        if (s === 404) throw new StorageConflict('missing', `${this.name}: entity gone`);
        throw err;
      }
    });
  }

  async upsert(entity: Entity): Promise<string> {
    return this.meter.run(`${this.name}.upsert`, async () => {
      const r = await this.client.upsertEntity(entity, 'Replace');
      return r.etag!;
    });
  }

  /**
   * Deletes; a missing entity is fine (returns false). With an etag, throws StorageConflict('etag')
   * on mismatch.
   */
  async delete(pk: string, rk: string, etag = '*'): Promise<boolean> {
    return this.meter.run(`${this.name}.delete`, async () => {
      try {
        await this.client.deleteEntity(pk, rk, { etag });
        return true;
      } catch (err) {
        const s = statusOf(err);
        if (s === 404) return false;
        if (s === 412) throw new StorageConflict('etag', `${this.name}: entity changed`);
        throw err;
      }
    });
  }

  /** One entity-group transaction (same partition, ≤100 operations); billed as one transaction. */
  async transact(build: (tx: TableTransaction) => void): Promise<TableTransactionResponse> {
    const tx = new TableTransaction();
    build(tx);
    return this.meter.run(`${this.name}.transaction`, async () => {
      try {
        return await this.client.submitTransaction(tx.actions);
      } catch (err) {
        const s = statusOf(err);
        if (s === 409) throw new StorageConflict('exists', `${this.name}: entity exists`);
        if (s === 412) throw new StorageConflict('etag', `${this.name}: entity changed`);
        if (s === 404) throw new StorageConflict('missing', `${this.name}: entity gone`);
        throw err;
      }
    });
  }

  /** One page of a filtered query; `continuation` is opaque. */
  async page<T extends Entity = Entity>(filter: string, limit: number, continuation?: string, select?: string[]): Promise<Page<T & { etag: string }>> {
    return this.meter.run(`${this.name}.query`, async () => {
      const iter = this.client
        .listEntities<T>({ queryOptions: { filter, select } })
        .byPage({ maxPageSize: Math.min(limit, MAX_TABLE_PAGE), continuationToken: continuation });
      const next = await iter.next();
      if (next.done || !next.value) return { items: [] };
      const page = next.value as unknown as (T & { etag: string })[] & { continuationToken?: string };
      return { items: Array.from(page), continuation: page.continuationToken };
    });
  }
}

export interface QueueMessage {
  messageId: string;
  popReceipt: string;
  messageText: string;
  dequeueCount: number;
  insertedOn?: Date;
}

export class CountedQueue {
  constructor(
    readonly name: string,
    readonly client: QueueClient,
    private readonly meter: StorageMeter,
    private readonly label: string,
  ) {}

  async create(): Promise<void> {
    await this.meter.run(`${this.label}.create`, async () => {
      await this.client.createIfNotExists();
    });
  }

  /** Puts a JSON message (base64 text, as workers polling the queue expect). */
  async put(body: unknown, opts: { visibilityS?: number; ttlS?: number } = {}): Promise<{ messageId: string; popReceipt: string }> {
    const text = Buffer.from(JSON.stringify(body)).toString('base64');
    return this.meter.run(`${this.label}.put`, async () => {
      const r = await this.client.sendMessage(text, {
        visibilityTimeout: Math.max(0, Math.min(MAX_VISIBILITY_S, Math.floor(opts.visibilityS ?? 0))),
        messageTimeToLive: opts.ttlS === undefined ? -1 : Math.max(1, Math.floor(opts.ttlS)),
      });
      return { messageId: r.messageId, popReceipt: r.popReceipt };
    });
  }

  async receive(count: number, visibilityS: number): Promise<QueueMessage[]> {
    return this.meter.run(`${this.label}.get`, async () => {
      const r = await this.client.receiveMessages({
        numberOfMessages: Math.max(1, Math.min(MAX_DEQUEUE, count)),
        visibilityTimeout: Math.max(1, Math.floor(visibilityS)),
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

  /** Deletes a message; one already gone (or re-leased by someone else) is ignored. */
  async delete(messageId: string, popReceipt: string): Promise<void> {
    await this.meter.run(`${this.label}.delete`, async () => {
      try {
        await this.client.deleteMessage(messageId, popReceipt);
      } catch (err) {
        const s = statusOf(err);
        if (s === 404 || s === 400) return;
        throw err;
      }
    });
  }

  /** Makes a leased message visible again after `visibilityS`; returns the new pop receipt. */
  async release(messageId: string, popReceipt: string, visibilityS = 0): Promise<void> {
    await this.meter.run(`${this.label}.update`, async () => {
      try {
        await this.client.updateMessage(messageId, popReceipt, undefined, Math.max(0, Math.floor(visibilityS)));
      } catch (err) {
        const s = statusOf(err);
        if (s === 404 || s === 400) return;
        throw err;
      }
    });
  }

  async approximateCount(): Promise<number> {
    return this.meter.run(`${this.label}.properties`, async () => {
      try {
        const p = await this.client.getProperties();
        return p.approximateMessagesCount ?? 0;
      } catch (err) {
        if (statusOf(err) === 404) return 0;
        throw err;
      }
    });
  }
}

export function decodeMessage<T>(m: QueueMessage): T | undefined {
  try {
    return JSON.parse(Buffer.from(m.messageText, 'base64').toString('utf8')) as T;
  } catch {
    return undefined;
  }
}

/** Logical table names; each is prefixed per deployment. */
export const TABLES = [
  'Tasks',
  'TaskGroups',
  'TaskDeps',
  'TaskQueues',
  'Workers',
  'Artifacts',
  'Clients',
  'Roles',
  'Indexes',
  'Expiry',
  'IndexTasks',
  'IndexNamespaces',
  'Hooks',
  'HookFires',
] as const;
export type TableName = (typeof TABLES)[number];

/** Fixed trigger queues (pending queues are per task queue and priority). */
export const TRIGGER_QUEUES = ['deadline', 'claim', 'resolved'] as const;
export type TriggerQueue = (typeof TRIGGER_QUEUES)[number];

export class Storage {
  readonly meter = new StorageMeter();
  readonly conn: ParsedConnection;
  private readonly tables = new Map<string, CountedTable>();
  private readonly queues = new Map<string, CountedQueue>();
  readonly queueService: QueueServiceClient;
  readonly blobService: BlobServiceClient;
  readonly sharedKey: QueueKey;
  readonly artifacts: ContainerClient;

  constructor(
    connectionString: string,
    readonly prefix: string,
  ) {
    if (!/^[a-z][a-z0-9]{0,19}$/.test(prefix)) throw new Error(`storage prefix '${prefix}' must be 1-20 lowercase letters/digits, starting with a letter`);
    this.conn = parseConnectionString(connectionString);
    this.sharedKey = new QueueKey(this.conn.accountName, this.conn.accountKey);
    this.queueService = new QueueServiceClient(this.conn.queueEndpoint, this.sharedKey);
    this.blobService = new BlobServiceClient(this.conn.blobEndpoint, this.sharedKey as never);
    this.artifacts = this.blobService.getContainerClient(`${prefix}-artifacts`);
  }

  private tableConnString(): string {
    const c = this.conn;
    return `DefaultEndpointsProtocol=${c.tableEndpoint.startsWith('https') ? 'https' : 'http'};AccountName=${c.accountName};AccountKey=${c.accountKey};TableEndpoint=${c.tableEndpoint}`;
  }

  table(name: TableName): CountedTable {
    let t = this.tables.get(name);
    if (!t) {
      const full = `${this.prefix}${name}`;
      const client = TableClient.fromConnectionString(this.tableConnString(), full, { allowInsecureConnection: true });
      t = new CountedTable(name, client, this.meter);
      this.tables.set(name, t);
    }
    return t;
  }

  /** A queue by its full Azure name; `label` names it in the transaction counts. */
  queueNamed(fullName: string, label: string): CountedQueue {
    let q = this.queues.get(fullName);
    if (!q) {
      q = new CountedQueue(fullName, this.queueService.getQueueClient(fullName), this.meter, label);
      this.queues.set(fullName, q);
    }
    return q;
  }

  trigger(name: TriggerQueue): CountedQueue {
    return this.queueNamed(`${this.prefix}-${name}`, name);
  }

  /** Creates every table, trigger queue and the artifact container (idempotent; run at start-up). */
  async ensureAll(): Promise<void> {
    await Promise.all(TABLES.map((t) => this.table(t).create()));
    await Promise.all(TRIGGER_QUEUES.map((q) => this.trigger(q).create()));
    await this.meter.run('artifacts.createContainer', async () => {
      await this.artifacts.createIfNotExists();
    });
  }
}
