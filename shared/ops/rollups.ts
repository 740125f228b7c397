/**
 * Per-minute rollups of each task queue (and of all of them) for the dashboard's charts: how many
 * runs became pending and running and left those states, how long runs waited (scheduled → started,
 * as a histogram, so instances' minutes add up), and resolutions by state.
 *
 * Cheap by construction: each instance tallies the transitions it writes in memory (each task
 * write's plan carries its tally, shared/ops/read-models.ts) and upserts one row per task queue and minute, plus one for all task
 * queues, once the minute is over (ROLLUP_FLUSH_MS). Nothing is written per task write. A row is
 * keyed by minute and instance, so a repeated flush replaces the same row (correct when an earlier
 * attempt already succeeded) and instances never contend. Table `Rollups`:
 *
 *   partition `q~<taskQueueId>` (or `all`), row `<minute ISO>~<instance>`:
 *     pendingIn, pendingOut, runningIn, runningOut, completed, failed, exception, waitN, waitSumMs,
 *     w0..w<n> (wait-time histogram over WAIT_BOUNDS_MS)
 *
 * A chart reads one partition range (paged to the end). Pending and running over time come from the
 * current exact counts (shared/ops/indexes.ts) minus the later minutes' net changes.
 */
import crypto from 'node:crypto';
import type { Logger } from '../log';
import { Entity, Storage, deleteRows, rowBatches, rows } from '../storage/storage';
import { encodeKey } from '../storage/keys';
import type { TaskRecord } from '../tasks/model';
import type { HistoryEntry } from './history';

/** One minute, the rollups' resolution. */
export const ROLLUP_MINUTE_MS = 60_000;
/** How often completed minutes go out (at most one upsert per task queue and minute). */
export const ROLLUP_FLUSH_MS = ROLLUP_MINUTE_MS;
/** Rows are kept for the longest chart (24 h) plus an hour. */
export const ROLLUP_KEEP_MS = 25 * 3600_000;
/** Each instance deletes a partition's expired rows at most this often. */
export const ROLLUP_PRUNE_EVERY_MS = 3600_000;
/** The partition of all task queues together. */
export const ALL_PK = 'all';
/** Table pages hold at most 1000 rows. */
const PAGE = 1000;

/**
 * Upper bounds (ms) of the wait-time histogram's buckets; the last bucket holds longer waits.
 * Roughly ×2 steps, so a percentile read from it is off by less than one step.
 */
export const WAIT_BOUNDS_MS = [
  100, 250, 500, 1000, 2000, 5000, 10_000, 20_000, 30_000, 60_000, 120_000, 300_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000, 14_400_000,
  28_800_000, 86_400_000,
];

const RESOLVED = ['completed', 'failed', 'exception'] as const;
type Resolved = (typeof RESOLVED)[number];

export interface MinuteTally {
  pendingIn: number;
  pendingOut: number;
  runningIn: number;
  runningOut: number;
  completed: number;
  failed: number;
  exception: number;
  waitN: number;
  waitSumMs: number;
  /** Counts per WAIT_BOUNDS_MS bucket (one more than bounds). */
  w: number[];
}

export function emptyTally(): MinuteTally {
  return {
    pendingIn: 0,
    pendingOut: 0,
    runningIn: 0,
    runningOut: 0,
    completed: 0,
    failed: 0,
    exception: 0,
    waitN: 0,
    waitSumMs: 0,
    w: new Array(WAIT_BOUNDS_MS.length + 1).fill(0),
  };
}

export function rollupPk(taskQueueId: string | undefined): string {
  return taskQueueId === undefined ? ALL_PK : `q~${encodeKey(taskQueueId)}`;
}

/** The minute containing `t`, as the ISO string that starts row keys (sorts by time). */
export function minuteKey(t: number): string {
  return new Date(Math.floor(t / ROLLUP_MINUTE_MS) * ROLLUP_MINUTE_MS).toJSON();
}

function waitBucket(ms: number): number {
  const i = WAIT_BOUNDS_MS.findIndex((b) => ms <= b);
  return i === -1 ? WAIT_BOUNDS_MS.length : i;
}

