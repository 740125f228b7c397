/**
 * Expiration without table scans. Every record that expires gets one row, written when the record
 * is created, in a table of its own UTC day of `expires` (`Expiry<yyyymmdd>`):
 *   PartitionKey = the day (yyyy-mm-dd), RowKey = `<expires ISO>~<kind>~<id>`.
 * A sweep reads only the tables of days up to today, with `RowKey lt <now>`: exactly the rows that
 * are due. One table per day (rather than one table with day partitions) keeps that query's cost
 * independent of how many records wait for later days: Azurite answers every query by scanning its
 * whole table. A past day's table, once empty, is deleted and the sweep's cursor moves past it.
 * So an idle sweep is one query (today's table) plus, once per day, the retiring of the day before,
 * and an instance's first sweep reads the cursor.
 */
import type { Storage, Table } from '../storage/storage';

export interface ExpiryRow {
  partitionKey: string;
  rowKey: string;
  kind: string;
  id: string;
  expires: string;
  /** What the kind's expirer needs even if the record itself is already gone. */
  data: Record<string, unknown>;
  /** The day whose table holds the row. */
  table: string;
}

const DAY_MS = 24 * 3600 * 1000;
/** A day's table is retired only this long after the day ended, so writers with a slow clock or a late write never hit a retired table. */
const RETIRE_AFTER_MS = 3600 * 1000;
/** Where the sweep's cursor (the oldest day whose table may still hold rows) is kept. */
const CURSOR = { partitionKey: 'reaper', rowKey: 'expiry-cursor' } as const;

const dayOf = (iso: string): string => iso.slice(0, 10);
const nextDay = (day: string): string => new Date(Date.parse(`${day}T00:00:00Z`) + DAY_MS).toJSON().slice(0, 10);
const statusOf = (err: unknown): number | undefined => (err as { statusCode?: number })?.statusCode;

export class ExpiryIndex {
  /** Day tables this instance knows exist. */
  private readonly created = new Set<string>();
  /** The oldest day that may still hold rows; read from storage on the first sweep. */
  private cursor: string | undefined;

  constructor(
    private readonly storage: Storage,
    private readonly now: () => Date = () => new Date(),
  ) {}

  private table(day: string): Table {
    return this.storage.table('Expiry', day.replace(/-/g, ''));
  }

  static keys(kind: string, id: string, expires: string): { partitionKey: string; rowKey: string } {
    return { partitionKey: dayOf(expires), rowKey: `${expires}~${kind}~${id}` };
  }

  /** The day table a row for `expires` goes to: its own day, or today's if that day has passed (its table may be retired). */
  tableDay(expires: string): string {
    const today = dayOf(this.now().toJSON());
    const day = dayOf(expires);
    return day < today ? today : day;
  }

  /** Records that `kind/id` expires at `expires` (an ISO date from `toJSON()`). Idempotent. */
  async record(kind: string, id: string, expires: string, data: Record<string, unknown> = {}): Promise<void> {
    const day = this.tableDay(expires);
    const row = { ...ExpiryIndex.keys(kind, id, expires), kind, id, expires, data: JSON.stringify(data) };
    const table = this.table(day);
    try {
      await table.upsert(row);
    } catch (err) {
      if (statusOf(err) !== 404 || this.created.has(day)) throw err;
      // The first row of that day: create its table, then write again.
      await table.create();
      this.created.add(day);
      await table.upsert(row);
    }
  }

  /** Up to `limit` rows whose `expires` is before `now`, oldest day first. */
  async due(now: Date, limit: number): Promise<ExpiryRow[]> {
    const iso = now.toJSON();
    const today = dayOf(iso);
    if (this.cursor === undefined) {
      // Once per instance. A new deployment starts today: rows for earlier days go to today's table.
      const stored = await this.storage.table('Indexes').get(CURSOR.partitionKey, CURSOR.rowKey);
      this.cursor = (stored?.day as string | undefined) ?? today;
      if (!stored) await this.storage.table('Indexes').upsert({ ...CURSOR, day: today });
    }
    if (!this.created.has(today)) {
      // Once per day per instance: today's table exists, so the sweep's query finds it (a query of a missing table fails).
      await this.table(today).create();
      this.created.add(today);
    }
    const out: ExpiryRow[] = [];
    for (let day = this.cursor; day <= today && out.length < limit; day = nextDay(day)) {
      const rows = await this.page(day, iso, limit - out.length);
      out.push(...rows);
      const ended = Date.parse(`${day}T00:00:00Z`) + DAY_MS + RETIRE_AFTER_MS;
      if (rows.length === 0 && day === this.cursor && now.getTime() > ended) {
        // Empty and long past: retire its table and move the cursor on (stored, so other instances and restarts skip it too).
        await this.table(day).drop();
        this.cursor = nextDay(day);
        await this.storage.table('Indexes').upsert({ ...CURSOR, day: this.cursor });
      }
    }
    return out;
  }

  private async page(day: string, iso: string, limit: number): Promise<ExpiryRow[]> {
    try {
      const page = await this.table(day).page({ rowKey: { lt: iso } }, limit);
      return page.items.map((r) => ({
        partitionKey: r.partitionKey,
        rowKey: r.rowKey,
        kind: r.kind as string,
        id: r.id as string,
        expires: r.expires as string,
        data: JSON.parse((r.data as string) || '{}'),
        table: day,
      }));
    } catch (err) {
      if (statusOf(err) === 404) return []; // no record ever expired that day
      throw err;
    }
  }

  async remove(row: { partitionKey: string; rowKey: string; table: string }): Promise<void> {
    await this.table(row.table).delete(row.partitionKey, row.rowKey);
  }
}
