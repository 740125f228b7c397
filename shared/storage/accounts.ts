/**
 * Several data accounts behind one Storage. Domain code keeps seeing one port; this adapter routes
 * each call to one of several single-account adapters:
 *   - task data (Tasks, TaskDeps and Artifacts rows, artifact blobs, trigger messages) by a hash
 *     of the taskId, task groups by the group id (a group usually shares its first task's id, so
 *     it sits with it), pending queues by the task queue;
 *   - everything else (clients, roles, subscriptions, hooks, index, objects, read models, the
 *     expiry index) on the first account.
 * Placement is jump consistent hashing over the account list, so adding account n+1 sends it
 * about 1/(n+1) of new keys and leaves every other key where it was. The account lists the
 * deployment has had are recorded on the first account (table Accounts): a key whose placement
 * changed between those generations is found by probing its root row (the task row, the group
 * row) at its older placements, newest first, once per process (placements never change, so the
 * answer is cached). With one generation there are no probes at all.
 */
import crypto from 'node:crypto';
import { StorageMeter } from './counter';
import {
  ArtifactContainer,
  Entity,
  Page,
  Query,
  Queue,
  QueueMessage,
  SasProtocolChoice,
  Storage,
  Table,
  TableAction,
  TableName,
  TriggerQueue,
  firstRow,
} from './port';
import { UNCHANGED, guardedUpdate } from './guarded-update';
import { BoundedCache } from '../bounded-cache';

/** Where a partition lives: on the first account, or placed by a key's hash. */
export type Home = { kind: 'global' } | { kind: 'task' | 'queue'; key: string };
const GLOBAL: Home = { kind: 'global' };

/** A row that exists whenever a task or group does: probed to find one stored under an older account list. */
export type AccountRoot = { table: TableName; pk: string; rk: string };
/** The roots of a per-task partition (any of several rows, probed side by side). */
export interface AccountRoots {
  task(taskId: string): AccountRoot | AccountRoot[];
}

/** Partitions of the per-task tables (the rest are global). Artifacts' `~…` partitions are its shared expiry index. */
export function tableHome(name: TableName, pk: string): Home {
  switch (name) {
    case 'Tasks':
    case 'TaskDeps':
      return { kind: 'task', key: pk };
    case 'Artifacts':
      // `<taskId>-<runId>`: a runId has no '-'.
      return pk.startsWith('~') ? GLOBAL : { kind: 'task', key: pk.slice(0, pk.lastIndexOf('-')) };
    default:
      return GLOBAL;
  }
}

/**
 * Pending queues are `<prefix>-<26 base32 of the task queue>-<level>[-<shard>]`: all levels of a
 * task queue's shard sit together, and the shards of a busy task queue spread over the accounts.
 */
const PENDING_QUEUE = /^([a-z0-9]+-[a-z2-7]{26})-\d(-[1-9]\d*)?$/;
export function queueHome(fullName: string): Home {
  const m = PENDING_QUEUE.exec(fullName);
  return m ? { kind: 'queue', key: m[1] + (m[2] ?? '') } : GLOBAL;
}

/** Artifact blobs are `<taskId>/…`; Object API blobs (`o/`, `o.h/`) belong with the global Objects table. */
export function blobHome(blobName: string): Home {
  const first = blobName.slice(0, blobName.indexOf('/'));
  return first === '' || first === 'o' || first === 'o.h' || first === 'o.up' ? GLOBAL : { kind: 'task', key: first };
}

/** Jump consistent hash (Lamping and Veach 2014): a bucket in [0, buckets); growing `buckets` only moves keys to the new buckets. */
export function jumpHash(key: string, buckets: number): number {
  let k = crypto.createHash('sha256').update(key, 'utf8').digest().readBigUInt64BE(0);
  let b = -1;
  let j = 0;
  while (j < buckets) {
    b = j;
    k = (k * 2862933555777941757n + 1n) & 0xffffffffffffffffn;
    j = Math.floor((b + 1) * (2 ** 31 / (Number(k >> 33n) + 1)));
  }
  return b;
}

/** The accounts a key was placed on over the generations (account counts, oldest first), newest first, each once. */
export function placements(key: string, generations: number[]): number[] {
  const out: number[] = [];
  for (let g = generations.length - 1; g >= 0; g--) {
    const p = jumpHash(key, generations[g]);
    if (!out.includes(p)) out.push(p);
  }
  return out;
}