/** What one task write changed, per tally field: from its history entries (each run's change of state; a reclaim changes none). */
export function transitionTally(entries: Pick<HistoryEntry, 'runId' | 'from' | 'to'>[], after: TaskRecord): MinuteTally | undefined {
  const t = emptyTally();
  let any = false;
  for (const e of entries) {
    if (e.runId === undefined || e.from === e.to) continue;
    any = true;
    if (e.from === 'pending') t.pendingOut++;
    if (e.from === 'running') t.runningOut++;
    if (e.to === 'pending') t.pendingIn++;
    if (e.to === 'running') {
      t.runningIn++;
      const r = after.runs[e.runId];
      if (r?.started) {
        const wait = Math.max(0, Date.parse(r.started) - Date.parse(r.scheduled));
        t.waitN++;
        t.waitSumMs += wait;
        t.w[waitBucket(wait)]++;
      }
    }
    if ((RESOLVED as readonly string[]).includes(e.to)) t[e.to as Resolved]++;
  }
  return any ? t : undefined;
}

function add(into: MinuteTally, t: MinuteTally): void {
  for (const k of ['pendingIn', 'pendingOut', 'runningIn', 'runningOut', 'completed', 'failed', 'exception', 'waitN', 'waitSumMs'] as const) into[k] += t[k];
  t.w.forEach((n, i) => (into.w[i] += n));
}

/** The row of one instance's minute (tests seed charts with it). */
export function rollupEntity(pk: string, minute: string, instance: string, t: MinuteTally): Entity {
  const e: Entity = { partitionKey: pk, rowKey: `${minute}~${instance}` };
  for (const [k, v] of Object.entries(t)) if (k !== 'w') e[k] = v;
  t.w.forEach((n, i) => {
    if (n) e[`w${i}`] = n;
  });
  return e;
}

function fromEntity(e: Record<string, unknown>): MinuteTally {
  const t = emptyTally();
  for (const k of ['pendingIn', 'pendingOut', 'runningIn', 'runningOut', 'completed', 'failed', 'exception', 'waitN', 'waitSumMs'] as const)
    t[k] = Number(e[k] ?? 0);
  t.w = t.w.map((_, i) => Number(e[`w${i}`] ?? 0));
  return t;
}

/**
 * This instance's tallies, by minute and partition, until flushed. The current minute is kept
 * (and re-flushed whole) until it is over; earlier minutes are dropped once written.
 */
export class Rollups {
  private readonly minutes = new Map<string, Map<string, MinuteTally>>();
  private readonly pruned = new Map<string, number>();
  private flushing: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;
  /** This process's row-key suffix: instances never write each other's rows. */
  readonly instance = crypto.randomBytes(6).toString('base64url');

  constructor(
    private readonly storage: Storage,
    /** The clock that assigns tallies to minutes (tests set it). */
    public now: () => Date,
    private readonly warn: Logger['warn'] = () => {},
    private readonly flushMs = ROLLUP_FLUSH_MS,
  ) {}

  /** Adds a task write's tally (its plan's, shared/lifecycle/planner.ts) to the current minute. */
  add(taskQueueId: string, t: MinuteTally): void {
    const minute = minuteKey(this.now().getTime());
    let m = this.minutes.get(minute);
    if (!m) this.minutes.set(minute, (m = new Map()));
    for (const pk of [rollupPk(taskQueueId), ALL_PK]) {
      let into = m.get(pk);
      if (!into) m.set(pk, (into = emptyTally()));
      add(into, t);
    }
  }

  /** Flushes every `flushMs` (not keeping the process alive; 0: never by itself). */
  start(): void {
    if (!this.flushMs) return;
    this.timer ??= setInterval(() => void this.flush(), this.flushMs);
    this.timer.unref();
  }

