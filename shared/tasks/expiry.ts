/**
 * Expiration without table scans. Every record that expires gets one row in a day-bucketed index,
 * written when the record is created:
 *   PartitionKey = UTC day of `expires` (yyyy-mm-dd), RowKey = `<expires ISO>~<kind>~<id>`.
 * Because the RowKey starts with the instant, one query `PartitionKey le <today> and RowKey lt
 * <now>` returns exactly the rows that are due (every row of a past day, and today's rows up to
 * now), so a sweep costs one query per page plus the deletes of what actually expired.
 */
import { MAX_TRANSACTION_ACTIONS, Storage, StorageConflict } from '../storage/storage';

export interface ExpiryRow {
  partitionKey: string;
  rowKey: string;
  kind: string;
  id: string;
  expires: string;
  /** What the kind's expirer needs even if the record itself is already gone. */
  data: Record<string, unknown>;
}

export class ExpiryIndex {
  constructor(private readonly storage: Storage) {}

  private get table() {
    return this.storage.table('Expiry');
  }

  static keys(kind: string, id: string, expires: string): { partitionKey: string; rowKey: string } {
    return { partitionKey: expires.slice(0, 10), rowKey: `${expires}~${kind}~${id}` };
  }

  /** Records that `kind/id` expires at `expires` (an ISO date from `toJSON()`). Idempotent. */
  async record(kind: string, id: string, expires: string, data: Record<string, unknown> = {}): Promise<void> {
    await this.table.upsert({ ...ExpiryIndex.keys(kind, id, expires), kind, id, expires, data: JSON.stringify(data) });
  }

  /** Up to `limit` rows whose `expires` is before `now`, oldest first. */
  async due(now: Date, limit: number): Promise<ExpiryRow[]> {
    const iso = now.toJSON();
    const page = await this.table.page({ partitionKey: { le: iso.slice(0, 10) }, rowKey: { lt: iso } }, limit);
    return page.items.map((r) => ({
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
    await Promise.all(
      [...byDay].map(async ([pk, keys]) => {
        for (let i = 0; i < keys.length; i += MAX_TRANSACTION_ACTIONS) {
          const chunk = keys.slice(i, i + MAX_TRANSACTION_ACTIONS);
          try {
            if (chunk.length === 1) await this.table.delete(pk, chunk[0]);
            else await this.table.transact(chunk.map((rk) => ({ op: 'delete', partitionKey: pk, rowKey: rk })));
          } catch (err) {
            // Another sweeper removed one first: the rest one by one.
            if (!(err instanceof StorageConflict)) throw err;
            for (const rk of chunk) await this.table.delete(pk, rk);
          }
        }
      }),
    );
  }
}
