/**
 * Artifact bytes in the private blob container.
 *
 * Workers upload `s3` artifacts with a plain PUT carrying only Content-Type and Content-Length.
 * Azure's Put Blob insists on `x-ms-blob-type`, but Put Block does not, so the upload URL is a
 * write-only SAS for one block (`comp=block&blockid=…`) of the artifact's blob. The block stays
 * uncommitted until the queue commits it (Put Block List, which also sets the content type): when
 * the run resolves, or on the first read. A repeated upload replaces the uncommitted block, and a
 * commit picks the newest one, so retries and re-creates behave like S3 overwrites.
 *
 * SAS minting is the storage port's (local computation, no storage call); commits and deletes are metered.
 */
import crypto from 'node:crypto';
import type { Storage } from '../storage/storage';

/**
 * One fixed block id per artifact blob: base64 of an 18-byte string, so it has no '+', '/' or '='
 * to escape in the URL, and every block of every blob has the same id length as Azure requires.
 */
export const BLOCK_ID = Buffer.from('tc-artifact-block1').toString('base64');
/** The real queue signs s3 upload URLs for 45 minutes (plus 10 s of clock drift). */
export const PUT_URL_TTL_MS = 45 * 60 * 1000;
const PUT_URL_DRIFT_MS = 10 * 1000;
/** Download SAS URLs live 30 minutes, as the real queue's signed GET URLs do. */
export const GET_URL_TTL_MS = 30 * 60 * 1000;
/** The first two bytes of every gzip stream (RFC 1952). */
const GZIP_MAGIC = Buffer.from([0x1f, 0x8b]);
/** Azure caps blob names at 1024 characters. */
const MAX_BLOB_NAME = 1024;

/**
 * The blob holding an artifact: `<taskId>/<runId>/<name>`, readable in the redirect URL. Names that
 * HTTP clients would rewrite (`.`/`..` segments, backslashes, a trailing `.` or `/`) or that are
 * too long go to `<taskId>/<runId>.h/<sha256(name)>`; no plain name can land in `<runId>.h/`.
 */
export function blobNameFor(taskId: string, runId: number, name: string): string {
  const plain = `${taskId}/${runId}/${name}`;
  const segments = name.split('/');
  const unsafe = segments.some((s) => s === '.' || s === '..') || name.includes('\\') || /[./]$/.test(name) || plain.length > MAX_BLOB_NAME;
  if (!unsafe) return plain;
  return `${taskId}/${runId}.h/${crypto.createHash('sha256').update(name, 'utf8').digest('hex')}`;
}

/** The artifact a run's log ends up as (shared/ops/live-log.ts streams it before). */
export const LIVE_LOG_NAME = 'public/logs/live.log';
/** Where a worker that keeps Taskcluster's names uploads the complete log (live.log then links to it). */
export const LIVE_BACKING_LOG_NAME = 'public/logs/live_backing.log';

/** The blob a run's log is streamed to while it runs, beside its artifacts (no artifact name lands in `<runId>.live/`). */
export function liveLogBlob(taskId: string, runId: number): string {
  return `${taskId}/${runId}.live/log`;
}

export class ArtifactBlobs {
  constructor(private readonly storage: Storage) {}

  /** A write-only URL that accepts one plain PUT of the whole artifact (as one block). */
  putUrl(blobName: string, now: Date): string {
    return this.storage.artifacts.blockUploadUrl(blobName, BLOCK_ID, new Date(now.getTime() + PUT_URL_TTL_MS + PUT_URL_DRIFT_MS));
  }

  /** A short-lived read-only URL for the committed blob. */
  getUrl(blobName: string, now: Date): string {
    return this.storage.artifacts.readUrl(blobName, new Date(now.getTime() + GET_URL_TTL_MS));
  }

  /**
   * Commits the uploaded block with the artifact's content type. Returns false when no block was
   * ever uploaded (Azure answers 400 InvalidBlockList), so the caller keeps the artifact pending.
   *
   * Generic-worker gzips most artifacts in transit and says so only in a `Content-Encoding` header,
   * which Put Block does not keep; it does declare the *original* size as `contentLength`. So when
   * a length was declared, the first bytes and the stored size are checked: gzip magic and a size
   * different from the declared one mean the upload was gzip-encoded, and the blob is served with
   * `Content-Encoding: gzip` as S3 would have. Without a declared length nothing is guessed.
   */
  async commit(blobName: string, contentType: string, declaredLength?: number): Promise<boolean> {
    const committed = await this.storage.artifacts.commitBlocks(blobName, [BLOCK_ID], contentType);
    if (!committed || declaredLength === undefined) return committed;
    const sniffed = await this.storage.artifacts.readHead(blobName, GZIP_MAGIC.length);
    if (sniffed && sniffed.size !== declaredLength && sniffed.head.equals(GZIP_MAGIC)) {
      await this.storage.artifacts.setHeaders(blobName, { contentType, contentEncoding: 'gzip' });
    }
    return true;
  }

  /** Deletes the blob and any uncommitted block; a missing blob is fine. */
  async delete(blobName: string): Promise<void> {
    await this.storage.artifacts.delete(blobName);
  }

  /** Whether a committed blob exists (tests and diagnostics). */
  async exists(blobName: string): Promise<boolean> {
    return this.storage.artifacts.exists(blobName);
  }
}
