/**
 * The faithful storage mode: a wrapper around any adapter of the port that does, deterministically
 * from a seed, what real Azure Storage does and Azurite never does (docs/storage-faults.md cites
 * the Azure documentation for each):
 * - pages: a query answers a short page, an empty page with a continuation, and a continuation at
 *   every partition boundary of a cross-partition query (never more than the adapter's 1,000 rows);
 * - ambiguous writes: the write applies, then the caller's attempt fails (timeout, 500, 503) and the
 *   retry, as the SDK's retry policy sends it, meets its own success as 409/412/404; a repeated
 *   entity-group transaction the same, a repeated queue put duplicates the message;
 * - throttling: 503 ServerBusy before the call applies, retried with exponential back-off, surfaced
 *   only when the retries run out;
 * - lost receives: a queue receive leases messages (their visibility moves, their dequeue count
 *   grows) and its answer is lost; the retry receives other messages or none, and the lost ones
 *   reappear when their lease runs out.
 * Blob writes of the artifact container are faulted as table writes are (a retried commit or
 * upload meets its own success).
 * Azure's size and key limits are the in-memory adapter's own (memory.ts); clock skew is applied
 * to each app instance's clock (shared/services.ts).
 *
 * `QUEUE_STORAGE_FAULTS` turns it on (see parseFaults); docs/storage-faults.md says how to run it.
 */
import { Sweep, type StorageMeter } from './counter';
import { ShardedTriggerQueue, triggerShardNames } from './trigger-shards';
import type { FaultSettings } from '../config';

export type { FaultSettings } from '../config';
import type {
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
} from './port';

/** A small seeded generator (mulberry32): the same seed gives the same sequence. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** FNV-1a of a string: mixes an op label into a seed. */
function hashOf(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

/** This instance's clock offset from storage's: within ±skewMs, different per instance of a seed. */
export function clockSkewMs(f: FaultSettings): number {
  if (f.skewMs === 0) return 0;
  const rand = seeded(f.seed * 7919 + f.instance + 1);
  const u = rand() * 2 - 1;
  // Instance 0 and 1 run ahead and behind, so two-instance runs always see opposite offsets.
  const sign = f.instance % 2 === 0 ? 1 : -1;
  return Math.round(sign * Math.max(0.25, Math.abs(u)) * f.skewMs);
}

/** What Azure answers when it is throttling or timed out, shaped like the SDKs' RestError. */
export class TransientStorageError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    op: string,
  ) {
    super(`${op}: ${code} (${statusCode}) after the retries ran out`);
    this.name = 'RestError';
  }
}

/** The transient answers an ambiguous write gets: a client timeout, 500 OperationTimedOut, 503 ServerBusy. */
const AMBIGUOUS_ANSWERS = [
  [408, 'ClientTimeout'],
  [500, 'OperationTimedOut'],
  [503, 'ServerBusy'],
] as const;

export type Sleep = (ms: number) => Promise<void>;
const realSleep: Sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * The faults shared by one store's tables and queues: the seeded dice, the retry loop and, for the
 * ambiguity sweep (test/helpers/ambiguity.ts), an armed write that is answered ambiguously.
 */
export class FaultPlan {
  /** One stream for every call, until `reseed`. */
  private readonly stream: () => number;
  /** After `reseed`: a stream per op label, so one label's draws do not move another's. */
  private streams: Map<string, () => number> | undefined;
  /** Each fault taken, by kind (tests and the chaos run report them). */
  readonly taken = { pages: 0, ambiguous: 0, throttled: 0, surfaced: 0, lostReceives: 0 };
  /**
   * Calls the faults added, by op (`Tasks.update`): an attempt that applied and was sent again,
   * and a query page cut short (its reader reads on). A test counting an operation's own calls
   * subtracts them (test/helpers/ambiguity.ts).
   */
  readonly extra = new Map<string, number>();
  /** Messages stored twice by a queue put whose answer was lost, most recent last (at most RECENT). */
  readonly duplicated: { queue: string; body: unknown }[] = [];
  /** Messages leased by a receive whose answer was lost, until `expireLostLeases`. */
  private readonly lost: { queue: Queue; message: QueueMessage }[] = [];
  private armAt: number | undefined;
  /** Which writes the armed sweep counts: those of invocations started after it (see Sweep). */
  private sweep: Sweep | undefined;
  private writes = 0;
  /** The writes seen while armed (`Tasks.transaction`, …), for sweep diagnostics. */
  readonly armedOps: string[] = [];
  private losing: { label: string; left: number } | undefined;

