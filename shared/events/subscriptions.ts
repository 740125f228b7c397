/**
 * Event subscriptions: a set of bindings and an expiry, delivered into the subscription's own
 * Azure storage queue. The definitions live in one small table partition (there are few of them);
 * each instance caches the list briefly, so dispatching an event costs no read.
 */
import type { Storage } from '../storage/storage';
import { REMOVE, StorageConflict, UNCHANGED, allRows, guardedUpdate, readPage, replaceIfUnchanged, rows, type Decision } from '../storage/storage';
import { encodeKey } from '../storage/keys';
import { conflict, inputError, notFound } from '../errors';
import { isDeepStrictEqual } from 'node:util';
import * as slugid from 'slugid';
import { normalizeDate } from '../tasks/model';
import { Binding, bindingProblem } from './topic';
import { EXCHANGE_PREFIX } from './exchanges';
import { createSubscriptionQueue, deleteSubscriptionQueue } from '../storage/subscription-queues';
import type { ExpiryIndex } from '../tasks/expiry';

/** Active subscriptions one client may hold: one client cannot take what others need. */
export const MAX_SUBSCRIPTIONS_PER_CLIENT = 100;
/** Matching is linear in bindings; QueueEvents users bind a handful, a few dozen at most. */
export const MAX_BINDINGS = 64;
/** Subscription ids: like Taskcluster identifiers, a little longer. */
export const SUBSCRIPTION_ID = /^[a-zA-Z0-9_-]{1,64}$/;
/** How long an instance trusts its list; a new subscription reaches other instances within this. */
export const SUBSCRIPTION_CACHE_MS = 5_000;
/** A subscription older than a year is surely forgotten; its queue would fill up. */
const MAX_SUBSCRIPTION_MS = 366 * 24 * 3600 * 1000;

const PK = 'subscriptions';
export const EXPIRY_KIND = 'subscription';

/**
 * The system subscription: the queue the reaper's consumer step reads (index and hook bindings,
 * shared/reaper/consumers.ts). Its id is not a valid SUBSCRIPTION_ID, so the API can neither
 * create, show, list nor delete it; its queue is created with the trigger queues at start-up.
 */
export const SYSTEM_SUBSCRIPTION_ID = '~system-consumers';
/** The index consumer's binding: completions of tasks with an `index.` route. */
export const INDEX_BINDING: Binding = { exchange: `${EXCHANGE_PREFIX}task-completed`, routingKeyPattern: 'route.index.#' };
/** A system message nobody consumed within this long (the reaper stopped for a month) is dropped by Azure. */
const SYSTEM_MESSAGE_TTL_MS = 30 * 24 * 3600 * 1000;
/**
 * Hook bindings, one row per hook with bindings, in their own partition of this table: the same
 * query that reads the subscriptions reads them, so dispatching knows the system subscription's
 * bindings without another call. One row per hook (not one union row) keeps concurrent changes
 * of different hooks from undoing each other.
 */
const HOOK_BINDINGS_PK = 'hook-bindings';

export interface HookBindings {
  hookGroupId: string;
  hookId: string;
  bindings: Binding[];
}

const hookBindingsKey = (hookGroupId: string, hookId: string) => encodeKey(`${hookGroupId}/${hookId}`);

export interface Subscription {
  subscriptionId: string;
  bindings: Binding[];
  expires: string;
  /** The generation of this subscription's queue: random per creation, so URLs of a deleted one read nothing. */
  queueKey?: string;
  /** Who created it (counted against MAX_SUBSCRIPTIONS_PER_CLIENT). */
  clientId?: string;
  /** When it was created: a fan-out message handed off before then is not for it. */
  created?: string;
}

/** The id of a subscription's queue (shared/storage/subscription-queues.ts); `.` is in no subscription id or slugid, and a valid table key. */
export const queueIdOf = (s: { subscriptionId: string; queueKey?: string }) => (s.queueKey ? `${s.subscriptionId}.${s.queueKey}` : s.subscriptionId);

