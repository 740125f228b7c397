/**
 * The storage port and how to get one. Domain code imports from here; the adapters live in
 * `azure.ts` (Azurite or a real account) and `memory.ts` (tests), and are the only code that
 * knows which one it is.
 */
import { AzureStorage } from './azure';
import { MemoryStorage } from './memory';
import type { Queue, Storage, Table } from './port';

export * from './port';

/** Older names of the port's table and queue, kept so domain imports stay stable. */
export type CountedTable = Table;
export type CountedQueue = Queue;

/** The connection string that selects the in-memory adapter (tests and demos without Azurite). */
export const MEMORY_CONNECTION = 'memory:';

/** The storage adapter a connection string names: an Azure Storage connection string, or `memory:`. */
export function createStorage(connectionString: string, prefix: string): Storage {
  if (connectionString.trim() === MEMORY_CONNECTION) return new MemoryStorage(prefix);
  return new AzureStorage(connectionString, prefix);
}
