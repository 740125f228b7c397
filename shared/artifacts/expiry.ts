/**
 * Artifact expiry without scanning artifacts.
 *
 * Index rows live in the Artifacts table, in partitions `~expires~<YYYY-MM-DD>~<shard>` (the day
 * of `expires`; `~` sorts after every `<taskId>-<runId>` partition, so they never mix with
 * artifact rows). One row per run and exact `expires` value, with row key `<expires>~<run>`: a
 * run's artifacts usually share their expiry, so one index row covers many artifacts. The reaper
 * reads the index rows that are due (one range query: past day partitions, row key < now), and
 * for each one deletes the run's expired artifacts (blob first, then the row) and then the index
 * row. An index row is a hint: the artifact row's `expires` is the truth, so a stale index row
 * (expiry since extended) only costs a query. Objects of the Object API use the same index: their
 * rows carry `object` (the object name) and expire that one object.
 */
import type { Storage } from '../storage/storage';
import { allRows, deleteIfMatch } from '../storage/storage';
import type { Logger } from '../log';
import { ArtifactStore } from './store';
import { ArtifactBlobs, LIVE_LOG_NAME, blobNameFor, liveLogBlob } from './blobs';
import { ArtifactRecord, artifactRowKey, runKey } from './model';
import { expireObject } from '../objects/expire';
import { INDEX_PREFIX } from '../objects/expiry-index';

export { indexKeys, noteExpiry } from '../objects/expiry-index';

/** Due index rows handled per reaper pass, so a pass stays short. */
export const MAX_INDEX_ROWS_PER_PASS = 200;
/** Parallel blob deletes while expiring one run's artifacts. */
const DELETE_CONCURRENCY = 8;

async function inBatches<T>(items: T[], size: number, fn: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(fn));
}

export interface ExpiryDeps {
  storage: Storage;
  now: () => Date;
  log: Logger;
}

/**
 * Deletes the rows of expired artifacts whose blobs are gone, each guarded by its ETag so a row
 * re-created meanwhile survives. (Entity-group batches would be cheaper, but the SDK's batch
 * delete cannot carry an ETag.)
 */
async function deleteRows(store: ArtifactStore, rows: ArtifactRecord[]): Promise<number> {
  let deleted = 0;
  await inBatches(rows, DELETE_CONCURRENCY, async (a) => {
    if ((await deleteIfMatch(store.table, runKey(a.taskId, a.runId), artifactRowKey(a.name), a.etag!)).ok) deleted++;
  });
  return deleted;
}

/** Expires one run's artifacts that are past due; returns how many rows were deleted. */
async function expireRun(store: ArtifactStore, blobs: ArtifactBlobs, run: string, nowIso: string): Promise<number> {
  const dash = run.lastIndexOf('-');
  const taskId = run.slice(0, dash);
  const runId = Number(run.slice(dash + 1));
  let deleted = 0;
  for await (const batch of store.batches(taskId, runId, [{ prop: 'expires', op: 'lt', value: nowIso }])) {
    const due = batch.filter((a) => a.expires < nowIso);
    await inBatches(
      due.filter((a) => a.storageType === 's3'),
      DELETE_CONCURRENCY,
      async (a) => {
        await blobs.delete(blobNameFor(a.taskId, a.runId, a.name));
        // The blob the run's log was streamed to goes with the uploaded log.
        if (a.name === LIVE_LOG_NAME) await blobs.delete(liveLogBlob(a.taskId, a.runId));
      },
    );
    deleted += await deleteRows(store, due);
  }
  return deleted;
}

/**
 * The reaper step: removes expired artifacts (blob first, then row, then the index row). Failures
 * leave the index row in place for the next pass. Never throws.
 */
export async function expireArtifacts(d: ExpiryDeps): Promise<{ runs: number; artifacts: number; failed: number }> {
  const stats = { runs: 0, artifacts: 0, failed: 0 };
  const now = d.now();
  const nowIso = now.toJSON();
  const table = d.storage.table('Artifacts');
  const store = new ArtifactStore(d.storage);
  const blobs = new ArtifactBlobs(d.storage);
  // Every index partition up to today's (shards are hex digits, and '~' sorts after them).
  const query = { partitionKey: { ge: INDEX_PREFIX, lt: `${INDEX_PREFIX}${nowIso.slice(0, 10)}~~` }, rowKey: { lt: nowIso } };
  try {
    const due = await allRows(table, query, { max: MAX_INDEX_ROWS_PER_PASS });
    await inBatches(due, DELETE_CONCURRENCY, async (row) => {
      try {
        if (typeof row.object === 'string') stats.artifacts += await expireObject(d.storage, row.object, nowIso);
        else stats.artifacts += await expireRun(store, blobs, row.run as string, nowIso);
        stats.runs++;
        // Refused: rewritten meanwhile by a create with the same expiry; kept for the next pass.
        await deleteIfMatch(table, row.partitionKey, row.rowKey, row.etag);
      } catch (err) {
        stats.failed++;
        d.log.error('artifact-expiry-failed', {
          run: typeof row.run === 'string' ? row.run : `object ${String(row.object)}`,
          error: String((err as Error)?.message ?? err),
        });
      }
    });
  } catch (err) {
    stats.failed++;
    d.log.error('artifact-expiry-failed', { error: String((err as Error)?.message ?? err) });
  }
  if (stats.runs || stats.failed) d.log.info('artifacts-expired', stats);
  return stats;
}