/** Without a configured deadline limit: Azure's longest message visibility, 7 days. */
const DEFAULT_HINT_LIFETIME_MS = 7 * 24 * 3600 * 1000;
/** Remembered placements of keys that have more than one candidate; bounded, oldest forgotten first. */
const FOUND_CACHE_MAX = 50_000;
const ACCOUNTS_PK = 'accounts';
const ACCOUNTS_RK = 'generations';

/** The account lists a deployment has had: how many accounts each generation used, and when it began (ISO). */
export interface Generations {
  counts: number[];
  added: string[];
}

/**
 * Reads (and extends) the account generations recorded on the first account. Accounts may only be
 * appended; a list that drops or reorders one would lose its data, so start-up stops instead.
 * A deployment that has data but no record began with one account (before this adapter existed).
 */
export async function recordGenerations(first: Storage, ids: string[], now: Date = new Date()): Promise<Generations> {
  let out: Generations | undefined;
  const write = (g: Generations) => {
    out = g;
    return { accounts: JSON.stringify(ids), generations: JSON.stringify(g.counts), added: JSON.stringify(g.added) };
  };
  await guardedUpdate(
    first.table('Accounts'),
    { partitionKey: ACCOUNTS_PK, rowKey: ACCOUNTS_RK },
    async (row) => {
      if (!row) {
        const hasData = !!(await firstRow(first.table('Tasks'), { select: ['PartitionKey'] }));
        return write(
          hasData && ids.length > 1
            ? { counts: [1, ids.length], added: [new Date(0).toJSON(), now.toJSON()] }
            : { counts: [ids.length], added: [now.toJSON()] },
        );
      }
      const stored = JSON.parse(row.accounts as string) as string[];
      const g: Generations = { counts: JSON.parse(row.generations as string) as number[], added: JSON.parse(row.added as string) as string[] };
      if (ids.length < stored.length || stored.some((id, i) => id !== ids[i])) {
        throw new Error(`data accounts can only be appended: storage records ${stored.join(' ')}, the settings list ${ids.join(' ')}`);
      }
      if (ids.length === stored.length) {
        out = g;
        return UNCHANGED;
      }
      return write({ counts: [...g.counts, ids.length], added: [...g.added, now.toJSON()] });
    },
    { what: 'the record of data accounts' },
  );
  return out!;
}

export class AccountsStorage implements Storage {
  readonly kind: Storage['kind'];
  readonly prefix: string;
  readonly queueEndpoint: string;
  readonly artifacts: ArtifactContainer;
  /** Account counts of each generation, oldest first; until ensureAll reads the record, all accounts from the start. */
  generations: number[];
  /** When each generation began. */
  private added: string[];
  private readonly found = new BoundedCache<string, number>(FOUND_CACHE_MAX);
  private readonly tables = new Map<string, Table>();
  private readonly triggers = new Map<string, Queue>();

  constructor(
    /** Single-account adapters, in the order the accounts were added; all count through one meter. */
    readonly accounts: Storage[],
    private readonly roots: AccountRoots,
    private readonly opts: {
      /** Stable identities of the accounts (their queue endpoints), for the record of generations. */
      ids?: string[];
      /**
       * How long after an account is added the pending queues of a task queue it took over are
       * still read at their old account: hints live until their task's deadline, so the longest
       * deadline allowed is enough.
       */
      hintLifetimeMs?: number;
      now?: () => Date;
    } = {},
  ) {
    if (accounts.length < 1) throw new Error('at least one storage account is needed');
    this.kind = accounts[0].kind;
    this.prefix = accounts[0].prefix;
    this.queueEndpoint = accounts[0].queueEndpoint;
    this.generations = [accounts.length];
    this.added = [new Date(0).toJSON()];
    this.artifacts = new RoutedArtifacts(this);
  }

  get meter(): StorageMeter {
    return this.accounts[0].meter;
  }

  /** The account new data of `key` goes to. */
  newest(key: string): number {
    return jumpHash(key, this.generations[this.generations.length - 1]);
  }

  /** The account of a home, without a storage call: a remembered or the newest placement. */
  placeNow(home: Home): number {
    if (home.kind === 'global') return 0;
    return this.found.get(`${home.kind}:${home.key}`) ?? this.newest(home.key);
  }

