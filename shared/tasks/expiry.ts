/**
 * Expiration without table scans. Every record that expires gets one row in a day-bucketed index,
 * written when the record is created (a task's, when its deadline's row is swept: shared/tasks/task-expiry.ts):
 *   PartitionKey = `<UTC day of expires (yyyy-mm-dd)>~<bucket>`, RowKey = `<expires ISO>~<kind>~<id>`.
 * Because the RowKey starts with the instant, one query `PartitionKey le <today>~~ and RowKey lt
 * <now>` returns exactly the rows that are due (every row of a past day, and today's rows up to
 * now), so a sweep costs one query per page plus the deletes of what actually expired. The bucket
 * spreads a day's writes over EXPIRY_BUCKETS partitions (one partition takes about 2,000
 * entities/s): an expiry's is a hash of the id, or of what rows recorded together share; a
 * trigger's is the instance's turn (`laneBucket`), so the triggers of the moment share a write.
 */
import { createHash, randomInt } from 'node:crypto';
import { Lingering } from '../lingering';
import { Entity, MAX_TRANSACTION_ACTIONS, Storage, StorageConflict, TableAction, allRows, deleteRows } from '../storage/storage';

/** Partitions per day: 8 × 2,000 entities/s carries 8,000 task creations/s (2 rows each) per day. */
export const EXPIRY_BUCKETS = 8;
/**
 * The partition prefix of rows that are triggers, not expiries (a task's deadline, a run's claim
 * expiry): a lane of their own, swept first with a budget of its own (`dueTriggers`), so a backlog
 * of expiries never holds a lapsed claim up. 't' sorts after every day, so the expiries' query
 * (`PartitionKey le <today>~~`) never reads them.
 */
export const TRIGGER_LANE = 't~';

/**
 * The triggers' lane moves its turn to the next bucket after a transaction's worth of rows (the
 * next row would need a write of its own anyway), so a busy instance spreads its triggers over
 * every bucket and one partition never takes more than its share.
 */
const LANE_TURN_ROWS = MAX_TRANSACTION_ACTIONS;
/**
 * …and, once its bucket has no write waiting or in flight, after this long: rows of separate
 * moments spread over the buckets too, as a hash would spread them.
 */
const LANE_TURN_MS = 100;

/**
 * How long a partition's first queued delete (`forget`: a run's claim-expiry row once the run
 * ended) waits for others to share its transaction. Nobody waits for these deletes (a lost one
 * costs a task read when its row comes due), so the linger costs no request time; under load the
 * reports of a linger share one transaction per partition instead of one each.
 */
export const FORGET_LINGER_MS = 50;

function bucket(of: string): number {
  return createHash('sha256').update(of).digest().readUInt32BE(0) % EXPIRY_BUCKETS;
}

export interface ExpiryRow {
  partitionKey: string;
  rowKey: string;
  kind: string;
  id: string;
  expires: string;
  /** What the kind's expirer needs even if the record itself is already gone. */
  data: Record<string, unknown>;
}

/** One row to record (`recordAll`); `bucketBy`: what decides its partition within the day (default the id). */
export interface ExpiryEntry {
  kind: string;
  id: string;
  expires: string;
  data?: Record<string, unknown>;
  bucketBy?: string;
}

/** A row waiting to go out with others of its day partition: written, or deleted (`forget`). */
interface Waiting {
  row: Entity;
  op: 'upsert' | 'delete';
  /** When it was queued (Date.now()): a delete goes out at most the linger later, plus one call. */
  at: number;
  done: (err?: unknown) => void;
}

export class ExpiryIndex {
  /** Rows waiting per day partition while a write to it is in flight or deletes linger (group commit). */
  private readonly waiting = new Map<string, Waiting[]>();
  private readonly busy = new Set<string>();
  /** Waiting deletes, woken early by a record, a full transaction or settled(). */
  private readonly lingering = new Lingering();
  /** The triggers' lane bucket this instance fills now (`laneBucket`); instances start apart. */
  private turn = { bucket: randomInt(EXPIRY_BUCKETS), since: Date.now(), rows: 0 };

  /** `lingerMs`: how long queued deletes wait for others (FORGET_LINGER_MS; 0: at once, a fixed call order for crash sweeps). */
  constructor(
    private readonly storage: Storage,
    private readonly lingerMs = FORGET_LINGER_MS,
  ) {}

  private get table() {
    return this.storage.table('Expiry');
  }

  /** An expiry's keys; `bucketBy`: what decides the partition within the day (default the id). */
  static keys(kind: string, id: string, expires: string, bucketBy = id): { partitionKey: string; rowKey: string } {
    return { partitionKey: `${expires.slice(0, 10)}~${bucket(bucketBy)}`, rowKey: `${expires}~${kind}~${id}` };
  }