  constructor(
    readonly settings: FaultSettings,
    private readonly sleep: Sleep = realSleep,
  ) {
    this.stream = seeded(settings.seed);
  }

  /**
   * Starts the draws over: from now on the k-th draw of op `op` (`Tasks.update`) is the same after
   * every re-seed, whatever calls of other ops came before or between. A crash sweep re-seeds before
   * each attempt so that every attempt meets the same faults (test/helpers/crash.ts). Without it
   * (`npm start`, the chaos run) all ops draw from one stream of the seed.
   */
  reseed(): void {
    this.streams = new Map();
  }

  private rand(op: string): number {
    if (!this.streams) return this.stream();
    let s = this.streams.get(op);
    if (!s) {
      s = seeded(this.settings.seed ^ hashOf(op));
      this.streams.set(op, s);
    }
    return s();
  }

  /** Whether a fault of probability `p` befalls this call of `op`. */
  roll(p: number, op: string): boolean {
    return p > 0 && this.rand(op) < p;
  }

  /** A whole number from 0 to n - 1, for a call of `op`. */
  pick(n: number, op: string): number {
    return Math.floor(this.rand(op) * n);
  }

  /** Make the n-th write from now (1-based) of invocations started from now (Sweep) apply and then answer ambiguously once. */
  ambiguousAt(n: number): void {
    this.armAt = n;
    this.sweep = new Sweep();
    this.writes = 0;
    this.armedOps.length = 0;
  }

  /** Stop the sweep; how many writes ran while armed. */
  disarm(): number {
    this.armAt = undefined;
    return this.writes;
  }

  /** The next `n` receives on queues labelled `label` (`pending`, `subscription`, …) that lease messages lose their answer. */
  loseReceives(label: string, n = 1): void {
    this.losing = { label, left: n };
  }

  /**
   * What the lost receives' leases running out does, without waiting for them: their messages
   * become visible again (unless their receipt no longer holds). Returns how many came back.
   */
  async expireLostLeases(): Promise<number> {
    const lost = this.lost.splice(0);
    for (const { queue, message } of lost) await queue.release(message.messageId, message.popReceipt, 0);
    return lost.length;
  }

  noteExtra(op: string): void {
    this.extra.set(op, (this.extra.get(op) ?? 0) + 1);
  }

  noteDuplicate(queue: string, body: unknown): void {
    this.duplicated.push({ queue, body });
    if (this.duplicated.length > RECENT) this.duplicated.shift();
  }

  private armedHit(op: string): boolean {
    if (this.armAt === undefined || !this.sweep?.counts()) return false;
    this.writes++;
    this.armedOps.push(op);
    if (this.writes !== this.armAt) return false;
    return true;
  }

  /** Whether this receive, which leased `got`, loses its answer. */
  private losesReceive(op: string, label: string, got: QueueMessage[], queue: Queue): boolean {
    if (got.length === 0) return false;
    const armed = this.losing?.label === label && this.losing.left > 0;
    if (armed) this.losing!.left--;
    if (!armed && !this.roll(this.settings.lostReceive, op)) return false;
    this.taken.lostReceives++;
    this.lost.push(...got.map((message) => ({ queue, message })));
    return true;
  }

  /**
   * One call as the SDK's retry policy runs it: a throttled attempt does not apply; an ambiguous
   * write applies and then fails; either is retried after a back-off until the retries run out.
   * Any other error (409, 412, 404, 400, an injected crash) ends the call at once, as in the SDKs.
   * `onRepeat` learns what an attempt that applied returned before it is sent again.
   */
  async call<T>(op: string, write: boolean, fn: () => Promise<T>, onRepeat?: (applied: T) => void): Promise<T> {
    return this.attempts(op, fn, () => write && (this.armedHit(op) || this.roll(this.settings.ambiguous, op)), onRepeat);
  }

  /** A queue receive as the SDK runs it: an answer lost after the lease took effect is received again. */
  receive(op: string, label: string, queue: Queue, fn: () => Promise<QueueMessage[]>): Promise<QueueMessage[]> {
    return this.attempts(op, fn, (got) => this.losesReceive(op, label, got, queue));
  }