function decode(r: Record<string, unknown>): Subscription {
  return {
    subscriptionId: r.subscriptionId as string,
    bindings: JSON.parse(r.bindings as string),
    expires: r.expires as string,
    queueKey: (r.queueKey as string) ?? '',
    clientId: (r.clientId as string) ?? '',
    created: (r.created as string) ?? '',
  };
}

/** The definition as the API shows it. */
export const definitionOf = (s: Subscription) => ({ subscriptionId: s.subscriptionId, bindings: s.bindings, expires: s.expires });

/** Checks a createSubscription body; returns the normalized definition (400 on anything wrong). */
export function parseDefinition(subscriptionId: string, body: unknown, now: Date): Subscription {
  if (!SUBSCRIPTION_ID.test(subscriptionId)) throw inputError(`subscriptionId must match ${SUBSCRIPTION_ID.source}`);
  const b = body as { bindings?: unknown; expires?: unknown };
  if (!Array.isArray(b?.bindings) || b.bindings.length === 0) throw inputError('bindings must be a non-empty array of {exchange, routingKeyPattern}');
  if (b.bindings.length > MAX_BINDINGS) throw inputError(`a subscription has at most ${MAX_BINDINGS} bindings, got ${b.bindings.length}`);
  const bindings = b.bindings.map((x: Binding, i: number) => {
    const problem = bindingProblem(x);
    if (problem) throw inputError(`bindings[${i}]: ${problem}`);
    return { exchange: x.exchange, routingKeyPattern: x.routingKeyPattern };
  });
  if (typeof b.expires !== 'string') throw inputError('expires must be a date-time string');
  const expires = normalizeDate(b.expires, 'expires');
  if (new Date(expires) <= now) throw inputError('expires must be in the future');
  if (new Date(expires).getTime() > now.getTime() + MAX_SUBSCRIPTION_MS) throw inputError('expires may be at most one year ahead');
  return { subscriptionId, bindings, expires };
}

const bindingKey = (b: Binding) => `${b.exchange} ${b.routingKeyPattern}`;

/** `a` followed by those of `b` it lacks (no duplicates). */
export function unionBindings(a: Binding[], b: Binding[]): Binding[] {
  const seen = new Set(a.map(bindingKey));
  const out = [...a];
  for (const x of b) {
    if (seen.has(bindingKey(x))) continue;
    out.push(x);
    seen.add(bindingKey(x));
  }
  return out;
}

/** The subscriptions and hook bindings as one read saw them. */
interface Snapshot {
  at: number;
  list: Subscription[];
  hooks: HookBindings[];
}

export class Subscriptions {
  private cache?: Snapshot;
  /** The re-read under way: requests that find the list stale at once share it (one query, not one each). */
  private refreshing?: Promise<Snapshot>;

  constructor(
    private readonly storage: Storage,
    private readonly expiry: ExpiryIndex,
    private readonly now: () => Date,
    private readonly cacheMs = SUBSCRIPTION_CACHE_MS,
  ) {}

  private get table() {
    return this.storage.table('Subscriptions');
  }

  async get(subscriptionId: string): Promise<Subscription | undefined> {
    if (!SUBSCRIPTION_ID.test(subscriptionId)) return undefined;
    const r = await this.table.get(PK, encodeKey(subscriptionId));
    if (!r) return undefined;
    const s = decode(r);
    return new Date(s.expires) > this.now() ? s : undefined;
  }

