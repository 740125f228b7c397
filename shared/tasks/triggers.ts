/**
 * Delayed trigger messages: each becomes visible when it must fire and carries the timestamp it
 * was made for; the reaper acts only if that still matches the stored task.
 */
import { Storage, MAX_VISIBILITY_S } from '../storage/storage';

export interface DeadlineTrigger {
  taskId: string;
  deadline: string;
  /**
   * The events (history seqs) of the write that put it, not yet delivered: the trigger fires after
   * the sweep delay and the reaper delivers them, unless their delivery re-armed it first
   * (`rearmDeadline`). One call guards them instead of a sweep trigger's put and delete.
   */
  sweep?: number[];
}

/** A deadline trigger that also sweeps a write's events (shared/events/recorder.ts). */
export interface DeadlineSweep {
  seqs: number[];
  delayS: number;
}
export interface ClaimTrigger {
  taskId: string;
  runId: number;
  takenUntil: string;
}
export interface ResolvedTrigger {
  taskId: string;
  runId: number;
}
/** Shares the `resolved` queue: finish tracking the dependencies of a task created with many (shared/tasks/create.ts). */
export interface TrackingTrigger {
  taskId: string;
  tracking: true;
}

/** Trigger messages never expire on their own: the handler deletes them when done. */
function delayS(at: Date, now: Date): number {
  return Math.min(MAX_VISIBILITY_S, Math.max(0, Math.ceil((at.getTime() - now.getTime()) / 1000)));
}

/** A trigger message we put and may delete again once its work is done. */
export interface TriggerRef {
  messageId: string;
  popReceipt: string;
}

export class Triggers {
  constructor(
    private readonly storage: Storage,
    private readonly deadlineDelayS: number,
    private readonly now: () => Date,
    /** How long the resolution safety net waits before it finishes an interrupted propagation. */
    private readonly resolvedNetDelayS: number,
  ) {}

  private deadlineAt(deadline: string): Date {
    return new Date(new Date(deadline).getTime() + this.deadlineDelayS * 1000);
  }

  async deadline(taskId: string, deadline: string, sweep?: DeadlineSweep): Promise<TriggerRef> {
    const untilDeadline = delayS(this.deadlineAt(deadline), this.now());
    if (!sweep) return this.storage.trigger('deadline').put({ taskId, deadline } satisfies DeadlineTrigger, { visibilityS: untilDeadline });
    return this.storage
      .trigger('deadline')
      .put({ taskId, deadline, sweep: sweep.seqs } satisfies DeadlineTrigger, { visibilityS: Math.min(untilDeadline, sweep.delayS) });
  }

  /**
   * The events a deadline trigger swept were delivered: it becomes a plain deadline trigger again,
   * due at the deadline. Its new ref, or undefined if it was received meanwhile (the reaper then
   * delivers them again and re-arms it itself).
   */
  async rearmDeadline(ref: TriggerRef, taskId: string, deadline: string): Promise<TriggerRef | undefined> {
    const body: DeadlineTrigger = { taskId, deadline };
    const popReceipt = await this.storage.trigger('deadline').rearm(ref.messageId, ref.popReceipt, body, delayS(this.deadlineAt(deadline), this.now()));
    return popReceipt ? { messageId: ref.messageId, popReceipt } : undefined;
  }

  async claim(taskId: string, runId: number, takenUntil: string): Promise<TriggerRef> {
    return this.storage.trigger('claim').put({ taskId, runId, takenUntil } satisfies ClaimTrigger, { visibilityS: delayS(new Date(takenUntil), this.now()) });
  }

  /**
   * Deletes a claim-expiry or deadline trigger whose moment no longer matters (the run or task was
   * resolved): one delete now instead of a read and a delete when it fires. If it already fired or
   * the delete fails, the handler finds nothing to do, as before.
   */
  async drop(kind: 'claim' | 'deadline', ref: TriggerRef | undefined): Promise<void> {
    if (!ref) return;
    await this.storage
      .trigger(kind)
      .delete(ref.messageId, ref.popReceipt)
      .catch(() => undefined);
  }

  /**
   * The safety net for dependency propagation from an API call: fires later unless `done` deletes
   * it first, so dependents are scheduled even if the caller crashes and never retries.
   */
  async resolved(taskId: string, runId: number): Promise<TriggerRef> {
    return this.storage.trigger('resolved').put({ taskId, runId } satisfies ResolvedTrigger, { visibilityS: this.resolvedNetDelayS });
  }

  /**
   * The safety net of a createTask that tracks its dependencies after answering: fires later unless
   * `done` deletes it first, so the tracking is finished even if the instance dies midway.
   */
  async tracking(taskId: string): Promise<TriggerRef> {
    return this.storage.trigger('resolved').put({ taskId, tracking: true } satisfies TrackingTrigger, { visibilityS: this.resolvedNetDelayS });
  }

  /** Deletes a safety-net trigger whose work is done; failing to is harmless (it fires as a no-op). */
  async done(ref: TriggerRef): Promise<void> {
    await this.storage.trigger('resolved').delete(ref.messageId, ref.popReceipt);
  }
}
