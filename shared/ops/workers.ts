/**
 * Task queues and workers as operators see them: when they were last active, when they expire,
 * and worker quarantine.
 *
 * Rows: TaskQueues `(PK=<taskQueueId>, RK='meta')` beside the pending-queue rows `p1..p7` that
 * createTask writes (a queue with tasks but no worker yet is listed from those); Workers
 * `(PK=<taskQueueId>, RK=<workerGroup>~<workerId>)`. Provisioners and worker types are derived from
 * task queue ids, as the modern queue does.
 *
 * "Seen" bookkeeping never writes per claim: claimWork reads the worker row (it needs the
 * quarantine anyway) and refreshes lastDateActive/expires only when lastDateActive is older than
 * SEEN_INTERVAL_MS, as an ETag-guarded merge, so concurrent instances write it at most once per
 * interval between them. A worker's recent tasks (getWorker, and listWorkers' latestTask) are a
 * list on this row, appended in claim order (the order claimWork returns its claims) with an
 * ETag-guarded merge: the index rows' time keys cannot order claims made in the same millisecond.
 * An instance writes it at most once per RECENT_TASKS_WRITE_MS per worker: claims in between wait
 * in memory and go out together (this instance shows them at once; others up to that much later).
 */
import { Condition, Query, Storage, StoredEntity, UNCHANGED, guardedUpdate, readPage, rows } from '../storage/storage';
import { encodeKey } from '../storage/keys';
import { notFound } from '../errors';
import { BoundedCache } from '../bounded-cache';

/** lastDateActive granularity (the modern queue's): at most one write per worker per interval. */
export const SEEN_INTERVAL_MS = 30 * 60 * 1000;
/** A worker that stops calling expires a day later (unless quarantined). */
export const WORKER_EXPIRY_MS = 24 * 3600 * 1000;
/** A task queue expires five days after it was last active. */
export const QUEUE_EXPIRY_MS = 5 * 24 * 3600 * 1000;
/** getWorker shows this many recent claims. */
export const RECENT_TASKS = 20;
/** Quarantine changes kept on the worker row (bounds the row size). */
export const MAX_QUARANTINE_DETAILS = 20;
const META_RK = 'meta';

export interface QueueInfo {
  taskQueueId: string;
  provisionerId: string;
  workerType: string;
  description: string;
  stability: 'experimental' | 'stable' | 'deprecated';
  expires: string;
  lastDateActive: string;
}

export interface QuarantineDetail {
  clientId: string;
  updatedAt: string;
  quarantineUntil: string;
  quarantineInfo: string;
}

type WorkerFields = {
  partitionKey: string;
  rowKey: string;
  taskQueueId: string;
  workerGroup: string;
  workerId: string;
  firstClaim: string;
  lastDateActive: string;
  expires: string;
  /** '' when never quarantined. */
  quarantineUntil: string;
  quarantineDetails: string;
  /** JSON `[{taskId, runId}]`, oldest first, at most RECENT_TASKS. */
  recentTasks: string;
  /** Id of the write that stored the row (guardedUpdate's own-success check). */
  writeId?: string;
};
type WorkerRow = WorkerFields & { etag: string };

export function splitQueue(taskQueueId: string): { provisionerId: string; workerType: string } {
  const i = taskQueueId.indexOf('/');
  return { provisionerId: taskQueueId.slice(0, i), workerType: taskQueueId.slice(i + 1) };
}

export interface TaskRun {
  taskId: string;
  runId: number;
}

/** The worker's recentTasks. */
function recentOf(r: { recentTasks: string }): TaskRun[] {
  return JSON.parse(r.recentTasks);
}

/** `known` with `runs` appended (each claim once), the last RECENT_TASKS. */
function withRuns(known: TaskRun[], runs: TaskRun[]): TaskRun[] {
  const out = known.map(({ taskId, runId }) => ({ taskId, runId }));
  for (const { taskId, runId } of runs) if (!out.some((k) => k.taskId === taskId && k.runId === runId)) out.push({ taskId, runId });
  return out.slice(-RECENT_TASKS);
}

const later = (a: string, b: string) => (a > b ? a : b);
const plus = (d: Date, ms: number) => new Date(d.getTime() + ms).toJSON();

/**
 * How long an instance reuses a worker row it read for `seen` (each claimWork call would otherwise
 * cost a read, making idle cost grow with the number of waiting workers). A quarantine set through
 * another instance therefore takes effect here within this time; through this one, at once.
 */
