/**
 * The storage port and how to get one. Domain code imports from here; the adapters live in
 * `azure.ts` (Azurite or a real account) and `memory.ts` (tests), and are the only code that
 * knows which one it is.
 */
import { AzureStorage } from './azure';
import { MemoryStorage } from './memory';
import { AccountRoots, AccountsStorage } from './accounts';
import { StorageMeter } from './counter';
import { MAX_TRANSACTION_ACTIONS, StorageConflict } from './port';
import type { Queue, Storage, Table } from './port';

export * from './port';

/** Older names of the port's table and queue, kept so domain imports stay stable. */
export type CountedTable = Table;
export type CountedQueue = Queue;

/** The connection string that selects the in-memory adapter (tests and demos without Azurite). */
export const MEMORY_CONNECTION = 'memory:';

function single(connectionString: string, prefix: string, opts: { meter?: StorageMeter; account?: number } = {}): Storage {
  if (connectionString.trim() === MEMORY_CONNECTION) return new MemoryStorage(prefix, opts);
  return new AzureStorage(connectionString, prefix, opts);
}

/**
 * The storage adapter a connection string names: an Azure Storage connection string, or `memory:`.
 * With `more` accounts (appended over the deployment's life), one adapter routes over all of them;
 * `roots` names the rows that locate a task or group stored before an account was added.
 */
export function createStorage(
  connectionString: string,
  prefix: string,
  opts: { more?: string[]; roots?: AccountRoots; hintLifetimeMs?: number; now?: () => Date } = {},
): Storage {
  const more = opts.more ?? [];
  if (more.length === 0) return single(connectionString, prefix);
  if (!opts.roots) throw new Error('several storage accounts need the root rows that locate a task');
  const meter = new StorageMeter();
  const accounts = [connectionString, ...more].map((c, account) => single(c, prefix, { meter, account }));
  return new AccountsStorage(accounts, opts.roots, { hintLifetimeMs: opts.hintLifetimeMs, now: opts.now });
}

/**
 * Deletes rows of one partition, up to 100 per entity-group transaction (a single row by itself).
 * A transaction fails whole if one of its rows is already gone (another deleter, or a repeat after
 * a crash): that chunk is then deleted row by row, which ignores missing rows.
 */
export async function deleteRows(table: Table, partitionKey: string, rowKeys: string[]): Promise<void> {
  for (let i = 0; i < rowKeys.length; i += MAX_TRANSACTION_ACTIONS) {
    const chunk = rowKeys.slice(i, i + MAX_TRANSACTION_ACTIONS);
    try {
      if (chunk.length === 1) await table.delete(partitionKey, chunk[0]);
      else await table.transact(chunk.map((rowKey) => ({ op: 'delete', partitionKey, rowKey })));
    } catch (err) {
      if (!(err instanceof StorageConflict)) throw err;
      for (const rk of chunk) await table.delete(partitionKey, rk);
    }
  }
}
