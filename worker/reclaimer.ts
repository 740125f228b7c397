/**
 * Keeps a claim alive: calls reclaimTask well before `takenUntil`, replaces the run credentials
 * with the fresh ones, and reports the claim lost on a 409 (the run was canceled, resolved or
 * expired) or when `takenUntil` passes without a successful reclaim.
 */
import { Credentials, ReclaimResponse, WorkerLog, statusOf, messageOf } from './types';

/** Reclaim this long before takenUntil to allow for clock drift and retries (the documents advise minutes). */
export const RECLAIM_MARGIN_MS = 3 * 60_000;
/** Wait before retrying a reclaim that failed for another reason than 409 (client retries already ran). */
const RECLAIM_RETRY_MS = 15_000;

/**
 * When to reclaim, in ms from now: `margin` before takenUntil, but never later than half way there,
 * so short claim timeouts (tests) still leave half the claim for the call.
 */
export function reclaimDelayMs(takenUntil: Date, now: Date, marginMs = RECLAIM_MARGIN_MS): number {
  const remaining = takenUntil.getTime() - now.getTime();
  return Math.max(0, Math.max(remaining - marginMs, remaining / 2));
}

export type LostReason = 'conflict' | 'claim-expired';

export interface ReclaimerDeps {
  taskId: string;
  runId: number;
  /** reclaimTask signed with the given (latest) credentials. */
  reclaim: (credentials: Credentials) => Promise<ReclaimResponse>;
  log: WorkerLog;
  now?: () => Date;
  marginMs?: number;
  /** Called with each new set of credentials. */
  onReclaimed?: (r: ReclaimResponse) => void;
  /** Called once when the claim is gone; the run must be stopped and forgotten. */
  onLost: (reason: LostReason) => void;
}

export class Reclaimer {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private credentials: Credentials;
  private takenUntil: Date;
  private readonly now: () => Date;

  constructor(
    private readonly deps: ReclaimerDeps,
    claim: { takenUntil: string; credentials: Credentials },
  ) {
    this.now = deps.now ?? (() => new Date());
    this.credentials = claim.credentials;
    this.takenUntil = new Date(claim.takenUntil);
  }

  /** The newest run credentials (sign artifact uploads and reports with these). */
  get current(): { credentials: Credentials; takenUntil: Date } {
    return { credentials: this.credentials, takenUntil: this.takenUntil };
  }

  start(): void {
    this.schedule(reclaimDelayMs(this.takenUntil, this.now(), this.deps.marginMs));
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.tick(), ms);
  }

  private lost(reason: LostReason): void {
    if (this.stopped) return;
    this.stop();
    this.deps.onLost(reason);
  }

  private async tick(): Promise<void> {
    const { taskId, runId, log } = this.deps;
    try {
      const r = await this.deps.reclaim(this.credentials);
      if (this.stopped) return;
      this.credentials = r.credentials;
      this.takenUntil = new Date(r.takenUntil);
      log.info('task-reclaimed', { taskId, runId, takenUntil: r.takenUntil });
      this.deps.onReclaimed?.(r);
      this.schedule(reclaimDelayMs(this.takenUntil, this.now(), this.deps.marginMs));
    } catch (err) {
      if (this.stopped) return;
      const status = statusOf(err);
      if (status === 409) {
        log.warn('reclaim-conflict', { taskId, runId, message: messageOf(err).split('\n')[0] });
        return this.lost('conflict');
      }
      const remaining = this.takenUntil.getTime() - this.now().getTime();
      log.error('reclaim-failed', { taskId, runId, status, message: messageOf(err).split('\n')[0], msLeft: remaining });
      if (remaining <= 0) return this.lost('claim-expired');
      this.schedule(Math.min(RECLAIM_RETRY_MS, remaining / 2));
    }
  }
}
