/**
 * Operator read models in the Indexes table, maintained as tasks move (after each task write):
 *
 * - per task queue, partition `q~<taskQueueId>` (bucket 0), and `q~<taskQueueId>~<b>` for bucket b > 0:
 *     `u~<created>~<taskId>`                          unscheduled tasks
 *     `p~<scheduled>~<taskId>~<runId>`                pending runs, oldest first
 *     `c~<started>~<taskId>~<runId>`                  claimed (running) runs, oldest first
 *     `r~<inverted resolved>~<taskId>~<runId>`        resolved runs, newest first
 *     `w~<wg>~<wid>~<inverted started>~<taskId>~<runId>`  each worker's claims, newest first
 *     `n~<name>~<inverted created>~<taskId>`          tasks by name, newest first
 * - partition `queues`: one row per task queue that has index rows (what the queries across task
 *   queues fan out over), written once per process per QUEUE_SEEN_TTL_MS, with a property `b<n>`
 *   for each bucket count n > 1 the task queue's tasks were created with;
 * - by task group, newest first: a `~new~` row in the group's partition, written in the
 *   transaction that adds the member (shared/tasks/groups.ts).
 *
 * Buckets: a partition takes about 2,000 entities/s and a lifecycle writes ~9 index entities, so a
 * busy task queue spreads its tasks over N buckets, N = its pending shard count
 * (QUEUE_PENDING_SHARDS) when the task was created (`TaskRecord.indexBuckets`), bucket
 * jumpHash(taskId, N). All rows of a task stay in its one bucket. Bucket 0 is the partition every
 * task queue had before buckets, so turning them on moves nothing; the registry row keeps every
 * bucket count ever used (merged properties never shrink), and readers fan out over
 * max(counts) buckets, so lowering N later leaves old buckets readable.
 *
 * Every key is a function of the task record, so any writer computes the same keys. A transition
 * costs one entity-group transaction in its task queue's partition, the task's bucket (delete the old state's row,
 * create the new one, record the worker's claim, the by-name row at creation); nothing else. There
 * is no deployment-wide partition (no hot spot): resolved runs of every queue and tasks by name are
 * read by fanning out over the task queues' partitions and merging by key. Index writes are off the
 * request path: queued, they share these transactions per partition (IndexBatcher, lingering up to
 * INDEX_LINGER_MS), so under load a partition costs one call per linger, not one per task write.
 *
 * Consistency: the task row is the truth; index rows are written after it (the request does not wait
 * for them; TaskStore.delete does, as the task row says which rows to delete). Two writers of the same
 * task can land out of order (e.g. a retry's pending row written after another instance already
 * claimed that run), so a delete that finds nothing leaves a tombstone (`live: false`) and creates
 * never overwrite (insert, 409 = a later state is already recorded). Resolved and worker rows hold
 * complete facts and are upserted. If a crash loses an index write (between the task write and its
 * index write), the task's next transition finds a row missing, and its fallback also removes the
 * earlier-state rows of the changed runs and of the run before them (repairOps). Counts read only
 * `live` rows of tasks before their deadline, so a row nothing repairs (a lost write for a final
 * resolution) stops counting at the task's deadline at the latest.
 *
 * Exactness: pending/claimed counts are exact with respect to the task rows except between a task
 * write and its index write (at most INDEX_LINGER_MS plus one call, as seen by another instance:
 * the writing instance's queries wait for its queued writes) and after such a crash as above.
 * A deferred write that fails (a crash, a storage error) is such a lost write.
 * Stale or duplicate pending hints never count: rows follow task rows, not queue messages.
 */
import { Condition, Entity, KeyRange, Query, Storage, TableAction, allRows, insertIfAbsent, readPage, rows, transactIf } from '../storage/storage';
import { encodeKey } from '../storage/keys';
import type { Run, TaskRecord } from '../tasks/model';
import { badArgs } from '../errors';
import { jumpHash } from '../storage/accounts';
import { MAX_PENDING_SHARDS } from '../config';
import { LATEST_PREFIX, type TaskGroups } from '../tasks/groups';
import { fromInverted, inverted, part, prefixRange } from './keys';
import type { Transition } from './history';
import { BoundedCache } from '../bounded-cache';
import { Lingering } from '../lingering';

/** The partition listing the task queues that have index rows. */
export const QUEUES_PK = 'queues';

export type ActiveState = 'unscheduled' | 'pending' | 'running';
export type ResolvedState = 'completed' | 'failed' | 'exception';
const ACTIVE_PREFIX: Record<ActiveState, string> = { unscheduled: 'u~', pending: 'p~', running: 'c~' };

/** A task queue's index partition of `bucket` (task queue ids have no `~`, so `~<b>` cannot clash). */
export function queuePk(taskQueueId: string, bucket = 0): string {
  return bucket === 0 ? `q~${encodeKey(taskQueueId)}` : `q~${encodeKey(taskQueueId)}~${bucket}`;
}