  /** The account of a home; probes older placements of a task or group the first time it is seen. */
  async place(home: Home): Promise<number> {
    if (home.kind === 'global') return 0;
    if (home.kind === 'queue') return this.newest(home.key);
    const places = placements(home.key, this.generations);
    if (places.length === 1) return places[0];
    const cacheKey = `${home.kind}:${home.key}`;
    const known = this.found.get(cacheKey);
    if (known !== undefined) return known;
    // Data written under an older account list stays where it was; new data goes to the newest placement.
    const roots = [this.roots.task(home.key)].flat();
    let at = places[0];
    for (const p of places.slice(1)) {
      const found = await Promise.all(roots.map((r) => this.accounts[p].table(r.table).get(r.pk, r.rk)));
      if (found.some(Boolean)) {
        at = p;
        break;
      }
    }
    this.found.set(cacheKey, at);
    return at;
  }

  table(name: TableName): Table {
    let t = this.tables.get(name);
    if (!t) {
      t = new RoutedTable(name, this);
      this.tables.set(name, t);
    }
    return t;
  }

  private now(): Date {
    return this.opts.now?.() ?? new Date();
  }

  /**
   * Accounts a task queue's pending queues live on, newest first: the newest placement, and older
   * ones while hints put there before an account was added may still be live.
   */
  queuePlaces(key: string): number[] {
    const out = [this.newest(key)];
    const lifetime = this.opts.hintLifetimeMs ?? DEFAULT_HINT_LIFETIME_MS;
    for (let g = this.generations.length - 2; g >= 0; g--) {
      if (this.now().getTime() - new Date(this.added[g + 1]).getTime() > lifetime) break;
      const p = jumpHash(key, this.generations[g]);
      if (!out.includes(p)) out.push(p);
    }
    return out;
  }

  queueNamed(fullName: string, label: string): Queue {
    const home = queueHome(fullName);
    if (home.kind !== 'queue') return this.accounts[0].queueNamed(fullName, label);
    const places = this.queuePlaces(home.key);
    if (places.length === 1) return this.accounts[places[0]].queueNamed(fullName, label);
    // Hints go to the newest placement; claimWork drains the older one too until its hints have expired.
    return new SpreadQueue(
      places.map((account) => ({ account, queue: this.accounts[account].queueNamed(fullName, label) })),
      () => places[0],
      places[0],
    );
  }

  trigger(name: TriggerQueue): Queue {
    let q = this.triggers.get(name);
    if (!q) {
      q = new SpreadQueue(
        this.accounts.map((a, account) => ({ account, queue: a.trigger(name) })),
        (body) => {
          const taskId = (body as { taskId?: unknown })?.taskId;
          return typeof taskId === 'string' ? this.newest(taskId) : 0;
        },
        0,
      );
      this.triggers.set(name, q);
    }
    return q;
  }

  queueEndpointOf(queueName: string): string {
    return this.accounts[this.placeNow(queueHome(queueName))].queueEndpoint;
  }

  pollSas(queueName: string, opts: { startsOn: Date; expiresOn: Date; protocol: SasProtocolChoice }): string {
    return this.accounts[this.placeNow(queueHome(queueName))].pollSas(queueName, opts);
  }

  async ensureAll(): Promise<void> {
    await Promise.all(this.accounts.map((a) => a.ensureAll()));
    const g = await recordGenerations(this.accounts[0], this.opts.ids ?? this.accounts.map((a, i) => `${a.queueEndpoint}#${i}`), this.now());
    this.generations = g.counts;
    this.added = g.added;
  }
}

class RoutedTable implements Table {
  readonly name: string;
  constructor(
    private readonly tableName: TableName,
    private readonly s: AccountsStorage,
  ) {
    this.name = s.accounts[0].table(tableName).name;
  }

  private async on(pk: string): Promise<Table> {
    return this.s.accounts[await this.s.place(tableHome(this.tableName, pk))].table(this.tableName);
  }