  /**
   * Creates the subscription (idempotent for the same definition; 409 for a different one). The
   * queue and the expiry row exist before the definition, so a crash never leaves a subscription
   * events are sent to without a queue, or one the reaper would never remove.
   */
  async create(input: Subscription, clientId = '', attempt = 0): Promise<Subscription> {
    const raw = await this.table.get(PK, encodeKey(input.subscriptionId));
    const existing = raw && new Date(raw.expires as string) > this.now() ? decode(raw) : undefined;
    if (existing) {
      if (isDeepStrictEqual(existing.bindings, input.bindings) && existing.expires === input.expires) return existing;
      throw conflict(`subscription ${input.subscriptionId} exists with a different definition; delete it first or choose another id`);
    }
    const mine = (await this.list()).filter((s) => s.clientId === clientId);
    if (mine.length >= MAX_SUBSCRIPTIONS_PER_CLIENT)
      throw conflict(
        `client ${clientId || '(anonymous)'} has ${mine.length} subscriptions, the most one client may hold (${MAX_SUBSCRIPTIONS_PER_CLIENT}); delete unused ones`,
      );
    const def: Subscription = { ...definitionOf(input), queueKey: slugid.nice(), clientId, created: this.now().toJSON() };
    try {
      await createSubscriptionQueue(this.storage, queueIdOf(def));
    } catch (err) {
      // Azure keeps a deleted queue's name for about 30 s (QueueBeingDeleted).
      if (err instanceof StorageConflict)
        throw conflict(`subscription ${def.subscriptionId} was just deleted and its queue is still being removed; retry in a minute`);
      throw err;
    }
    // One expiry row per queue generation: a queue whose create crashed before its row is removed too.
    await this.expiry.record(EXPIRY_KIND, queueIdOf(def), def.expires);
    const row = { partitionKey: PK, rowKey: encodeKey(def.subscriptionId), ...def, bindings: JSON.stringify(def.bindings) };
    // An expired row of the same id that the reaper has not removed yet is replaced, guarded by its ETag.
    const written = await replaceIfUnchanged(this.table, row, raw?.etag);
    if (!written.ok) {
      // The write's retry may have met its own success (its answer was lost): the row names our queue.
      const stored = await this.table.get(PK, encodeKey(def.subscriptionId));
      if (stored && queueIdOf(decode(stored)) === queueIdOf(def)) {
        this.forget();
        return def;
      }
      // A concurrent create of the same id won: same definition is fine, another is a conflict.
      if (attempt === 0) {
        await deleteSubscriptionQueue(this.storage, queueIdOf(def));
        return this.create(input, clientId, 1);
      }
      throw conflict(`subscription ${def.subscriptionId} is being created concurrently; retry`);
    }
    this.forget();
    return def;
  }

  /** Deletes the definition (so events stop), then the queue. Deleting twice is fine. */
  async delete(subscriptionId: string): Promise<boolean> {
    if (!SUBSCRIPTION_ID.test(subscriptionId)) throw notFound(`subscription ${subscriptionId} not found`);
    const r = await this.table.get(PK, encodeKey(subscriptionId));
    if (!r) return false;
    const existed = await this.table.delete(PK, encodeKey(subscriptionId), r.etag);
    this.forget();
    await deleteSubscriptionQueue(this.storage, queueIdOf(decode(r)));
    return existed;
  }

  /**
   * Reaper: removes the queue `queueId` (`<subscriptionId>.<queueKey>`) and, if it is still the
   * subscription's and its expiry has passed, the subscription (one re-created, or renewed with a
   * later expiry, stays).
   */
  async expire(queueId: string): Promise<void> {
    const subscriptionId = queueId.split('.')[0];
    const r = await this.table.get(PK, encodeKey(subscriptionId));
    const current = r && queueIdOf(decode(r)) === queueId;
    if (current && new Date(r.expires as string) > this.now()) return;
    if (current) await this.table.delete(PK, encodeKey(subscriptionId), r.etag);
    this.forget();
    await deleteSubscriptionQueue(this.storage, queueId);
  }

  async page(limit: number, continuation?: string): Promise<{ items: Subscription[]; continuation?: string }> {
    const page = await readPage(this.table, { partitionKey: PK }, limit, continuation);
    const now = this.now();
    return { items: page.items.map(decode).filter((s) => new Date(s.expires) > now), continuation: page.continuation };
  }

  /** Every active subscription, uncached. */
  async list(): Promise<Subscription[]> {
    const now = this.now();
    return (await allRows(this.table, { partitionKey: PK })).map(decode).filter((s) => new Date(s.expires) > now);
  }

  /**
   * Re-reads the subscriptions and the hook bindings now, in one query of the whole (small) table
   * (tests use it to start from the same state every time).
   */
  async refresh(): Promise<Subscription[]> {
    return (await this.read()).list;
  }