/** The bucket of a task's index rows, fixed by the bucket count it was created with. */
export function indexBucket(t: TaskRecord): number {
  const n = t.indexBuckets ?? 1;
  return n > 1 ? jumpHash(t.taskId, n) : 0;
}

/** The partition holding every index row of task `t`. */
function taskPk(t: TaskRecord): string {
  return queuePk(t.definition.taskQueueId, indexBucket(t));
}

/** The partitions of a task queue with `buckets` buckets. */
export function queuePks(taskQueueId: string, buckets: number): string[] {
  return Array.from({ length: buckets }, (_, b) => queuePk(taskQueueId, b));
}

function isResolvedRun(r: Run): boolean {
  return r.state === 'completed' || r.state === 'failed' || r.state === 'exception';
}

function base(t: TaskRecord) {
  const d = t.definition;
  return { taskId: t.taskId, taskQueueId: d.taskQueueId, taskGroupId: d.taskGroupId, name: d.metadata.name, deadline: d.deadline, expires: d.expires };
}

// ---- rows ----

function unscheduledRow(t: TaskRecord): Entity {
  return {
    partitionKey: taskPk(t),
    rowKey: `u~${t.definition.created}~${t.taskId}`,
    ...base(t),
    state: 'unscheduled',
    at: t.definition.created,
    live: true,
  };
}

function pendingRow(t: TaskRecord, r: Run): Entity {
  return {
    partitionKey: taskPk(t),
    rowKey: `p~${r.scheduled}~${t.taskId}~${r.runId}`,
    ...base(t),
    runId: r.runId,
    state: 'pending',
    at: r.scheduled,
    reasonCreated: r.reasonCreated,
    live: true,
  };
}

function claimedRow(t: TaskRecord, r: Run): Entity {
  return {
    partitionKey: taskPk(t),
    rowKey: `c~${r.started}~${t.taskId}~${r.runId}`,
    ...base(t),
    runId: r.runId,
    state: 'running',
    at: r.started,
    workerGroup: r.workerGroup,
    workerId: r.workerId,
    live: true,
  };
}

function resolvedFacts(t: TaskRecord, r: Run) {
  return {
    ...base(t),
    runId: r.runId,
    state: r.state,
    reasonCreated: r.reasonCreated,
    reasonResolved: r.reasonResolved ?? '',
    at: r.resolved,
    scheduled: r.scheduled,
    started: r.started ?? '',
    resolved: r.resolved,
    workerGroup: r.workerGroup ?? '',
    workerId: r.workerId ?? '',
  };
}

function resolvedRow(t: TaskRecord, r: Run): Entity {
  return { partitionKey: taskPk(t), rowKey: `r~${inverted(r.resolved!)}~${t.taskId}~${r.runId}`, ...resolvedFacts(t, r) };
}

export function workerPrefix(workerGroup: string, workerId: string): string {
  return `w~${workerGroup}~${workerId}~`;
}

function workerRow(t: TaskRecord, r: Run): Entity {
  return {
    partitionKey: taskPk(t),
    rowKey: `${workerPrefix(r.workerGroup!, r.workerId!)}${inverted(r.started!)}~${t.taskId}~${r.runId}`,
    ...base(t),
    runId: r.runId,
    state: r.state,
    at: r.started,
    resolved: r.resolved ?? '',
    reasonResolved: r.reasonResolved ?? '',
    workerGroup: r.workerGroup,
    workerId: r.workerId,
  };
}

const namePrefix = (name: string) => `n~${part(name)}~`;

/** The task by name, in its task queue's partition (written with the task's first index row). */
function nameRow(t: TaskRecord): Entity {
  const d = t.definition;
  return { partitionKey: taskPk(t), rowKey: `${namePrefix(d.metadata.name)}${inverted(d.created)}~${t.taskId}`, ...base(t), created: d.created };
}

// ---- what a write changes ----

/**
 * `create`: insert, skipped if the key exists (a later state or a repeat got there first);
 * `upsert`: complete facts; `remove`: delete, leaving a tombstone if the row is not there yet;
 * `purge`: delete if present.
 */
export type IndexOp = { op: 'create' | 'upsert'; row: Entity } | { op: 'remove' | 'purge'; row: Entity };

/** A write's run changes, as its plan derived them from its record (shared/lifecycle/planner.ts). */
export type Change = Pick<Transition, 'event' | 'runId' | 'from' | 'to'>;

const runChanges = (changes: Change[]) => changes.filter((c): c is Change & { runId: number } => c.runId !== undefined && c.from !== c.to);

/**
 * Each run a write moved, once, from the state it had before the write: a run that moved twice
 * (createTask's hand-over: new, pending, then running) never had the middle state's row.
 */
function movedRuns(changes: Change[]): (Change & { runId: number })[] {
  const first = new Map<number, Change & { runId: number }>();
  for (const c of runChanges(changes)) if (!first.has(c.runId)) first.set(c.runId, c);
  return [...first.values()];
}

