/**
 * Tables that page as Azure may: before every page of rows, an empty page that carries a
 * continuation (a query that ran out of its time slice), and optionally short pages. A reader that
 * takes one page as the whole answer sees nothing through them.
 */
import type { Entity, Page, Query, Storage, Table, TableName } from '../../shared/storage/port';

function tokenAt(pk: string, rk: string): string {
  return Buffer.from(JSON.stringify({ nextPartitionKey: pk, nextRowKey: rk })).toString('base64');
}

/** `table` with an empty, continuing page before each page of rows; pages hold at most `pageSize` rows. */
export function emptyPagesTable(table: Table, opts: { pageSize?: number } = {}): Table {
  const stalled = new Set<string>();
  const page = async <T extends Entity = Entity>(query: Query, limit: number, continuation?: string): Promise<Page<T & { etag: string }>> => {
    if (continuation === undefined || !stalled.has(continuation)) {
      // Where the next page starts, if anywhere: answer nothing but a continuation to it.
      const probe = await table.page({ ...query, select: ['PartitionKey', 'RowKey'] }, 1, continuation);
      const next = probe.items[0];
      if (!next) return { items: [], continuation: probe.continuation };
      const token = tokenAt(next.partitionKey, next.rowKey);
      stalled.add(token);
      return { items: [], continuation: token };
    }
    return table.page<T>(query, Math.min(limit, opts.pageSize ?? limit), continuation);
  };
  return new Proxy(table, { get: (t, p) => (p === 'page' ? page : Reflect.get(t, p, t)) });
}

/** `storage` whose tables (all, or those named) page through `emptyPagesTable`. */
export function emptyPagesStorage<S extends Storage>(storage: S, opts: { tables?: TableName[]; pageSize?: number } = {}): S {
  const wrapped = new Map<string, Table>();
  const table = (name: TableName): Table => {
    const t = storage.table(name);
    if (opts.tables && !opts.tables.includes(name)) return t;
    if (!wrapped.has(name)) wrapped.set(name, emptyPagesTable(t, opts));
    return wrapped.get(name)!;
  };
  return new Proxy(storage, { get: (s, p) => (p === 'table' ? table : Reflect.get(s, p, s)) });
}
