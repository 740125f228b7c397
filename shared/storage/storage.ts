/**
 * The storage port and how to get one. Domain code imports from here; the adapters live in
 * `azure.ts` (Azurite or a real account) and `memory.ts` (tests), and are the only code that
 * knows which one it is.
 */
import type { AzureStorage } from './azure';
import { MemoryStorage } from './memory';
import { AccountRoots, AccountsStorage } from './accounts';
import { StorageMeter } from './counter';
import { MAX_TRANSACTION_ACTIONS, StorageConflict } from './port';
import { FaultSettings, FaultyStorage, Sleep } from './faults';
import type { Queue, Storage, Table } from './port';

export * from './port';
export * from './guarded-update';

/** Older names of the port's table and queue, kept so domain imports stay stable. */
export type CountedTable = Table;
export type CountedQueue = Queue;

/**
 * The connection string that selects the in-memory adapter (tests and demos without Azurite).
 * `memory:` is a new store each time; `memory:<name>` is one store per name and prefix in the
 * process, so that several app instances in one process (tests, the chaos run) share it.
 */
export const MEMORY_CONNECTION = 'memory:';

const namedMemory = new Map<string, MemoryStorage>();

function single(
  connectionString: string,
  prefix: string,
  opts: { meter?: StorageMeter; account?: number; faults?: FaultSettings; sleep?: Sleep; origin?: string; storageNow?: () => number } = {},
): Storage {
  const conn = connectionString.trim();
  let inner: Storage;
  const memoryOpts = { meter: opts.meter, account: opts.account, origin: opts.origin, now: opts.storageNow };
  if (conn === MEMORY_CONNECTION) inner = new MemoryStorage(prefix, memoryOpts);
  else if (conn.startsWith(MEMORY_CONNECTION) && !conn.includes('=')) {
    const key = `${conn}/${prefix}/${opts.account ?? 0}`;
    let shared = namedMemory.get(key);
    if (!shared) {
      shared = new MemoryStorage(prefix, memoryOpts);
      namedMemory.set(key, shared);
    }
    inner = shared;
  } else {
    // Loaded on first use: a process on `memory:` (tests, local runs) skips the Azure SDKs' load time.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { AzureStorage: Adapter } = require('./azure') as { AzureStorage: typeof AzureStorage };
    inner = new Adapter(connectionString, prefix, opts);
  }
  if (!opts.faults) return inner;
  // Each account and app instance draws its own faults, from the seed and their places.
  const seed = opts.faults.seed + 1_000_003 * (opts.account ?? 0) + 7919 * opts.faults.instance;
  return new FaultyStorage(inner, { ...opts.faults, seed }, { sleep: opts.sleep });
}

/**
 * The storage adapter a connection string names: an Azure Storage connection string, or `memory:`.
 * With `more` accounts (appended over the deployment's life), one adapter routes over all of them;
 * `roots` names the rows that locate a task or group stored before an account was added.
 */
export function createStorage(
  connectionString: string,
  prefix: string,
  opts: {
    more?: string[];
    roots?: AccountRoots;
    hintLifetimeMs?: number;
    now?: () => Date;
    faults?: FaultSettings;
    sleep?: Sleep;
    /** The app's public URL: an in-memory store's SAS URLs point there (the local host serves them). */
    origin?: string;
    /** The in-memory adapter's clock (tests move it); Azure storage keeps its own. */
    storageNow?: () => number;
  } = {},
): Storage {
  const more = opts.more ?? [];
  const faulted = { faults: opts.faults, sleep: opts.sleep, origin: opts.origin, storageNow: opts.storageNow };
  if (more.length === 0) return single(connectionString, prefix, faulted);
  if (!opts.roots) throw new Error('several storage accounts need the root rows that locate a task');
  const meter = new StorageMeter();
  const accounts = [connectionString, ...more].map((c, account) => single(c, prefix, { meter, account, ...faulted }));
  return new AccountsStorage(accounts, opts.roots, { hintLifetimeMs: opts.hintLifetimeMs, now: opts.now });
}

/** The in-memory stores behind an adapter (through faults and accounts), whose endpoints the local host serves. */
export function memoryStoresOf(storage: Storage): MemoryStorage[] {
  if (storage instanceof MemoryStorage) return [storage];
  if (storage instanceof FaultyStorage) return memoryStoresOf(storage.inner);
  if (storage instanceof AccountsStorage) return storage.accounts.flatMap(memoryStoresOf);
  return [];
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
