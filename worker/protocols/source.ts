/**
 * A source of claimed tasks: claimWork long-polling, or pollTaskUrls + claimTask.
 */
import type { Claim } from '../types';

export interface WorkSource {
  /**
   * Claims up to `max` tasks. May return fewer or none (that says nothing about what is pending).
   * Throws only CredentialsRejected (a 401: no retry can succeed); other failures are logged
   * and backed off inside. Aborting `signal` ends waits early;
   * a request already sent is let finish, so any task it claimed is returned (and must be handled).
   */
  claim(max: number, signal: AbortSignal): Promise<Claim[]>;
}

/** claimWork and the Azure queue GET both cap a batch at 32. */
export const MAX_BATCH = 32;
/** Back-off after a failed poll, so a broken queue is not hammered. */
export const ERROR_BACKOFF_MS = 5_000;

/** The queue answered 401: the worker's credentials are wrong or expired, and retrying cannot help. */
export class CredentialsRejected extends Error {
  constructor(readonly detail: string) {
    super(`the queue rejected the worker's credentials (401): ${detail}`);
  }
}