  /**
   * A trigger's row (TRIGGER_LANE), due at `at`: group-committed as `record`'s rows are, in the
   * bucket of the instance's turn, so the triggers of concurrent requests (createTasks' deadlines,
   * claimWorks' claim expiries) share a transaction. Its keys are returned for the caller to keep
   * (a claim's row is deleted by them); a repeat may land in another bucket, and the copy fires
   * too and finds its work done (the reaper acts only if the row still matches the task).
   * `variant`: rows of one kind, id and instant whose data differ get a RowKey each
   * (`<at>~<kind>~<id>~<variant>`), so one never overwrites the other.
   */
  async recordTrigger(
    kind: string,
    id: string,
    at: string,
    data: Record<string, unknown>,
    opts: { variant?: string } = {},
  ): Promise<{ partitionKey: string; rowKey: string }> {
    const day = at.slice(0, 10);
    const keys = { partitionKey: `${TRIGGER_LANE}${day}~${this.laneBucket(day)}`, rowKey: `${at}~${kind}~${opts.variant ? `${id}~${opts.variant}` : id}` };
    await this.enqueue({ ...keys, kind, id, expires: at, data: JSON.stringify(data) }, 'upsert');
    return keys;
  }

  /**
   * The triggers' lane bucket of a row due on `day`: the turn's, while it has a write waiting or in
   * flight (the row then shares the next one), until the turn has had a transaction's worth of rows
   * (LANE_TURN_ROWS); an idle turn older than LANE_TURN_MS moves on too.
   */
  private laneBucket(day: string): number {
    const t = this.turn;
    const now = Date.now();
    const idle = !this.busy.has(`${TRIGGER_LANE}${day}~${t.bucket}`);
    if (t.rows >= LANE_TURN_ROWS || (idle && now - t.since >= LANE_TURN_MS)) this.turn = { bucket: (t.bucket + 1) % EXPIRY_BUCKETS, since: now, rows: 0 };
    this.turn.rows++;
    return this.turn.bucket;
  }

  /**
   * Records that `kind/id` expires at `expires` (an ISO date from `toJSON()`), and with it, in the
   * same write, that each of `also` does too: they share the partition of `bucketBy` (default the
   * id). Idempotent.
   */
  async record(
    kind: string,
    id: string,
    expires: string,
    data: Record<string, unknown> = {},
    also: { kind: string; id: string }[] = [],
    bucketBy = id,
  ): Promise<void> {
    await this.recordAll([{ kind, id, expires, data, bucketBy }, ...also.map((a) => ({ ...a, expires, bucketBy }))]);
  }

  /**
   * Records rows all in this turn, so the rows of one partition go out together (a sweep page's
   * task expiries: one transaction per day bucket); a row key given twice is written once (the
   * last given). Idempotent.
   */
  async recordAll(entries: ExpiryEntry[]): Promise<void> {
    const rows = new Map<string, Entity>();
    for (const e of entries) {
      const keys = ExpiryIndex.keys(e.kind, e.id, e.expires, e.bucketBy ?? e.id);
      rows.set(`${keys.partitionKey}\n${keys.rowKey}`, { ...keys, kind: e.kind, id: e.id, expires: e.expires, data: JSON.stringify(e.data ?? {}) });
    }
    await Promise.all([...rows.values()].map((row) => this.enqueue(row, 'upsert')));
  }

  /**
   * Deletes a row no longer needed before it is due (a claim expiry whose run ended). It lingers
   * (FORGET_LINGER_MS) for the deletes of other reports, then they go out together, one transaction
   * per partition; resolves once it is gone (nobody needs to wait: see Triggers.drop). A row already gone is fine.
   */
  async forget(row: { partitionKey: string; rowKey: string }): Promise<void> {
    await this.enqueue({ partitionKey: row.partitionKey, rowKey: row.rowKey }, 'delete');
  }

  /**
   * Resolves once every write queued before the call has gone out or failed; lingering deletes go
   * out at once. Closing the app calls it (a queued delete is not lost on a clean shutdown), and tests.
   */
  settled(): Promise<void> {
    return this.lingering.settled();
  }

  private enqueue(row: Entity, op: Waiting['op']): Promise<void> {
    const pk = row.partitionKey;
    const list = this.waiting.get(pk) ?? [];
    const stored = new Promise<void>((resolve, reject) => {
      list.push({ row, op, at: Date.now(), done: (err) => (err === undefined ? resolve() : reject(err)) });
    });
    this.waiting.set(pk, list);
    if (!this.busy.has(pk)) {
      // Started after this turn: rows recorded in the same turn (a createTask's deadline row and
      // others'; a claimWork batch's claim rows) go out in one write.
      this.busy.add(pk);
      queueMicrotask(() => void this.drain(pk));
    } else if (this.lingerFor(list) <= 0) this.lingering.wake(pk);
    this.lingering.track(stored);
    return stored;
  }