export const SEEN_CACHE_MS = 15_000;
/** Bounds the cache's memory (a row is a few hundred bytes). */
const MAX_SEEN_CACHE = 10_000;
/**
 * A worker that keeps claiming costs one recentTasks write per this interval per instance, not one
 * per claimWork call; getWorker through another instance lags by at most this (plus a write's time).
 */
export const RECENT_TASKS_WRITE_MS = 5_000;

/** This instance's last recentTasks write of a worker, and the claims made since that wait for the next. */
interface RecentWrite {
  at: number;
  waiting: TaskRun[];
  timer?: ReturnType<typeof setTimeout>;
}

export class WorkerRegistry {
  private readonly seenCache = new BoundedCache<string, { at: number; row: WorkerRow }>(MAX_SEEN_CACHE);

  constructor(
    private readonly storage: Storage,
    private readonly now: () => Date,
    /** RECENT_TASKS_WRITE_MS, unless a test sets its own interval on the service's clock. */
    private readonly recentTasksWriteMs = RECENT_TASKS_WRITE_MS,
  ) {}

  private get workers() {
    return this.storage.table('Workers');
  }

  private get queues() {
    return this.storage.table('TaskQueues');
  }

  // ---- workers ----

  async getRow(taskQueueId: string, workerGroup: string, workerId: string): Promise<WorkerRow | undefined> {
    const key = this.workerKey(taskQueueId, workerGroup, workerId);
    return this.workers.get<WorkerRow>(key.partitionKey, key.rowKey);
  }

  private workerKey(taskQueueId: string, workerGroup: string, workerId: string) {
    return { partitionKey: encodeKey(taskQueueId), rowKey: `${workerGroup}~${workerId}` };
  }

  private fresh(taskQueueId: string, workerGroup: string, workerId: string, expires?: string): WorkerFields {
    const now = this.now();
    return {
      partitionKey: encodeKey(taskQueueId),
      rowKey: `${workerGroup}~${workerId}`,
      taskQueueId,
      workerGroup,
      workerId,
      firstClaim: now.toJSON(),
      lastDateActive: now.toJSON(),
      expires: expires ?? plus(now, WORKER_EXPIRY_MS),
      quarantineUntil: '',
      quarantineDetails: '[]',
      recentTasks: '[]',
    };
  }

  /**
   * Records that a worker called (claimWork, reclaimTask) and returns its row: one read, plus an
   * ETag-guarded write only when the row is new or its lastDateActive is older than SEEN_INTERVAL_MS.
   */
  async seen(taskQueueId: string, workerGroup: string, workerId: string): Promise<WorkerRow> {
    const key = `${taskQueueId}\n${workerGroup}~${workerId}`;
    const cached = this.seenCache.get(key);
    if (cached && Date.now() - cached.at < SEEN_CACHE_MS && Date.parse(cached.row.lastDateActive) > this.now().getTime() - SEEN_INTERVAL_MS) return cached.row;
    const row = await this.seenUncached(taskQueueId, workerGroup, workerId);
    this.seenCache.set(key, { at: Date.now(), row });
    return row;
  }

  private async seenUncached(taskQueueId: string, workerGroup: string, workerId: string): Promise<WorkerRow> {
    const now = this.now();
    const out = await guardedUpdate<WorkerRow>(
      this.workers,
      this.workerKey(taskQueueId, workerGroup, workerId),
      (row) => {
        if (!row) return this.fresh(taskQueueId, workerGroup, workerId);
        // Seen recently (by this call's race winner too, whose write counts as ours): no write.
        if (Date.parse(row.lastDateActive) > now.getTime() - SEEN_INTERVAL_MS) return UNCHANGED;
        return { lastDateActive: now.toJSON(), expires: later(row.expires, plus(now, WORKER_EXPIRY_MS)) };
      },
      { what: `worker ${workerGroup}/${workerId}`, mode: 'merge' },
    );
    // Whoever wrote the worker row sees its task queue.
    if (out.written) await this.queueSeen(taskQueueId);
    return out.row!;
  }

  /** Bounded: a dropped entry only costs a write (or drops claims still waiting: getWorker then shows them late). */
  private readonly recentWrites = new BoundedCache<string, RecentWrite>(MAX_SEEN_CACHE);