/**
 * Index changes for a task write, grouped by partition: for each run the write moved, its old
 * state's row goes and its new state's row comes. `t` is the task as written (a run's keys never
 * change with its state).
 */
export function indexOps(changes: Change[], t: TaskRecord): Map<string, IndexOp[]> {
  const ops: IndexOp[] = [];
  const created = changes.some((c) => c.event === 'created');
  if (created) {
    ops.push({ op: 'upsert', row: nameRow(t) });
    if (t.runs.length === 0) ops.push({ op: 'create', row: unscheduledRow(t) });
  }
  for (const c of movedRuns(changes)) {
    const a = t.runs[c.runId];
    // The task's first run: it is no longer unscheduled.
    if (c.runId === 0 && c.from === null && !created) ops.push({ op: 'remove', row: unscheduledRow(t) });
    if (c.from === 'pending') ops.push({ op: 'remove', row: pendingRow(t, a) });
    if (c.from === 'running') ops.push({ op: 'remove', row: claimedRow(t, a) });
    if (a.state === 'pending') ops.push({ op: 'create', row: pendingRow(t, a) });
    if (a.state === 'running') ops.push({ op: 'create', row: claimedRow(t, a) }, { op: 'create', row: workerRow(t, a) });
    if (isResolvedRun(a)) {
      ops.push({ op: 'upsert', row: resolvedRow(t, a) });
      if (a.started && a.workerGroup) ops.push({ op: 'upsert', row: workerRow(t, a) });
    }
  }
  return group(ops);
}

/**
 * A deleted task (expired, or just created with missing dependencies): drop the rows its state
 * has, one transaction per partition (purging rows of every earlier state too would fail each
 * transaction and cost a call per row). A row its state should have but lacks (a lost write)
 * makes applyOps purge row by row; an earlier state's row a crash left behind stays, never
 * counted (past the task's deadline).
 */
export function deletionOps(t: TaskRecord): Map<string, IndexOp[]> {
  const ops: IndexOp[] = [];
  if (t.runs.length === 0) ops.push({ op: 'purge', row: unscheduledRow(t) });
  for (const r of t.runs) {
    if (r.state === 'pending') ops.push({ op: 'purge', row: pendingRow(t, r) });
    if (r.state === 'running') ops.push({ op: 'purge', row: claimedRow(t, r) });
    if (isResolvedRun(r)) ops.push({ op: 'purge', row: resolvedRow(t, r) });
    if (r.started && r.workerGroup) ops.push({ op: 'purge', row: workerRow(t, r) });
  }
  ops.push({ op: 'purge', row: nameRow(t) });
  return group(ops);
}

/**
 * Extra changes for when a partition's transaction failed (a writer was out of order or an earlier
 * index write was lost in a crash): remove rows of earlier states that this write assumed were
 * already gone, for the changed runs and the run before them, and re-record that run's outcome.
 */
export function repairOps(changes: Change[], t: TaskRecord): IndexOp[] {
  const ops: IndexOp[] = [];
  const changed = runChanges(changes);
  if (!changed.length || changes.some((c) => c.event === 'created')) return ops;
  for (const c of changed) {
    if (isResolvedRun(t.runs[c.runId]) && c.from === 'running') ops.push({ op: 'remove', row: pendingRow(t, t.runs[c.runId]) });
  }
  const prev = t.runs[changed[0].runId - 1];
  if (prev && isResolvedRun(prev)) {
    ops.push({ op: 'remove', row: pendingRow(t, prev) }, { op: 'upsert', row: resolvedRow(t, prev) });
    if (prev.started && prev.workerGroup) ops.push({ op: 'remove', row: claimedRow(t, prev) }, { op: 'upsert', row: workerRow(t, prev) });
  }
  return ops;
}

function group(ops: IndexOp[]): Map<string, IndexOp[]> {
  const m = new Map<string, IndexOp[]>();
  for (const o of ops) {
    const list = m.get(o.row.partitionKey) ?? [];
    list.push(o);
    m.set(o.row.partitionKey, list);
  }
  return m;
}

/** Entity-group transactions hold at most 100 operations. */
const MAX_BATCH = 100;

/**
 * Applies one partition's changes: one transaction in the common case; if it fails because a row
 * was missing or already there (an out-of-order or repeated writer), each change alone.
 */
export async function applyOps(storage: Storage, ops: IndexOp[], repair: IndexOp[] = []): Promise<void> {
  const table = storage.table('Indexes');
  if (ops.length <= MAX_BATCH && (await transactIf(table, ops.map(toAction))).ok) return;
  const keys = new Set(ops.map((o) => o.row.rowKey));
  for (const o of [...ops, ...repair.filter((r) => !keys.has(r.row.rowKey))]) {
    const { partitionKey: pk, rowKey: rk } = o.row;
    if (o.op === 'upsert') await table.upsert(o.row);
    else if (o.op === 'create') await insertIfAbsent(table, o.row);
    else if (o.op === 'purge') await table.delete(pk, rk);
    else if (!(await table.delete(pk, rk))) {
      // Not written yet by a slower writer of the earlier state: make sure it never will be.
      if (!(await insertIfAbsent(table, { ...o.row, live: false })).ok) await table.delete(pk, rk); // it landed in between: remove it
    }
  }
}