  private async read(): Promise<Snapshot> {
    const at = Date.now();
    const list: Subscription[] = [];
    const hooks: HookBindings[] = [];
    for await (const r of rows(this.table, { partitionKey: { ge: '' } })) {
      if (r.partitionKey === PK) list.push(decode(r));
      else if (r.partitionKey === HOOK_BINDINGS_PK) hooks.push(decodeHookBindings(r));
    }
    this.cache = { at, list, hooks };
    return this.cache;
  }

  private fresh(): Promise<Snapshot> {
    const cached = this.cache;
    if (cached && Date.now() - cached.at <= this.cacheMs) return Promise.resolve(cached);
    const shared = (this.refreshing ??= this.read().finally(() => {
      if (this.refreshing === shared) this.refreshing = undefined;
    }));
    return shared;
  }

  /**
   * The active subscriptions as this instance last saw them (at most SUBSCRIPTION_CACHE_MS old),
   * the system subscription included (last).
   */
  async active(): Promise<Subscription[]> {
    const { list, hooks } = await this.fresh();
    const now = this.now();
    const bindings = hooks.reduce((acc, h) => unionBindings(acc, h.bindings), [INDEX_BINDING]);
    const system = { subscriptionId: SYSTEM_SUBSCRIPTION_ID, bindings, expires: new Date(now.getTime() + SYSTEM_MESSAGE_TTL_MS).toJSON() };
    return [...list.filter((s) => new Date(s.expires) > now), system];
  }

  /** The hooks whose bindings this instance last saw (at most SUBSCRIPTION_CACHE_MS old). */
  async hookBindings(): Promise<HookBindings[]> {
    return (await this.fresh()).hooks;
  }

  /** Forget the cached list (after a change this instance made). */
  invalidate(): void {
    this.forget();
  }

  /** A read under way may predate the change: later requests read again. */
  private forget(): void {
    this.cache = undefined;
    this.refreshing = undefined;
  }

  /**
   * Before a hook is written with `bindings`: the hook's row afterwards holds at least these (and
   * what it held), so a crash right after the hook write never leaves a binding undelivered.
   */
  async widenHookBindings(hookGroupId: string, hookId: string, bindings: Binding[]): Promise<void> {
    if (!bindings.length) return;
    const out = await this.updateHookBindings(hookGroupId, hookId, (cur) => {
      const next = unionBindings(cur ?? [], bindings);
      return cur && next.length === cur.length ? UNCHANGED : this.hookBindingsRow(hookGroupId, hookId, next);
    });
    if (out.written) this.invalidate();
  }

  /**
   * After a hook was written or removed: the row becomes exactly the hook's current bindings.
   * The row is read before the hook and written guarded by its ETag, so of concurrent syncs the
   * one that wins has read the latest hook (a stale one conflicts, re-reads both and decides again).
   */
  async syncHookBindings(hookGroupId: string, hookId: string, readHook: () => Promise<{ bindings: Binding[] } | undefined>): Promise<void> {
    const out = await this.updateHookBindings(hookGroupId, hookId, async (cur) => {
      const want = unionBindings([], (await readHook())?.bindings ?? []);
      if (!want.length) return REMOVE;
      return cur && isDeepStrictEqual(want, cur) ? UNCHANGED : this.hookBindingsRow(hookGroupId, hookId, want);
    });
    if (out.written) this.invalidate();
  }

  /** The hook's bindings row through guardedUpdate: `decide` sees its bindings (undefined: no row). */
  private updateHookBindings(hookGroupId: string, hookId: string, decide: (cur: Binding[] | undefined) => Decision | Promise<Decision>) {
    return guardedUpdate(
      this.table,
      { partitionKey: HOOK_BINDINGS_PK, rowKey: hookBindingsKey(hookGroupId, hookId) },
      (r) => decide(r && decodeHookBindings(r).bindings),
      {
        what: `hook bindings of ${hookGroupId}/${hookId}`,
      },
    );
  }

  private hookBindingsRow(hookGroupId: string, hookId: string, bindings: Binding[]): Record<string, unknown> {
    return { hookGroupId, hookId, bindings: JSON.stringify(bindings) };
  }
}

function decodeHookBindings(r: Record<string, unknown>): HookBindings {
  return { hookGroupId: r.hookGroupId as string, hookId: r.hookId as string, bindings: JSON.parse(r.bindings as string) };
}