  /**
   * Records claims in the worker's recentTasks, in the given order (the claimWork response's). The
   * first claims after RECENT_TASKS_WRITE_MS are written at once; later ones wait for the end of
   * that interval and go out together (a timer), so a busy worker costs one write per interval.
   */
  async claimed(taskQueueId: string, workerGroup: string, workerId: string, runs: TaskRun[]): Promise<void> {
    if (!runs.length) return;
    const key = `${taskQueueId}\n${workerGroup}~${workerId}`;
    const w = this.recentWrites.get(key);
    const now = this.now().getTime();
    if (w && now - w.at < this.recentTasksWriteMs) {
      w.waiting.push(...runs);
      w.timer ??= setTimeout(() => void this.flushRecent(taskQueueId, workerGroup, workerId), w.at + this.recentTasksWriteMs - now);
      w.timer.unref?.();
      return;
    }
    const waiting = w?.waiting ?? [];
    if (w?.timer) clearTimeout(w.timer);
    this.recentWrites.set(key, { at: now, waiting: [] });
    try {
      await this.appendRecent(taskQueueId, workerGroup, workerId, [...waiting, ...runs]);
    } catch (err) {
      // Kept, before any claims that came meanwhile, for the worker's next claim, which writes at once.
      const entry = this.recentWrites.get(key);
      if (entry) {
        entry.waiting = [...waiting, ...runs, ...entry.waiting];
        entry.at = 0;
      }
      throw err;
    }
  }

  /** Writes the claims waiting for a worker (the interval's timer). */
  private async flushRecent(taskQueueId: string, workerGroup: string, workerId: string): Promise<void> {
    const key = `${taskQueueId}\n${workerGroup}~${workerId}`;
    const w = this.recentWrites.get(key);
    if (!w) return;
    const runs = w.waiting;
    w.timer = undefined;
    w.waiting = [];
    w.at = this.now().getTime();
    try {
      await this.appendRecent(taskQueueId, workerGroup, workerId, runs);
    } catch {
      // Kept for the worker's next claim, which then writes at once.
      w.waiting = [...runs, ...w.waiting];
      w.at = 0;
    }
  }

  /** Claims of this worker made on this instance and not written yet (shown by getWorker here at once). */
  private waitingRecent(taskQueueId: string, workerGroup: string, workerId: string): TaskRun[] {
    return this.recentWrites.get(`${taskQueueId}\n${workerGroup}~${workerId}`)?.waiting ?? [];
  }

  /**
   * Appends claims to the worker's recentTasks in the given order, keeping the last RECENT_TASKS; a
   * claim already listed (a replayed claimWork) is not repeated. One merge guarded by the ETag of the
   * row `seen` returned, re-read only when that lost a race.
   */
  private async appendRecent(taskQueueId: string, workerGroup: string, workerId: string, runs: TaskRun[]): Promise<void> {
    if (!runs.length) return;
    const key = `${taskQueueId}\n${workerGroup}~${workerId}`;
    const out = await guardedUpdate<WorkerRow>(
      this.workers,
      this.workerKey(taskQueueId, workerGroup, workerId),
      (row) => {
        if (!row) return UNCHANGED; // expired and deleted meanwhile: nothing to record on
        const known = recentOf(row);
        const recentTasks = JSON.stringify(withRuns(known, runs));
        return recentTasks === JSON.stringify(known) ? UNCHANGED : { recentTasks };
      },
      { what: `worker ${workerGroup}/${workerId}`, mode: 'merge', current: this.seenCache.get(key)?.row },
    );
    const cached = this.seenCache.get(key);
    if (out.written && cached) cached.row = out.row!;
  }

  isQuarantined(row: { quarantineUntil?: string } | undefined): boolean {
    return !!row?.quarantineUntil && Date.parse(row.quarantineUntil) > this.now().getTime();
  }

  /** Applies `fn` to the worker row under its ETag (creating the row when `create` is given). */
  private async change(
    taskQueueId: string,
    workerGroup: string,
    workerId: string,
    fn: (r: WorkerFields) => void,
    create?: () => WorkerFields,
  ): Promise<WorkerRow> {
    const out = await guardedUpdate<WorkerRow>(
      this.workers,
      this.workerKey(taskQueueId, workerGroup, workerId),
      (row) => {
        if (!row && !create) throw notFound(`worker ${workerGroup}/${workerId} of task queue ${taskQueueId} not found`);
        const next: WorkerFields = row ? { ...row } : create!();
        fn(next);
        return next;
      },
      { what: `worker ${workerGroup}/${workerId}` },
    );
    return out.row!;
  }