/** A writer's changes to one partition, waiting to go out with others'. */
interface Waiting {
  ops: IndexOp[];
  repair: IndexOp[];
  /** When it was queued (Date.now()): it goes out at most INDEX_LINGER_MS later, plus one call. */
  at: number;
  /** Someone waits for it (a task deletion): it and its partition's queue go out without lingering. */
  now: boolean;
  done: (err?: unknown) => void;
}

/**
 * How long a partition's first queued write waits for others to share its transaction. Index
 * writes are off the request path, so this costs no request time; it is the lag of the operator
 * queries of other instances (this instance's own queries flush first, see settled()). Measured
 * at 16 concurrent lifecycles on one task queue (~30-45 lifecycles/s): 1.95 index transactions per
 * lifecycle without lingering, 0.74 at 25 ms, 0.4-0.57 at 50 ms, 0.25 at 100 ms; past 50 ms the
 * saving is small and the lag doubles.
 */
export const INDEX_LINGER_MS = 50;
/**
 * Backpressure: with this many actions queued for one partition (ten full transactions behind),
 * the index is not keeping up, and requests wait for their index writes again (as before they
 * were queued) instead of growing the queue without bound.
 */
export const INDEX_BACKLOG_MAX = 1000;

/**
 * Group commit of index writes, off the request path: a partition's first queued write lingers up
 * to INDEX_LINGER_MS, then it and every write queued meanwhile go out in one entity-group
 * transaction (up to 100 actions, each row key once; more go in further transactions right away).
 * Under load a task queue's partition costs one transaction per linger instead of one per task
 * write. Writes of one row key keep their order (a write is held back behind an earlier one of
 * the same key that did not fit). If a group's transaction conflicts (an out-of-order writer),
 * each of its writers is applied alone, with its repair, exactly as without grouping.
 */
export class IndexBatcher {
  private readonly waiting = new Map<string, Waiting[]>();
  private readonly busy = new Set<string>();
  /** Lingering drains, woken early by a full batch, a write that must not wait or settled(). */
  private readonly lingering = new Lingering();

  constructor(
    private readonly storage: Storage,
    private readonly lingerMs = INDEX_LINGER_MS,
  ) {}

  /** Queues one writer's changes to partition `pk`; resolves once they are written. `now`: without lingering. */
  apply(pk: string, ops: IndexOp[], repair: IndexOp[] = [], now = false): Promise<void> {
    const written = new Promise<void>((resolve, reject) => {
      const list = this.waiting.get(pk) ?? [];
      list.push({ ops, repair, at: Date.now(), now, done: (err) => (err === undefined ? resolve() : reject(err)) });
      this.waiting.set(pk, list);
      if (!this.busy.has(pk)) void this.drain(pk);
      else if (now || this.lingering.hurried || opCount(list) >= MAX_BATCH) this.lingering.wake(pk);
    });
    this.lingering.track(written);
    return written;
  }

  /** Whether partition `pk` is INDEX_BACKLOG_MAX actions or more behind: a new writer should wait for its write. */
  backlogged(pk: string): boolean {
    const list = this.waiting.get(pk);
    return !!list && opCount(list) >= INDEX_BACKLOG_MAX;
  }

  /**
   * Resolves once every write queued before the call has gone out or failed; lingering partitions
   * go out at once. Operator queries call this first, so a client reads its own writes through
   * the same instance; closing the app calls it to flush.
   */
  settled(): Promise<void> {
    return this.lingering.settled();
  }

  private async drain(pk: string): Promise<void> {
    this.busy.add(pk);
    try {
      for (let list = this.waiting.get(pk); list?.length; list = this.waiting.get(pk)) {
        const wait = list[0].at + this.lingerMs - Date.now();
        if (wait > 0 && !this.lingering.hurried && !list.some((w) => w.now) && opCount(list) < MAX_BATCH) {
          await this.lingering.wait(pk, wait);
          continue;
        }
        const group = takeGroup(list);
        if (!list.length) this.waiting.delete(pk);
        await this.send(group);
      }
    } finally {
      this.busy.delete(pk);
    }
  }

  private async send(group: Waiting[]): Promise<void> {
    const alone = (w: Waiting) => applyOps(this.storage, w.ops, w.repair).then(() => w.done(), w.done);
    if (group.length === 1) return alone(group[0]);
    let together;
    try {
      together = await transactIf(
        this.storage.table('Indexes'),
        group.flatMap((w) => w.ops.map(toAction)),
      );
    } catch (err) {
      for (const w of group) w.done(err);
      return;
    }
    if (!together.ok) await Promise.all(group.map(alone));
    else for (const w of group) w.done();
  }
}