  private async attempts<T>(op: string, fn: () => Promise<T>, lostAnswer: (result: T) => boolean, onRepeat?: (applied: T) => void): Promise<T> {
    const { retries, backoffMs } = this.settings;
    for (let attempt = 0; ; attempt++) {
      const last = attempt >= retries;
      if (this.roll(this.settings.throttle, op)) {
        this.taken.throttled++;
        if (last) {
          this.taken.surfaced++;
          throw new TransientStorageError(503, 'ServerBusy', op);
        }
      } else {
        const result = await fn();
        if (!lostAnswer(result)) return result;
        this.taken.ambiguous++;
        if (last) {
          this.taken.surfaced++;
          const [status, code] = AMBIGUOUS_ANSWERS[this.pick(AMBIGUOUS_ANSWERS.length, op)];
          throw new TransientStorageError(status, code, op);
        }
        this.noteExtra(op);
        onRepeat?.(result);
      }
      if (backoffMs > 0) await this.sleep(backoffMs * 2 ** attempt);
    }
  }
}

/** How many duplicated puts a plan remembers (tests read the recent ones; a long run must not grow). */
const RECENT = 1000;

type Keyed = Entity & { etag: string };

function token(pk: string, rk: string): string {
  return Buffer.from(JSON.stringify({ nextPartitionKey: pk, nextRowKey: rk })).toString('base64');
}

class FaultyTable implements Table {
  constructor(
    private readonly inner: Table,
    private readonly plan: FaultPlan,
  ) {}

  get name(): string {
    return this.inner.name;
  }

  private op(name: string): string {
    return `${this.inner.name}.${name}`;
  }

  create(): Promise<void> {
    return this.plan.call(this.op('create'), false, () => this.inner.create());
  }
  get<T extends Entity = Entity>(pk: string, rk: string, opts?: { abortSignal?: AbortSignal }): Promise<(T & { etag: string }) | undefined> {
    return this.plan.call(this.op('get'), false, () => this.inner.get<T>(pk, rk, opts));
  }
  insert(entity: Entity): Promise<string> {
    return this.plan.call(this.op('insert'), true, () => this.inner.insert(entity));
  }
  update(entity: Entity, etag: string): Promise<string> {
    return this.plan.call(this.op('update'), true, () => this.inner.update(entity, etag));
  }
  merge(entity: Entity, etag: string): Promise<string> {
    return this.plan.call(this.op('merge'), true, () => this.inner.merge(entity, etag));
  }
  upsert(entity: Entity): Promise<string> {
    return this.plan.call(this.op('upsert'), true, () => this.inner.upsert(entity));
  }
  delete(pk: string, rk: string, etag?: string): Promise<boolean> {
    // A retried delete that meets its own success gets 404, which the port reports as `false`.
    return this.plan.call(this.op('delete'), true, () => this.inner.delete(pk, rk, etag));
  }
  transact(actions: TableAction[]): Promise<(string | undefined)[]> {
    return this.plan.call(this.op('transaction'), true, () => this.inner.transact(actions));
  }

  /**
   * One page, cut as Azure may cut it: at the first partition boundary of a cross-partition query,
   * and (with probability `pages`) anywhere before its end, down to no rows at all. The
   * continuation then names the first row not returned, as Azure's does.
   */
  async page<T extends Entity = Entity>(query: Query, limit: number, continuation?: string): Promise<Page<T & { etag: string }>> {
    const select = query.select;
    const keyed = select ? { ...query, select: [...new Set([...select, 'PartitionKey', 'RowKey'])] } : query;
    const got = await this.plan.call(this.op('query'), false, () => this.inner.page<T>(keyed, limit, continuation));
    const items = got.items as unknown as Keyed[];
    let cut = items.length;
    if (typeof query.partitionKey !== 'string' && this.plan.settings.pages > 0) {
      const boundary = items.findIndex((e) => e.partitionKey !== items[0].partitionKey);
      if (boundary > 0) cut = boundary;
    }
    if (cut > 0 && this.plan.roll(this.plan.settings.pages, this.op('query'))) {
      this.plan.taken.pages++;
      // Half of the cut pages are empty, the rarest and most telling case.
      cut = this.plan.roll(0.5, this.op('query')) ? 0 : this.plan.pick(cut, this.op('query'));
    }
    if (cut < items.length) this.plan.noteExtra(this.op('query'));
    const kept = items.slice(0, cut).map((e) => strip(e, select));
    const next = cut < items.length ? token(items[cut].partitionKey, items[cut].rowKey) : got.continuation;
    return { items: kept as unknown as (T & { etag: string })[], continuation: next };
  }
}