  async quarantine(
    taskQueueId: string,
    workerGroup: string,
    workerId: string,
    quarantineUntil: string,
    quarantineInfo: string,
    clientId: string,
  ): Promise<WorkerRow> {
    const updatedAt = this.now().toJSON();
    this.seenCache.delete(`${taskQueueId}\n${workerGroup}~${workerId}`);
    return this.change(taskQueueId, workerGroup, workerId, (r) => {
      const details: QuarantineDetail[] = JSON.parse(r.quarantineDetails || '[]');
      details.push({ clientId, updatedAt, quarantineUntil, quarantineInfo });
      r.quarantineUntil = quarantineUntil;
      r.quarantineDetails = JSON.stringify(details.slice(-MAX_QUARANTINE_DETAILS));
    });
  }

  /**
   * declareWorker: creates the worker or updates its expiry (never its quarantine), and extends the
   * task queue's expiry (and so its worker type's and provisioner's) to at least `expires`.
   */
  async declare(taskQueueId: string, workerGroup: string, workerId: string, expires: string): Promise<WorkerRow> {
    const now = this.now().toJSON();
    const row = await this.change(
      taskQueueId,
      workerGroup,
      workerId,
      (r) => {
        r.expires = expires;
        r.lastDateActive = now;
      },
      () => this.fresh(taskQueueId, workerGroup, workerId, expires),
    );
    await this.declareQueue(taskQueueId, { expires });
    return row;
  }

  /** A worker as getWorker shows it: 404 once expired, unless quarantined. */
  async describe(taskQueueId: string, workerGroup: string, workerId: string) {
    const row = await this.getRow(taskQueueId, workerGroup, workerId);
    if (!row || (Date.parse(row.expires) < this.now().getTime() && !this.isQuarantined(row))) {
      throw notFound(`worker ${workerGroup}/${workerId} of task queue ${taskQueueId} not found`);
    }
    return this.response(row, withRuns(recentOf(row), this.waitingRecent(taskQueueId, workerGroup, workerId)));
  }

  response(row: WorkerRow, recentTasks: { taskId: string; runId: number }[]) {
    const details: QuarantineDetail[] = JSON.parse(row.quarantineDetails || '[]');
    return {
      ...splitQueue(row.taskQueueId),
      taskQueueId: row.taskQueueId,
      workerGroup: row.workerGroup,
      workerId: row.workerId,
      recentTasks,
      expires: row.expires,
      firstClaim: row.firstClaim,
      lastDateActive: row.lastDateActive,
      ...(row.quarantineUntil ? { quarantineUntil: row.quarantineUntil } : {}),
      ...(details.length ? { quarantineDetails: details } : {}),
      actions: [] as unknown[],
    };
  }

  /** listWorkers: live or quarantined workers of a queue, each with its latest claim. */
  async list(taskQueueId: string, quarantined: boolean | undefined, limit: number, continuation?: string) {
    const now = this.now().toJSON();
    const where: Condition[] = [
      {
        or: [
          { prop: 'expires', op: 'gt', value: now },
          { prop: 'quarantineUntil', op: 'gt', value: now },
        ],
      },
    ];
    if (quarantined === true) where.push({ prop: 'quarantineUntil', op: 'gt', value: now });
    if (quarantined === false) where.push({ prop: 'quarantineUntil', op: 'le', value: now });
    const page = await readPage<WorkerRow>(this.workers, { partitionKey: encodeKey(taskQueueId), where }, limit, continuation);
    const workers = page.items.map((w) => {
      const waiting = this.waitingRecent(taskQueueId, w.workerGroup, w.workerId);
      const latest = waiting.length ? waiting[waiting.length - 1] : recentOf(w).slice(-1)[0];
      return {
        workerGroup: w.workerGroup,
        workerId: w.workerId,
        firstClaim: w.firstClaim,
        lastDateActive: w.lastDateActive,
        ...(this.isQuarantined(w) ? { quarantineUntil: w.quarantineUntil } : {}),
        ...(latest ? { latestTask: { taskId: latest.taskId, runId: latest.runId } } : {}),
      };
    });
    return { workers, continuation: page.continuation };
  }

  // ---- task queues ----