const opCount = (list: Waiting[]) => list.reduce((n, w) => n + w.ops.length, 0);

/**
 * How long a process trusts that it has listed a task queue in `queues` (one upsert per queue per
 * process per hour: rewriting the row only covers a lost first write; a larger bucket count is
 * written at once).
 */
export const QUEUE_SEEN_TTL_MS = 3600_000;
/** Bounds the registry caches' memory (an entry is a task queue id, a count and a time). */
const MAX_QUEUES_SEEN = 10_000;

/** The registry row's property recording that tasks were created with `n` > 1 buckets. */
const bucketsProp = (n: number) => `b${n}`;

/** The most buckets a registry row records (1 without any): every bucket its task queue ever used. */
function registryBuckets(row: Record<string, unknown>): number {
  let n = 1;
  for (const k of Object.keys(row)) {
    const m = /^b(\d+)$/.exec(k);
    if (m && row[k] === true) n = Math.max(n, Math.min(MAX_PENDING_SHARDS, Number(m[1])));
  }
  return n;
}

/** Lists task queues in the `queues` partition, which the queries across task queues fan out over. */
export class QueueRegistry {
  private readonly seen = new BoundedCache<string, { at: number; buckets: number }>(MAX_QUEUES_SEEN);

  constructor(private readonly storage: Storage) {}

  /** Writes under way: concurrent writers of a task queue share one (and queue their rows in order). */
  private readonly listing = new Map<string, Promise<void>>();

  /**
   * Records `taskQueueId` and that it uses `buckets` buckets, unless this process did within
   * QUEUE_SEEN_TTL_MS; before the task's first index row. A merge adds `b<n>` beside the counts
   * other writers recorded, so the row never forgets a bucket (no read needed to keep the max).
   */
  async ensure(taskQueueId: string, buckets = 1): Promise<void> {
    const hit = this.seen.get(taskQueueId);
    if (hit !== undefined && Date.now() - hit.at < QUEUE_SEEN_TTL_MS && hit.buckets >= buckets) return;
    const key = `${taskQueueId}\n${buckets}`;
    let listing = this.listing.get(key);
    if (!listing) {
      listing = this.list(taskQueueId, buckets).finally(() => this.listing.delete(key));
      this.listing.set(key, listing);
    }
    await listing;
  }

  private async list(taskQueueId: string, buckets: number): Promise<void> {
    const entity = { partitionKey: QUEUES_PK, rowKey: queuePk(taskQueueId), taskQueueId, ...(buckets > 1 ? { [bucketsProp(buckets)]: true } : {}) };
    await this.storage.table('Indexes').transact([{ op: 'upsert', mode: 'Merge', entity }]);
    this.seen.set(taskQueueId, { at: Date.now(), buckets: Math.max(buckets, this.seen.get(taskQueueId)?.buckets ?? 1) });
    bucketCounts(this.storage).raise(taskQueueId, buckets);
  }
}

/** A task queue in the registry and how many buckets its index rows may be in. */
export interface IndexedQueue {
  taskQueueId: string;
  buckets: number;
}

/** Every task queue that has (or had) index rows, from the `queues` partition (1,000 per call). */
export async function indexedQueues(storage: Storage): Promise<IndexedQueue[]> {
  const out: IndexedQueue[] = [];
  for await (const r of rows(storage.table('Indexes'), { partitionKey: QUEUES_PK }))
    out.push({ taskQueueId: r.taskQueueId as string, buckets: registryBuckets(r) });
  const counts = bucketCounts(storage);
  for (const q of out) counts.set(q.taskQueueId, q.buckets);
  return out;
}

/**
 * How long a reader trusts a task queue's bucket count: one registry read per task queue per
 * process per interval; a count another instance raised (a new QUEUE_PENDING_SHARDS rolling out)
 * may go unseen this long. This process's own writes raise it at once.
 */
export const BUCKETS_TTL_MS = 60_000;
/** A task queue without a registry row has no index rows yet: asked again soon, so its first rows are seen fast. */
const NO_BUCKETS_TTL_MS = 1000;

/** Per process and storage: each task queue's bucket count, read from its registry row (concurrent readers share one read). */
class BucketCounts {
  private readonly cache = new BoundedCache<string, { until: number; n: Promise<number> }>(MAX_QUEUES_SEEN);

  constructor(private readonly storage: Storage) {}

  get(taskQueueId: string): Promise<number> {
    const hit = this.cache.get(taskQueueId);
    if (hit && Date.now() < hit.until) return hit.n;
    const entry = { until: Infinity, n: Promise.resolve(1) };
    entry.n = this.storage
      .table('Indexes')
      .get(QUEUES_PK, queuePk(taskQueueId))
      .then(
        (row) => {
          entry.until = Date.now() + (row ? BUCKETS_TTL_MS : NO_BUCKETS_TTL_MS);
          return row ? registryBuckets(row) : 1;
        },
        (err) => {
          if (this.cache.get(taskQueueId) === entry) this.cache.delete(taskQueueId);
          throw err;
        },
      );
    this.put(taskQueueId, entry);
    return entry.n;
  }