/** Drops the keys a projection added only to place the continuation. */
function strip(e: Keyed, select: string[] | undefined): Record<string, unknown> {
  if (!select) return e;
  const out: Record<string, unknown> = { ...e };
  if (!select.includes('PartitionKey')) delete out.partitionKey;
  if (!select.includes('RowKey')) delete out.rowKey;
  return out;
}

class FaultyQueue implements Queue {
  constructor(
    private readonly inner: Queue,
    private readonly plan: FaultPlan,
    private readonly label: string,
  ) {}

  get name(): string {
    return this.inner.name;
  }

  private op(name: string): string {
    return `${this.label}.${name}`;
  }

  create(): Promise<void> {
    return this.plan.call(this.op('create'), false, () => this.inner.create());
  }
  deleteQueue(): Promise<void> {
    return this.plan.call(this.op('deleteQueue'), false, () => this.inner.deleteQueue());
  }
  /** A retried put that had applied leaves two copies of the message, as on Azure. */
  put(body: unknown, opts?: { visibilityS?: number; ttlS?: number }): Promise<{ messageId: string; popReceipt: string }> {
    return this.plan.call(
      this.op('put'),
      true,
      () => this.inner.put(body, opts),
      () => this.plan.noteDuplicate(this.inner.name, body),
    );
  }
  /** A receive whose answer is lost leaves its messages leased: they reappear when the lease runs out. */
  receive(count: number, visibilityS: number): Promise<QueueMessage[]> {
    return this.plan.receive(this.op('get'), this.label, this.inner, () => this.inner.receive(count, visibilityS));
  }
  delete(messageId: string, popReceipt: string): Promise<void> {
    return this.plan.call(this.op('delete'), true, () => this.inner.delete(messageId, popReceipt));
  }
  release(messageId: string, popReceipt: string, visibilityS?: number): Promise<void> {
    return this.plan.call(this.op('update'), true, () => this.inner.release(messageId, popReceipt, visibilityS));
  }
  /** A retried update that had applied holds a stale receipt: Azure answers 404, the port undefined. */
  rearm(messageId: string, popReceipt: string, body: unknown, visibilityS: number): Promise<string | undefined> {
    return this.plan.call(this.op('update'), true, () => this.inner.rearm(messageId, popReceipt, body, visibilityS));
  }
  approximateCount(): Promise<number> {
    return this.plan.call(this.op('properties'), false, () => this.inner.approximateCount());
  }
  peek(count: number): Promise<{ messageText: string }[]> {
    return this.plan.call(this.op('peek'), false, () => this.inner.peek(count));
  }
}

/**
 * The artifact container with Azure's faults: a blob write that applied and lost its answer is
 * sent again and meets its own success (a block staged again, a block list committed again from
 * the blocks now committed, headers set again, a copy that finds its target there).
 */
class FaultyArtifacts implements ArtifactContainer {
  constructor(
    private readonly inner: ArtifactContainer,
    private readonly plan: FaultPlan,
  ) {}

  private run<T>(op: string, write: boolean, fn: () => Promise<T>): Promise<T> {
    return this.plan.call(`artifacts.${op}`, write, fn);
  }