  /** Creates or refreshes a task queue's row, at most once per SEEN_INTERVAL_MS (ETag-guarded). */
  async queueSeen(taskQueueId: string): Promise<void> {
    const now = this.now();
    // Seen recently, by another instance too (a lost race is decided again and finds it so): no write.
    await this.writeQueue(taskQueueId, (row) =>
      row && Date.parse(row.lastDateActive as string) > now.getTime() - SEEN_INTERVAL_MS
        ? UNCHANGED
        : { lastDateActive: now.toJSON(), expires: plus(now, QUEUE_EXPIRY_MS) },
    );
  }

  /**
   * Merges what `decide` answers into the task queue's row, under its ETag; a missing row is
   * created with the defaults. `expires` never moves back.
   */
  private async writeQueue(taskQueueId: string, decide: (row: StoredEntity | undefined) => Record<string, unknown> | typeof UNCHANGED): Promise<void> {
    await guardedUpdate(
      this.queues,
      { partitionKey: encodeKey(taskQueueId), rowKey: META_RK },
      (row) => {
        const fields = decide(row);
        if (fields === UNCHANGED) return UNCHANGED;
        if (typeof fields.expires === 'string') fields.expires = later((row?.expires as string) ?? '', fields.expires);
        return row ? fields : { taskQueueId, description: '', stability: 'experimental', ...fields };
      },
      { what: `task queue ${taskQueueId}`, mode: 'merge' },
    );
  }

  /**
   * declareWorkerType / declareWorker: creates the task queue or updates it (Taskcluster's
   * task_queue_seen): description and stability when given, lastDateActive now, and expires the
   * later of the stored value and `expires` (default: QUEUE_EXPIRY_MS from now). Always writes.
   */
  async declareQueue(taskQueueId: string, set: { expires?: string; description?: string; stability?: QueueInfo['stability'] }): Promise<void> {
    const now = this.now();
    const fields: Record<string, unknown> = { lastDateActive: now.toJSON(), expires: set.expires ?? plus(now, QUEUE_EXPIRY_MS) };
    if (set.description !== undefined) fields.description = set.description;
    if (set.stability !== undefined) fields.stability = set.stability;
    await this.writeQueue(taskQueueId, () => ({ ...fields }));
  }

  /**
   * Every live task queue, sorted by id: from meta rows and from the pending-queue rows createTask
   * writes. The TaskQueues table holds at most 8 small rows per queue, so this reads ~125 queues
   * per storage call.
   */
  async allQueues(prefix?: string): Promise<QueueInfo[]> {
    const byPk = new Map<string, { taskQueueId?: string; meta?: StoredEntity; touched: string }>();
    const query: Query = prefix ? { partitionKey: { ge: prefix, lt: prefix + '~' } } : {};
    for await (const r of rows(this.queues, query)) {
      const e = byPk.get(r.partitionKey) ?? { touched: '' };
      if (typeof r.taskQueueId === 'string') e.taskQueueId = r.taskQueueId;
      if (r.rowKey === META_RK) e.meta = r;
      else e.touched = later(e.touched, new Date(String(r.timestamp ?? 0)).toJSON());
      byPk.set(r.partitionKey, e);
    }
    const now = this.now();
    const out: QueueInfo[] = [];
    for (const e of byPk.values()) {
      if (!e.taskQueueId) continue;
      const lastDateActive = later((e.meta?.lastDateActive as string) ?? '', e.touched);
      const expires = later((e.meta?.expires as string) ?? '', e.touched ? plus(new Date(e.touched), QUEUE_EXPIRY_MS) : '');
      if (Date.parse(expires) < now.getTime()) continue;
      out.push({
        taskQueueId: e.taskQueueId,
        ...splitQueue(e.taskQueueId),
        description: (e.meta?.description as string) ?? '',
        stability: (e.meta?.stability as QueueInfo['stability']) ?? 'experimental',
        expires,
        lastDateActive,
      });
    }
    return out.sort((a, b) => (a.taskQueueId < b.taskQueueId ? -1 : a.taskQueueId > b.taskQueueId ? 1 : 0));
  }

  async queue(taskQueueId: string): Promise<QueueInfo> {
    const q = (await this.allQueues(encodeKey(taskQueueId))).find((x) => x.taskQueueId === taskQueueId);
    if (!q) throw notFound(`task queue ${taskQueueId} not found`);
    return q;
  }
}