  /** A count just read from the registry. */
  set(taskQueueId: string, n: number): void {
    this.put(taskQueueId, { until: Date.now() + BUCKETS_TTL_MS, n: Promise.resolve(n) });
  }

  /** This process recorded `n` buckets: a cached count below it is raised (without an entry, the next read finds it). */
  raise(taskQueueId: string, n: number): void {
    const hit = this.cache.get(taskQueueId);
    if (hit) hit.n = hit.n.then((m) => Math.max(m, n));
  }

  private put(taskQueueId: string, entry: { until: number; n: Promise<number> }): void {
    this.cache.set(taskQueueId, entry);
  }
}

const bucketCache = new WeakMap<Storage, BucketCounts>();

function bucketCounts(storage: Storage): BucketCounts {
  let c = bucketCache.get(storage);
  if (!c) bucketCache.set(storage, (c = new BucketCounts(storage)));
  return c;
}

/** The index partitions of a task queue: every bucket it ever used (one, `q~<id>`, unless it was busy). */
export async function queuePartitions(storage: Storage, taskQueueId: string): Promise<string[]> {
  return queuePks(taskQueueId, await bucketCounts(storage).get(taskQueueId));
}

/**
 * Takes out of `list`, in order, the writers that fit one transaction (<= 100 actions, each key
 * once). A writer that does not fit stays, and so does every later writer of one of its keys, so
 * the writes of a key keep their order.
 */
function takeGroup(list: Waiting[]): Waiting[] {
  const group: Waiting[] = [];
  const keys = new Set<string>();
  const held = new Set<string>();
  let size = 0;
  for (let i = 0; i < list.length;) {
    const w = list[i];
    const clash = w.ops.some((o) => keys.has(o.row.rowKey) || held.has(o.row.rowKey));
    if (!clash && (!group.length || size + w.ops.length <= MAX_BATCH)) {
      for (const o of w.ops) keys.add(o.row.rowKey);
      size += w.ops.length;
      group.push(w);
      list.splice(i, 1);
    } else {
      for (const o of w.ops) held.add(o.row.rowKey);
      i++;
    }
  }
  return group;
}

function toAction(o: IndexOp): TableAction {
  return o.op === 'create' || o.op === 'upsert' ? { op: o.op, entity: o.row } : { op: 'delete', partitionKey: o.row.partitionKey, rowKey: o.row.rowKey };
}

// ---- queries ----

export interface IndexRow {
  /** The partition (bucket) holding the row. */
  partitionKey: string;
  rowKey: string;
  taskId: string;
  runId?: number;
  taskQueueId: string;
  taskGroupId: string;
  name: string;
  state: string;
  /** When the run entered `state` (resolved time for resolved rows, claim time for worker rows). */
  at: string;
  deadline: string;
  reasonCreated?: string;
  reasonResolved?: string;
  workerGroup?: string;
  workerId?: string;
  scheduled?: string;
  started?: string;
  resolved?: string;
  created?: string;
}

function clean(r: Record<string, unknown>): IndexRow {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(r)) {
    if (k === 'etag' || k === 'timestamp' || k === 'live' || k === 'expires') continue;
    if (v === '' || v === null || v === undefined) continue;
    out[k] = v;
  }
  return out as unknown as IndexRow;
}

function activeWhere(now: string, extra: Condition[] = []): Condition[] {
  return [{ prop: 'live', op: 'eq', value: true }, { prop: 'deadline', op: 'gt', value: now }, ...extra];
}

/** Exact number of a task queue's tasks in an active state, from one partition range per bucket. */
export async function countActive(storage: Storage, taskQueueId: string, state: ActiveState, now: Date, extra: Condition[] = []): Promise<number> {
  const pks = await queuePartitions(storage, taskQueueId);
  const where = activeWhere(now.toJSON(), extra);
  const counts = await Promise.all(pks.map((pk) => countWhere(storage, { partitionKey: pk, rowKey: prefixRange(ACTIVE_PREFIX[state]), where })));
  return counts.reduce((a, b) => a + b, 0);
}

async function countWhere(storage: Storage, query: Query): Promise<number> {
  let n = 0;
  for await (const _ of rows(storage.table('Indexes'), { ...query, select: ['RowKey'] })) n++;
  return n;
}

const byRowKey = (a: { rowKey: string }, b: { rowKey: string }) => (a.rowKey < b.rowKey ? -1 : a.rowKey > b.rowKey ? 1 : 0);

/**
 * Up to `limit` pending runs of a task queue scheduled before `before`, oldest first (over every
 * bucket; `buckets` when the caller has read the registry already).
 */