  /**
   * How much longer a partition's queue may wait: only deletes linger. A record is on a request's
   * path (it precedes the task row): it goes at once, and takes the lingering deletes along; so do
   * a full transaction's worth and settled().
   */
  private lingerFor(list: Waiting[]): number {
    if (this.lingering.hurried || list.length >= MAX_TRANSACTION_ACTIONS || list.some((w) => w.op === 'upsert')) return 0;
    return list[0].at + this.lingerMs - Date.now();
  }

  /**
   * Group commit: a lone record goes out at once (after the turn that recorded it); rows of
   * concurrent createTasks that expire the same day wait for the write in flight and then go out
   * together, one transaction for up to 100, so under load the index costs a fraction of a call
   * per task. Deletes linger first (`lingerFor`). Each resolves once its row is stored.
   */
  private async drain(pk: string): Promise<void> {
    this.busy.add(pk);
    try {
      for (let list = this.waiting.get(pk); list?.length; list = this.waiting.get(pk)) {
        const wait = this.lingerFor(list);
        if (wait > 0) {
          await this.lingering.wait(pk, wait);
          continue;
        }
        const group: Waiting[] = [];
        const keys = new Set<string>();
        while (list.length && group.length < MAX_TRANSACTION_ACTIONS && !keys.has(list[0].row.rowKey)) {
          keys.add(list[0].row.rowKey);
          group.push(list.shift()!);
        }
        if (!list.length) this.waiting.delete(pk);
        try {
          await this.write(group);
          for (const w of group) w.done();
        } catch (err) {
          for (const w of group) w.done(err);
        }
      }
    } finally {
      this.busy.delete(pk);
    }
  }

  /**
   * One group's write: a single call for one row, else a transaction. A transaction fails whole when
   * one of its deletes finds its row gone (the sweep took it, or a repeat): the group is then
   * written row by row, which ignores missing rows.
   */
  private async write(group: Waiting[]): Promise<void> {
    const one = (w: Waiting) => (w.op === 'upsert' ? this.table.upsert(w.row) : this.table.delete(w.row.partitionKey, w.row.rowKey));
    if (group.length === 1) return void (await one(group[0]));
    const actions = group.map((w): TableAction =>
      w.op === 'upsert' ? { op: 'upsert', entity: w.row } : { op: 'delete', partitionKey: w.row.partitionKey, rowKey: w.row.rowKey },
    );
    try {
      await this.table.transact(actions);
    } catch (err) {
      if (!(err instanceof StorageConflict) || group.every((w) => w.op === 'upsert')) throw err;
      await Promise.all(group.map(one));
    }
  }

  /** Up to `limit` expiry rows whose `expires` is before `now`, oldest first (triggers apart: `dueTriggers`). */
  due(now: Date, limit: number): Promise<ExpiryRow[]> {
    return this.dueIn('', now, limit);
  }

  /** Up to `limit` trigger rows (TRIGGER_LANE) due before `now`, oldest first. */
  dueTriggers(now: Date, limit: number): Promise<ExpiryRow[]> {
    return this.dueIn(TRIGGER_LANE, now, limit);
  }

  private async dueIn(lane: string, now: Date, limit: number): Promise<ExpiryRow[]> {
    const iso = now.toJSON();
    // `~~` sorts after every bucket of today; a lane's days sort after ''s (`ge` keeps the expiries' query off the triggers' lane).
    // Every bucket is a partition, so a page ends at each bucket's end: read on to `limit`.
    const partitionKey = lane ? { ge: lane, le: `${lane}${iso.slice(0, 10)}~~` } : { le: `${iso.slice(0, 10)}~~` };
    const due = await allRows(this.table, { partitionKey, rowKey: { lt: iso } }, { max: limit });
    return due.map((r) => ({
      partitionKey: r.partitionKey,
      rowKey: r.rowKey,
      kind: r.kind as string,
      id: r.id as string,
      expires: r.expires as string,
      data: JSON.parse((r.data as string) || '{}'),
    }));
  }

  async remove(row: { partitionKey: string; rowKey: string }): Promise<void> {
    await this.table.delete(row.partitionKey, row.rowKey);
  }

  /** Removes rows done with, one transaction per day partition (and 100 rows). */
  async removeAll(rows: { partitionKey: string; rowKey: string }[]): Promise<void> {
    const byDay = new Map<string, string[]>();
    for (const r of rows) byDay.set(r.partitionKey, [...(byDay.get(r.partitionKey) ?? []), r.rowKey]);
    await Promise.all([...byDay].map(([pk, keys]) => deleteRows(this.table, pk, keys)));
  }
}