  putBlock(blobName: string, blockId: string, body: Buffer): Promise<void> {
    return this.run('putBlock', true, () => this.inner.putBlock(blobName, blockId, body));
  }
  commitBlocks(blobName: string, blockIds: string[], contentType: string): Promise<boolean> {
    return this.run('commit', true, () => this.inner.commitBlocks(blobName, blockIds, contentType));
  }
  setHeaders(blobName: string, headers: { contentType: string; contentEncoding?: string }): Promise<void> {
    return this.run('setHeaders', true, () => this.inner.setHeaders(blobName, headers));
  }
  readHead(blobName: string, bytes: number): Promise<{ head: Buffer; size: number } | undefined> {
    return this.run('sniff', false, () => this.inner.readHead(blobName, bytes));
  }
  download(blobName: string): Promise<{ body: Buffer; contentType?: string; contentEncoding?: string } | undefined> {
    return this.run('download', false, () => this.inner.download(blobName));
  }
  delete(blobName: string): Promise<void> {
    return this.run('delete', true, () => this.inner.delete(blobName));
  }
  exists(blobName: string): Promise<boolean> {
    return this.run('exists', false, () => this.inner.exists(blobName));
  }
  upload(blobName: string, body: Buffer, contentType: string): Promise<void> {
    return this.run('upload', true, () => this.inner.upload(blobName, body, contentType));
  }
  readRange(blobName: string, offset: number, count: number): Promise<{ body: Buffer; size: number } | undefined> {
    return this.run('readRange', false, () => this.inner.readRange(blobName, offset, count));
  }
  copyIfAbsent(from: string, to: string): Promise<{ size: number; copied: boolean } | undefined> {
    return this.run('copy', true, () => this.inner.copyIfAbsent(from, to));
  }
  blockUploadUrl(blobName: string, blockId: string, expiresOn: Date): string {
    return this.inner.blockUploadUrl(blobName, blockId, expiresOn);
  }
  readUrl(blobName: string, expiresOn: Date): string {
    return this.inner.readUrl(blobName, expiresOn);
  }
  putUrl(blobName: string, expiresOn: Date): string {
    return this.inner.putUrl(blobName, expiresOn);
  }
  createAppend(blobName: string, contentType: string): Promise<void> {
    return this.run('createAppend', true, () => this.inner.createAppend(blobName, contentType));
  }

  seal(blobName: string): Promise<void> {
    return this.run('seal', true, () => this.inner.seal(blobName));
  }

  appendUrl(blobName: string, expiresOn: Date): string {
    return this.inner.appendUrl(blobName, expiresOn);
  }
}

/** An adapter of the port with Azure's faults in front of `inner`. */
export class FaultyStorage implements Storage {
  readonly plan: FaultPlan;
  private readonly tables = new Map<string, Table>();
  private readonly queues = new Map<string, Queue>();
  private readonly triggers = new Map<TriggerQueue, Queue>();
  readonly artifacts: ArtifactContainer;

  constructor(
    readonly inner: Storage,
    settings: FaultSettings,
    opts: { sleep?: Sleep } = {},
  ) {
    this.plan = new FaultPlan(settings, opts.sleep);
    this.artifacts = new FaultyArtifacts(inner.artifacts, this.plan);
  }

  get kind(): Storage['kind'] {
    return this.inner.kind;
  }
  get meter(): StorageMeter {
    return this.inner.meter;
  }
  get prefix(): string {
    return this.inner.prefix;
  }
  get queueEndpoint(): string {
    return this.inner.queueEndpoint;
  }

  table(name: TableName): Table {
    let t = this.tables.get(name);
    if (!t) {
      t = new FaultyTable(this.inner.table(name), this.plan);
      this.tables.set(name, t);
    }
    return t;
  }

  queueNamed(fullName: string, label: string): Queue {
    let q = this.queues.get(fullName);
    if (!q) {
      q = new FaultyQueue(this.inner.queueNamed(fullName, label), this.plan, label);
      this.queues.set(fullName, q);
    }
    return q;
  }

  /** Sharded as the inner adapter shards it, each shard's calls faulted on their own (as each is its own call to Azure). */
  trigger(name: TriggerQueue): Queue {
    let q = this.triggers.get(name);
    if (!q) {
      q = new ShardedTriggerQueue(triggerShardNames(this.prefix, name).map((full) => this.queueNamed(full, name)));
      this.triggers.set(name, q);
    }
    return q;
  }

  queueEndpointOf(queueName: string): string {
    return this.inner.queueEndpointOf(queueName);
  }

  pollSas(queueName: string, opts: { startsOn: Date; expiresOn: Date; protocol: SasProtocolChoice }): string {
    return this.inner.pollSas(queueName, opts);
  }

  ensureAll(): Promise<void> {
    // Start-up creates tables and queues through the inner adapter: what is faulted is the traffic.
    return this.inner.ensureAll();
  }
}