export async function stalePending(
  storage: Storage,
  taskQueueId: string,
  before: string,
  now: Date,
  limit: number,
  buckets?: number,
): Promise<{ taskId: string; runId: number }[]> {
  const pks = buckets === undefined ? await queuePartitions(storage, taskQueueId) : queuePks(taskQueueId, buckets);
  const query = (pk: string): Query => ({
    partitionKey: pk,
    rowKey: { ge: ACTIVE_PREFIX.pending, lt: `${ACTIVE_PREFIX.pending}${before}` },
    where: activeWhere(now.toJSON()),
    select: ['RowKey', 'taskId', 'runId'],
  });
  // Each bucket read on to `limit` rows (a page may end early, empty, and continue).
  const perBucket = await Promise.all(pks.map((pk) => allRows(storage.table('Indexes'), query(pk), { max: limit })));
  const stale = perBucket.flat().sort(byRowKey);
  return stale.slice(0, limit).map((r) => ({ taskId: r.taskId as string, runId: Number(r.runId) }));
}

/** A task queue's runs (or unscheduled tasks) in an active state, oldest first. */
export async function listActive(storage: Storage, taskQueueId: string, state: ActiveState, now: Date, limit: number, continuation?: string) {
  const prefix = ACTIVE_PREFIX[state];
  return queuePage(storage, await queuePartitions(storage, taskQueueId), prefix, prefixRange(prefix), activeWhere(now.toJSON()), limit, continuation);
}

export interface Window {
  since?: string;
  until?: string;
  state?: ResolvedState | 'running';
}

/** RowKey range of rows `<prefix><inverted time>~…` whose time lies in [since, until]. */
function timeRange(prefix: string, w: Window): KeyRange {
  const lower = w.until ? prefix + inverted(w.until) : prefix;
  const upper = w.since ? prefix + inverted(w.since) + '~~' : prefix + '~';
  return { ge: lower, lt: upper };
}

const stateWhere = (w: Window): Condition[] => (w.state ? [{ prop: 'state', op: 'eq', value: w.state }] : []);

/** Every index partition of every task queue (what the queries across task queues fan out over). */
async function allPartitions(storage: Storage): Promise<string[]> {
  return (await indexedQueues(storage)).flatMap((q) => queuePks(q.taskQueueId, q.buckets));
}

/** Resolved runs, newest first: of one task queue, or of all (taskQueueId undefined: fanned out over every task queue). */
export async function listResolved(storage: Storage, taskQueueId: string | undefined, w: Window, limit: number, continuation?: string) {
  const pks = taskQueueId === undefined ? await allPartitions(storage) : await queuePartitions(storage, taskQueueId);
  if (taskQueueId === undefined) return mergedPage(storage, pks, 'r~', timeRange('r~', w), stateWhere(w), limit, continuation);
  return queuePage(storage, pks, 'r~', timeRange('r~', w), stateWhere(w), limit, continuation);
}

/** Partition queries of a fan-out that run at once (each is one storage call). */
const FAN_OUT_CONCURRENCY = 16;
/** Rows per fan-out page: each partition gives up to this many, all held at once. */
const FAN_OUT_MAX_PAGE = 100;
/** Fan-out continuation tokens: this prefix, then the last row's key after the common prefix, base64url. */
const CURSOR_PREFIX = 'ix.';

/**
 * One page of a task queue's rows: with one bucket, its partition's own page (the table's
 * continuation, one call as before buckets); with more, merged over them (an `ix.` token).
 */
async function queuePage(storage: Storage, pks: string[], prefix: string, range: KeyRange, where: Condition[], limit: number, continuation?: string) {
  if (pks.length === 1 && !continuation?.startsWith(CURSOR_PREFIX)) {
    const page = await readPage(storage.table('Indexes'), { partitionKey: pks[0], rowKey: range, where }, limit, continuation);
    return { rows: page.items.map(clean), continuation: page.continuation };
  }
  return mergedPage(storage, pks, prefix, range, where, limit, continuation);
}

/**
 * One page of rows with keys `<prefix><suffix>` in `range`, from the partitions `pks` (task
 * queues, buckets), merged by key (the suffixes sort the same way in every partition). Each
 * partition gives up to `limit` + 1 rows after the cursor, so the first `limit` of the merge are
 * exactly the next page, and more remain if the merge holds more. The continuation names the last
 * row returned.
 */
async function mergedPage(storage: Storage, pks: string[], prefix: string, range: KeyRange, where: Condition[], pageSize: number, continuation?: string) {
  const limit = Math.min(pageSize, FAN_OUT_MAX_PAGE);
  let rowKey: KeyRange = range;
  if (continuation !== undefined) {
    const from = prefix + decodeCursor(continuation);
    rowKey = { lt: range.lt, ...(range.ge !== undefined && range.ge > from ? { ge: range.ge } : { gt: from }) };
  }
  const merged: Entity[] = [];
  const todo = [...pks];
  const worker = async () => {
    for (let pk = todo.pop(); pk !== undefined; pk = todo.pop())
      merged.push(...(await allRows(storage.table('Indexes'), { partitionKey: pk, rowKey, where }, { max: limit + 1 })));
  };
  await Promise.all(Array.from({ length: Math.min(FAN_OUT_CONCURRENCY, pks.length) }, worker));
  merged.sort(byRowKey);
  const taken = merged.slice(0, limit);
  const more = merged.length > limit;
  const last = taken[taken.length - 1];
  return { rows: taken.map(clean), continuation: more && last ? encodeCursor((last.rowKey as string).slice(prefix.length)) : undefined };
}