  async create(): Promise<void> {
    await Promise.all(this.s.accounts.map((a) => a.table(this.tableName).create()));
  }
  async get<T extends Entity = Entity>(pk: string, rk: string, opts?: { abortSignal?: AbortSignal }): Promise<(T & { etag: string }) | undefined> {
    return (await this.on(pk)).get<T>(pk, rk, opts);
  }
  async insert(entity: Entity): Promise<string> {
    return (await this.on(entity.partitionKey)).insert(entity);
  }
  async update(entity: Entity, etag: string): Promise<string> {
    return (await this.on(entity.partitionKey)).update(entity, etag);
  }
  async merge(entity: Entity, etag: string): Promise<string> {
    return (await this.on(entity.partitionKey)).merge(entity, etag);
  }
  async upsert(entity: Entity): Promise<string> {
    return (await this.on(entity.partitionKey)).upsert(entity);
  }
  async delete(pk: string, rk: string, etag?: string): Promise<boolean> {
    return (await this.on(pk)).delete(pk, rk, etag);
  }
  async transact(actions: TableAction[]): Promise<(string | undefined)[]> {
    if (actions.length === 0) return [];
    const a = actions[0];
    return (await this.on(a.op === 'delete' ? a.partitionKey : a.entity.partitionKey)).transact(actions);
  }
  async page<T extends Entity = Entity>(query: Query, limit: number, continuation?: string): Promise<Page<T & { etag: string }>> {
    const pk = query.partitionKey;
    if (typeof pk === 'string') return (await this.on(pk)).page<T>(query, limit, continuation);
    // A range of partitions: only global partitions are ever queried so (Artifacts' shared `~…` index included).
    const lower = pk?.ge ?? pk?.gt;
    const globalTable = tableHome(this.tableName, 'x-0').kind === 'global';
    if (!globalTable && (lower === undefined || tableHome(this.tableName, lower).kind !== 'global')) {
      throw new Error(`${this.name}: a query across partitions of a per-task table would span accounts`);
    }
    return this.s.accounts[0].table(this.tableName).page<T>(query, limit, continuation);
  }
}

/** A message id tagged with its account (`<id>@<n>`); ids of the `plain` account stay as Azure gave them. */
function tag(messageId: string, account: number, plain: number): string {
  return account === plain ? messageId : `${messageId}@${account}`;
}
function untag(messageId: string, plain: number): [number, string] {
  const m = /^(.*)@(\d+)$/.exec(messageId);
  return m ? [Number(m[2]), m[1]] : [plain, messageId];
}

/** A task queue's pending queue exists on a new account only once a hint was put there since it took over. */
function emptyIfMissing(err: unknown): never[] {
  if ((err as { statusCode?: number })?.statusCode === 404) return [];
  throw err;
}

/**
 * One queue on several accounts (a trigger queue on every account; a pending queue on its old and
 * new account): a message goes to the account `pick` names, receiving takes from all of them, and
 * the account rides in the message id so delete and release find it.
 */
class SpreadQueue implements Queue {
  readonly name: string;
  private readonly queues: Queue[];
  private readonly byAccount = new Map<number, Queue>();
  constructor(
    private readonly entries: { account: number; queue: Queue }[],
    private readonly pick: (body: unknown) => number,
    /**
     * The account whose message ids are not tagged: the first for trigger queues (refs stored before
     * this adapter), the newest for pending queues (ids workers read from poll URLs, e.g. `xmlMessage`).
     */
    private readonly plain: number,
  ) {
    this.name = entries[0].queue.name;
    this.queues = entries.map((e) => e.queue);
    for (const e of entries) this.byAccount.set(e.account, e.queue);
  }
  async create(): Promise<void> {
    await Promise.all(this.queues.map((q) => q.create()));
  }
  async deleteQueue(): Promise<void> {
    await Promise.all(this.queues.map((q) => q.deleteQueue()));
  }
  async put(body: unknown, opts?: { visibilityS?: number; ttlS?: number }): Promise<{ messageId: string; popReceipt: string }> {
    const account = this.pick(body);
    const r = await this.byAccount.get(account)!.put(body, opts);
    return { messageId: tag(r.messageId, account, this.plain), popReceipt: r.popReceipt };
  }
  async receive(count: number, visibilityS: number): Promise<QueueMessage[]> {
    const got = await Promise.all(this.queues.map((q) => q.receive(count, visibilityS).catch(emptyIfMissing)));
    return got.flatMap((msgs, i) => msgs.map((m) => ({ ...m, messageId: tag(m.messageId, this.entries[i].account, this.plain) })));
  }
  async delete(messageId: string, popReceipt: string): Promise<void> {
    const [account, id] = untag(messageId, this.plain);
    await this.byAccount.get(account)?.delete(id, popReceipt);
  }
  async release(messageId: string, popReceipt: string, visibilityS?: number): Promise<void> {
    const [account, id] = untag(messageId, this.plain);
    await this.byAccount.get(account)?.release(id, popReceipt, visibilityS);
  }
  async rearm(messageId: string, popReceipt: string, body: unknown, visibilityS: number): Promise<string | undefined> {
    const [account, id] = untag(messageId, this.plain);
    return this.byAccount.get(account)?.rearm(id, popReceipt, body, visibilityS);
  }
  async approximateCount(): Promise<number> {
    return (await Promise.all(this.queues.map((q) => q.approximateCount()))).reduce((a, b) => a + b, 0);
  }
  async peek(count: number): Promise<{ messageText: string }[]> {
    return (await Promise.all(this.queues.map((q) => q.peek(count).catch(emptyIfMissing)))).flat().slice(0, count);
  }
}

