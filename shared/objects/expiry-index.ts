/**
 * Where stored bytes note when they expire: index rows in the Artifacts table, in partitions
 * `~expires~<YYYY-MM-DD>~<shard>`, written before the bytes' own row. The queue's artifacts (one
 * row per run and expiry) and the Object API's objects (one row per object, carrying `object`)
 * share it; shared/artifacts/expiry.ts sweeps it. It sits here, below both, because the queue's
 * artifacts build on objects and not the other way round.
 */
import crypto from 'node:crypto';
import type { Storage } from '../storage/storage';
import { BoundedCache } from '../bounded-cache';

export const INDEX_PREFIX = '~expires~';
/** Index writes for one day spread over 16 partitions (Azure serves ~2000 ops/s per partition). */
const INDEX_SHARDS = 16;
/**
 * An instance remembers the index rows it wrote and skips rewriting them, but only for expiries
 * at least this far away: the reaper deletes an index row only after its expiry passes, so the
 * remembered row surely still exists (the margin absorbs clock skew between instances).
 */
const INDEX_CACHE_MARGIN_MS = 60 * 60 * 1000;
/** Bound the remembered index rows per instance. */
const INDEX_CACHE_MAX = 10_000;
function shardOf(run: string): string {
  return (crypto.createHash('sha1').update(run).digest()[0] % INDEX_SHARDS).toString(16);
}

export function indexKeys(run: string, expires: string): { partitionKey: string; rowKey: string } {
  return { partitionKey: `${INDEX_PREFIX}${expires.slice(0, 10)}~${shardOf(run)}`, rowKey: `${expires}~${run}` };
}

const written = new BoundedCache<string, true>(INDEX_CACHE_MAX);

/**
 * Makes sure an index row covers artifacts of `run` expiring at `expires` (before the row is
 * written); with `object`, the row stands for that one object instead (`run` is then its key).
 */
export async function noteExpiry(storage: Storage, run: string, expires: string, now: Date, object?: string): Promise<void> {
  const keys = indexKeys(run, expires);
  const cacheKey = `${storage.prefix}|${keys.partitionKey}|${keys.rowKey}`;
  const cacheable = new Date(expires).getTime() - now.getTime() > INDEX_CACHE_MARGIN_MS;
  if (cacheable && written.has(cacheKey)) return;
  await storage.table('Artifacts').upsert({ ...keys, run, expires, ...(object !== undefined ? { object } : {}) });
  if (!cacheable) return;
  written.set(cacheKey, true);
}