function encodeCursor(suffix: string): string {
  return CURSOR_PREFIX + Buffer.from(suffix, 'utf8').toString('base64url');
}

/** A cursor's key suffix starts with a time: inverted epoch ms (newest-first lists) or ISO (oldest-first lists). */
const CURSOR_SUFFIX = /^(\d{13}|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)~[^~]/;

/** A client's fan-out continuation token: 400 unless one we gave out could look like it. */
function decodeCursor(token: string): string {
  const body = token.startsWith(CURSOR_PREFIX) ? token.slice(CURSOR_PREFIX.length) : '';
  const suffix = /^[A-Za-z0-9_-]+$/.test(body) ? Buffer.from(body, 'base64url').toString('utf8') : '';
  if (!CURSOR_SUFFIX.test(suffix)) throw badArgs('continuationToken is not valid');
  return suffix;
}

/** A worker's claims (newest first), with each run's current state. */
export async function listWorkerRuns(
  storage: Storage,
  taskQueueId: string,
  workerGroup: string,
  workerId: string,
  w: Window,
  limit: number,
  continuation?: string,
) {
  const prefix = workerPrefix(workerGroup, workerId);
  return queuePage(storage, await queuePartitions(storage, taskQueueId), prefix, timeRange(prefix, w), stateWhere(w), limit, continuation);
}

/** Adds up the states of rows in `range` of every partition in `pks`. */
async function tally(storage: Storage, pks: string[], range: KeyRange, into: Record<string, number>): Promise<void> {
  await Promise.all(
    pks.map(async (pk) => {
      for await (const r of rows(storage.table('Indexes'), { partitionKey: pk, rowKey: range, select: ['state'] })) {
        const s = r.state as string;
        if (s in into) into[s]++;
      }
    }),
  );
}

export interface StateCounts {
  unscheduled?: number;
  pending?: number;
  running: number;
  completed: number;
  failed: number;
  exception: number;
}

/**
 * A task queue's tasks by state: active states exactly (as of the index), resolved runs in the
 * window [since, now].
 */
export async function queueStateCounts(storage: Storage, taskQueueId: string, since: string, now: Date): Promise<StateCounts> {
  const resolved = { completed: 0, failed: 0, exception: 0 };
  const [[unscheduled, pending, running]] = await Promise.all([
    Promise.all((['unscheduled', 'pending', 'running'] as const).map((s) => countActive(storage, taskQueueId, s, now))),
    queuePartitions(storage, taskQueueId).then((pks) => tally(storage, pks, timeRange('r~', { since, until: now.toJSON() }), resolved)),
  ]);
  return { unscheduled, pending, running, ...resolved };
}

/** One worker's runs by state: running exactly, resolved among the runs it claimed since `since`. */
export async function workerStateCounts(
  storage: Storage,
  taskQueueId: string,
  workerGroup: string,
  workerId: string,
  since: string,
  now: Date,
): Promise<StateCounts> {
  const running = await countActive(storage, taskQueueId, 'running', now, [
    { prop: 'workerGroup', op: 'eq', value: workerGroup },
    { prop: 'workerId', op: 'eq', value: workerId },
  ]);
  const resolved = { completed: 0, failed: 0, exception: 0 };
  await tally(storage, await queuePartitions(storage, taskQueueId), timeRange(workerPrefix(workerGroup, workerId), { since, until: now.toJSON() }), resolved);
  return { running, ...resolved };
}

/**
 * Tasks by name (fanned out over every task queue's buckets) or by task group (its latest rows,
 * shared/tasks/groups.ts), newest created first: taskId and created (the caller loads each task for the rest).
 */
export async function listLatest(
  storage: Storage,
  by: { name?: string; taskGroupId?: string },
  limit: number,
  continuation?: string,
  groups?: Pick<TaskGroups, 'latestPage'>,
) {
  if (by.name !== undefined) {
    const prefix = namePrefix(by.name);
    const r = await mergedPage(storage, await allPartitions(storage), prefix, prefixRange(prefix), [], limit, continuation);
    return { rows: r.rows.map((x) => ({ taskId: x.taskId, created: x.created! })), continuation: r.continuation };
  }
  const page = await groups!.latestPage(by.taskGroupId!, limit, continuation);
  return {
    rows: page.keys.map((k) => ({ taskId: k.split('~').pop()!, created: fromInverted(k.slice(LATEST_PREFIX.length).split('~')[0]) })),
    continuation: page.continuation,
  };
}