  /** Stops the timer and writes everything, the current minute too. */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.flush(true);
  }

  /**
   * Writes the minutes that are over (with `current`, the running minute too, which is written
   * again, whole, later): one upsert per partition and minute. Failures are logged and retried
   * at the next flush. Flushes run one at a time.
   */
  flush(current = false): Promise<void> {
    const run = this.flushing.then(() => this.flushNow(current));
    this.flushing = run.catch(() => undefined);
    return run;
  }

  private async flushNow(current: boolean): Promise<void> {
    const nowMs = this.now().getTime();
    const thisMinute = minuteKey(nowMs);
    const table = this.storage.table('Rollups');
    for (const [minute, parts] of [...this.minutes].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const over = minute < thisMinute;
      if (!over && !current) continue;
      // Writes that kept failing for longer than a chart looks back are dropped, not kept forever.
      if (minute < minuteKey(nowMs - ROLLUP_KEEP_MS)) {
        this.minutes.delete(minute);
        continue;
      }
      const results = await Promise.allSettled([...parts].map(([pk, t]) => table.upsert(rollupEntity(pk, minute, this.instance, t))));
      const failed = results.find((r) => r.status === 'rejected') as PromiseRejectedResult | undefined;
      if (failed) {
        this.warn('rollup-write-failed', { minute, error: String((failed.reason as Error)?.message ?? failed.reason) });
        continue;
      }
      if (over) this.minutes.delete(minute);
      for (const pk of parts.keys()) await this.prune(pk, nowMs);
    }
  }

  /** Deletes a partition's rows older than ROLLUP_KEEP_MS, at most once per ROLLUP_PRUNE_EVERY_MS per instance. */
  private async prune(pk: string, nowMs: number): Promise<void> {
    const last = this.pruned.get(pk);
    if (last !== undefined && nowMs - last < ROLLUP_PRUNE_EVERY_MS) return;
    this.pruned.set(pk, nowMs);
    const table = this.storage.table('Rollups');
    try {
      const old = { partitionKey: pk, rowKey: { lt: minuteKey(nowMs - ROLLUP_KEEP_MS) }, select: ['RowKey'] };
      for await (const batch of rowBatches(table, old, PAGE))
        await deleteRows(
          table,
          pk,
          batch.map((r) => r.rowKey),
        );
    } catch (err) {
      this.warn('rollup-prune-failed', { partition: pk, error: String((err as Error)?.message ?? err) });
    }
  }
}

/** One minute of a chart. Wait percentiles are null in a minute where nothing started. */
export interface ChartMinute {
  minute: string;
  pending: number;
  running: number;
  completed: number;
  failed: number;
  exception: number;
  started: number;
  waitP50Ms: number | null;
  waitP95Ms: number | null;
}

/** The `q` quantile of a histogram: the upper bound of the bucket that holds it (the last bucket: its lower bound). */
export function histogramQuantile(w: number[], q: number): number | null {
  const n = w.reduce((a, b) => a + b, 0);
  if (!n) return null;
  const rank = Math.ceil(q * n);
  let seen = 0;
  for (let i = 0; i < w.length; i++) {
    seen += w[i];
    if (seen >= rank) return i < WAIT_BOUNDS_MS.length ? WAIT_BOUNDS_MS[i] : WAIT_BOUNDS_MS[WAIT_BOUNDS_MS.length - 1];
  }
  return null;
}

/**
 * A chart's minutes from `since` to now (every minute present, oldest first), from one partition
 * range read to its end. `current` holds the exact pending and running counts now; each earlier
 * minute's are those minus the net changes of the minutes after it (floored at 0).
 */
export async function readChart(
  storage: Storage,
  taskQueueId: string | undefined,
  since: Date,
  now: Date,
  current: { pending: number; running: number },
): Promise<ChartMinute[]> {
  const table = storage.table('Rollups');
  const byMinute = new Map<string, MinuteTally>();
  for await (const e of rows(table, { partitionKey: rollupPk(taskQueueId), rowKey: { ge: minuteKey(since.getTime()) } }, { pageSize: PAGE })) {
    const minute = e.rowKey.split('~')[0];
    let into = byMinute.get(minute);
    if (!into) byMinute.set(minute, (into = emptyTally()));
    add(into, fromEntity(e));
  }

  const out: ChartMinute[] = [];
  const first = Date.parse(minuteKey(since.getTime()));
  const last = Date.parse(minuteKey(now.getTime()));
  let pending = current.pending;
  let running = current.running;
  for (let t = last; t >= first; t -= ROLLUP_MINUTE_MS) {
    const minute = new Date(t).toJSON();
    const m = byMinute.get(minute) ?? emptyTally();
    out.push({
      minute,
      pending: Math.max(0, pending),
      running: Math.max(0, running),
      completed: m.completed,
      failed: m.failed,
      exception: m.exception,
      started: m.waitN,
      waitP50Ms: histogramQuantile(m.w, 0.5),
      waitP95Ms: histogramQuantile(m.w, 0.95),
    });
    // The counts at the end of the previous minute: undo this minute's changes.
    pending -= m.pendingIn - m.pendingOut;
    running -= m.runningIn - m.runningOut;
  }
  return out.reverse();
}
