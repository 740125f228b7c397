/**
 * Expiration without table scans. Every record that expires gets one row in a day-bucketed index,
 * written when the record is created:
 *   PartitionKey = `<UTC day of expires (yyyy-mm-dd)>~<bucket>`, RowKey = `<expires ISO>~<kind>~<id>`.
 * Because the RowKey starts with the instant, one query `PartitionKey le <today>~~ and RowKey lt
 * <now>` returns exactly the rows that are due (every row of a past day, and today's rows up to
 * now), so a sweep costs one query per page plus the deletes of what actually expired. The bucket
 * (a hash of the id, or of what rows recorded together share) spreads a day's writes over
 * EXPIRY_BUCKETS partitions: one partition takes about 2,000 entities/s.
 */
import { createHash } from 'node:crypto';
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

/** A row waiting to go out with others of its day partition: written, or deleted (`forget`). */
interface Waiting {
  row: Entity;
  op: 'upsert' | 'delete';
  done: (err?: unknown) => void;
}

export class ExpiryIndex {
  /** Rows waiting per day partition while a write to it is in flight (group commit). */
  private readonly waiting = new Map<string, Waiting[]>();
  private readonly busy = new Set<string>();

  constructor(private readonly storage: Storage) {}

  private get table() {
    return this.storage.table('Expiry');
  }

  /** `bucketBy`: what decides the partition within the day (default the id); `lane`: '' or TRIGGER_LANE. */
  static keys(kind: string, id: string, expires: string, bucketBy = id, lane = ''): { partitionKey: string; rowKey: string } {
    return { partitionKey: `${lane}${expires.slice(0, 10)}~${bucket(bucketBy)}`, rowKey: `${expires}~${kind}~${id}` };
  }

  /** A trigger's row (TRIGGER_LANE), due at `at`: group-committed as `record`'s rows are. */
  async recordTrigger(kind: string, id: string, at: string, data: Record<string, unknown>, bucketBy = id): Promise<{ partitionKey: string; rowKey: string }> {
    const keys = ExpiryIndex.keys(kind, id, at, bucketBy, TRIGGER_LANE);
    await this.enqueue({ ...keys, kind, id, expires: at, data: JSON.stringify(data) }, 'upsert');
    return keys;
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
    const rows = [{ kind, id, data }, ...also.map((a) => ({ ...a, data: {} }))].map((r) => ({
      ...ExpiryIndex.keys(r.kind, r.id, expires, bucketBy),
      kind: r.kind,
      id: r.id,
      expires,
      data: JSON.stringify(r.data),
    }));
    await Promise.all(rows.map((row) => this.enqueue(row, 'upsert')));
  }

  /**
   * Deletes a row no longer needed before it is due (a claim expiry whose run ended), group-committed
   * as `record` is: the reports of one batch go out together. A row already gone is fine.
   */
  async forget(row: { partitionKey: string; rowKey: string }): Promise<void> {
    await this.enqueue({ partitionKey: row.partitionKey, rowKey: row.rowKey }, 'delete');
  }

  private enqueue(row: Entity, op: Waiting['op']): Promise<void> {
    const pk = row.partitionKey;
    const list = this.waiting.get(pk) ?? [];
    const stored = new Promise<void>((resolve, reject) => {
      list.push({ row, op, done: (err) => (err === undefined ? resolve() : reject(err)) });
    });
    this.waiting.set(pk, list);
    if (!this.busy.has(pk)) {
      // Started after this turn: rows recorded in the same turn (a createTask's task and group
      // rows; a claimWork batch's claim rows) go out in one write.
      this.busy.add(pk);
      queueMicrotask(() => void this.drain(pk));
    }
    return stored;
  }

  /**
   * Group commit: a lone row goes out at once (after the turn that recorded it); rows of concurrent
   * createTasks that expire the same day wait for the write in flight and then go out together, one transaction for up to 100, so
   * under load the index costs a fraction of a call per task. Each resolves once its row is stored.
   */
  private async drain(pk: string): Promise<void> {
    this.busy.add(pk);
    try {
      for (let list = this.waiting.get(pk); list?.length; list = this.waiting.get(pk)) {
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