/** Artifact blobs follow their task; URLs are minted without a storage call, from the placement already known. */
class RoutedArtifacts implements ArtifactContainer {
  constructor(private readonly s: AccountsStorage) {}
  private async on(blobName: string): Promise<ArtifactContainer> {
    return this.s.accounts[await this.s.place(blobHome(blobName))].artifacts;
  }
  // The row of the artifact (or task) was read or written first in the same request, so its placement is known.
  private now(blobName: string): ArtifactContainer {
    return this.s.accounts[this.s.placeNow(blobHome(blobName))].artifacts;
  }
  async putBlock(blobName: string, blockId: string, body: Buffer): Promise<void> {
    return (await this.on(blobName)).putBlock(blobName, blockId, body);
  }
  async commitBlocks(blobName: string, blockIds: string[], contentType: string): Promise<boolean> {
    return (await this.on(blobName)).commitBlocks(blobName, blockIds, contentType);
  }
  async setHeaders(blobName: string, headers: { contentType: string; contentEncoding?: string }): Promise<void> {
    return (await this.on(blobName)).setHeaders(blobName, headers);
  }
  async readHead(blobName: string, bytes: number): Promise<{ head: Buffer; size: number } | undefined> {
    return (await this.on(blobName)).readHead(blobName, bytes);
  }
  async download(blobName: string): Promise<{ body: Buffer; contentType?: string; contentEncoding?: string } | undefined> {
    return (await this.on(blobName)).download(blobName);
  }
  async delete(blobName: string): Promise<void> {
    return (await this.on(blobName)).delete(blobName);
  }
  async exists(blobName: string): Promise<boolean> {
    return (await this.on(blobName)).exists(blobName);
  }
  blockUploadUrl(blobName: string, blockId: string, expiresOn: Date): string {
    return this.now(blobName).blockUploadUrl(blobName, blockId, expiresOn);
  }
  readUrl(blobName: string, expiresOn: Date): string {
    return this.now(blobName).readUrl(blobName, expiresOn);
  }
  async upload(blobName: string, body: Buffer, contentType: string): Promise<void> {
    return (await this.on(blobName)).upload(blobName, body, contentType);
  }
  putUrl(blobName: string, expiresOn: Date): string {
    return this.now(blobName).putUrl(blobName, expiresOn);
  }
  async createAppend(blobName: string, contentType: string): Promise<void> {
    return (await this.on(blobName)).createAppend(blobName, contentType);
  }
  async seal(blobName: string): Promise<void> {
    return (await this.on(blobName)).seal(blobName);
  }
  appendUrl(blobName: string, expiresOn: Date): string {
    return this.now(blobName).appendUrl(blobName, expiresOn);
  }
  async readRange(blobName: string, offset: number, count: number): Promise<{ body: Buffer; size: number } | undefined> {
    return (await this.on(blobName)).readRange(blobName, offset, count);
  }
  /** Object blobs only (staging to final): both live in the global account. */
  async copyIfAbsent(from: string, to: string): Promise<{ size: number; copied: boolean } | undefined> {
    const [a, b] = await Promise.all([this.on(from), this.on(to)]);
    if (a !== b) throw new Error(`copy across accounts is not supported (${from} -> ${to})`);
    return a.copyIfAbsent(from, to);
  }
}
