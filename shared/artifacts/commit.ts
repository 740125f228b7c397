/**
 * Committing uploaded s3 artifacts (see blobs.ts): on the first read, and when the run resolves.
 */
import type { Storage } from '../storage/storage';
import { ArtifactStore } from './store';
import { ArtifactBlobs, blobNameFor } from './blobs';
import type { ArtifactRecord } from './model';

/** Parallel commits when a run resolves with several pending uploads. */
const COMMIT_CONCURRENCY = 8;

/**
 * Commits an s3 artifact's uploaded block, if it has one waiting, and records that. Without an
 * upload yet it leaves the artifact pending (the blob URL then answers 404, as S3 would).
 */
export async function commitIfPending(storage: Storage, a: ArtifactRecord): Promise<void> {
  if (a.storageType !== 's3' || !a.uncommitted) return;
  const committed = await new ArtifactBlobs(storage).commit(blobNameFor(a.taskId, a.runId, a.name), a.contentType, a.contentLength);
  if (committed) await new ArtifactStore(storage).markCommitted(a);
}

/**
 * Commits every pending upload of a run. Costs one query when nothing is pending; then a commit
 * and a row merge per pending artifact. Idempotent, so a retried report repeats it safely.
 */
export async function commitRunUploads(storage: Storage, taskId: string, runId: number): Promise<number> {
  const store = new ArtifactStore(storage);
  let count = 0;
  for await (const batch of store.batches(taskId, runId, [{ prop: 'uncommitted', op: 'eq', value: true }])) {
    const pending = batch.filter((a) => a.storageType === 's3' && a.uncommitted);
    for (let i = 0; i < pending.length; i += COMMIT_CONCURRENCY) {
      await Promise.all(pending.slice(i, i + COMMIT_CONCURRENCY).map((a) => commitIfPending(storage, a)));
    }
    count += pending.length;
  }
  return count;
}
