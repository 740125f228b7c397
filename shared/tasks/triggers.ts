/**
 * Triggers: delayed queue messages, each visible when it must fire, or rows of the expiry index
 * (a task's deadline, a run's claim expiry), each due then; both carry the timestamp they were
 * made for, and the reaper acts only if that still matches the stored task. Only a message can
 * guard events (it is dropped after their delivery), so a trigger that guards some is one.
 */
import { Storage, MAX_VISIBILITY_S } from '../storage/storage';
import type { ExpiryIndex } from './expiry';
import { expiryDigest, inlineExpiry, type TaskExpiry } from './task-expiry';

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
/**
 * Shares the `resolved` queue: the safety net of several resolutions made at the same moment on one
 * instance (see `Triggers.resolved`); firing, it finishes the propagation of each.
 */
export interface ResolvedBatchTrigger {
  batch: ResolvedTrigger[];
}
/** Shares the `resolved` queue: finish tracking the dependencies of a task created with many (shared/lifecycle/create.ts). */
export interface TrackingTrigger {
  taskId: string;
  tracking: true;
}

/**
 * Resolutions that share one safety-net message. A queue message holds 64 KiB; 100 entries of
 * ~50 bytes stay far below, and a net that fires redoes at most this many (cheap) checks.
 */
const BATCH_MAX = 100;

/** Trigger messages never expire on their own: the handler deletes them when done. */
function delayS(at: Date, now: Date): number {
  return Math.min(MAX_VISIBILITY_S, Math.max(0, Math.ceil((at.getTime() - now.getTime()) / 1000)));
}

/** A trigger message we put and may delete again once its work is done. */
export interface TriggerRef {
  messageId: string;
  popReceipt: string;
}

/** The expiry index's kind for a run's claim expiry kept there (`Triggers.claim`). */
export const EXPIRY_KIND_CLAIM = 'claim';
/** A claim-expiry trigger kept as a row of the expiry index: its keys, so the run's end deletes it. */
export interface IndexedTrigger {
  partitionKey: string;
  rowKey: string;
}
/** A run's claim-expiry trigger: a message of its own, or its row in the expiry index. */
export type ClaimRef = TriggerRef | IndexedTrigger;
/** The data of a claim expiry's expiry-index row: the claim it was made for (a later takenUntil is not acted on). */
export interface IndexedClaim {
  runId: number;
  takenUntil: string;
}
/** Whether a trigger is a message (it can guard events: it is dropped only after their delivery). */
export const isMessage = (ref: ClaimRef | DeadlineRef | undefined): ref is TriggerRef => typeof ref === 'object' && 'messageId' in ref;

/** What `Triggers.claim` needs besides the claim. */
export interface ClaimTriggerOptions {
  /** The trigger guards the write's events (someone listens): a message, dropped only after their delivery. */
  guard?: boolean;
}

/** The expiry index's kind for a task's deadline kept there (`Triggers.deadline`). */
export const EXPIRY_KIND_DEADLINE = 'deadline';
/** What a task row holds for a deadline kept in the expiry index: there is nothing to drop. */
export const INDEXED_DEADLINE = 'indexed';
/** A task's deadline trigger: a message of its own, or its row in the expiry index. */
export type DeadlineRef = TriggerRef | typeof INDEXED_DEADLINE;
/**
 * The data of a deadline's expiry-index row: the deadline it was made for (a changed one is not
 * acted on), and the task's expiry, which its sweep records (shared/tasks/task-expiry.ts).
 */
export interface IndexedDeadline {
  deadline: string;
  expiry: TaskExpiry;
}

/** What `Triggers.deadline` needs besides the deadline. */
export interface DeadlineOptions {
  /** It also guards the write's events: a message of the task's own. */
  sweep?: DeadlineSweep;
  /** The task's expiry, which an expiry-index row carries to its sweep (a message does not). */
  expiry: TaskExpiry;
}

export interface TriggersOptions {
  storage: Storage;
  expiry: ExpiryIndex;
  /** How long after a deadline it is acted on. */
  deadlineDelayS: number;
  now: () => Date;
  /** How long the resolution safety net waits before it finishes an interrupted propagation. */
  resolvedNetDelayS: number;
}

/**
 * Group commit of trigger puts: while one put is in flight, the members that arrive wait and
 * then share the next put, so a busy instance puts one message per batch, not per member (at
 * Azurite each queue call costs a pass over every message of the account, and every message
 * waiting makes each call dearer).
 */
class GroupCommit<M> {
  /** The batch that new members join, if its put has not started yet. */
  private forming: { members: M[]; ref: Promise<TriggerRef> } | undefined;
  /** The latest put (settled or not): the next batch's put starts after it. */
  private lastPut: Promise<unknown> = Promise.resolve();

  constructor(private readonly put: (members: M[]) => Promise<TriggerRef>) {}

  join(member: M): Promise<TriggerRef> {
    if (!this.forming || this.forming.members.length >= BATCH_MAX) {
      const batch = { members: [] as M[], ref: Promise.resolve(undefined as never) as Promise<TriggerRef> };
      batch.ref = this.lastPut.then(() => {
        if (this.forming === batch) this.forming = undefined; // later arrivals form the next batch
        return this.put(batch.members);
      });
      this.forming = batch;
      this.lastPut = batch.ref.catch(() => undefined);
    }
    this.forming.members.push(member);
    return this.forming.ref;
  }
}

export class Triggers {
  private readonly nets = new GroupCommit<ResolvedTrigger>((members) => this.putNet(members));
  /** Shared nets by messageId: members that have not called `done` yet, and when it was put. */
  private readonly shared = new Map<string, { left: number; at: number }>();
  private readonly storage: Storage;
  private readonly now: () => Date;
  private readonly resolvedNetDelayS: number;

  constructor(private readonly opts: TriggersOptions) {
    ({ storage: this.storage, now: this.now, resolvedNetDelayS: this.resolvedNetDelayS } = opts);
  }

  /** When a deadline trigger acts: the deadline, plus the configured delay. */
  deadlineAt(deadline: string): Date {
    return new Date(new Date(deadline).getTime() + this.opts.deadlineDelayS * 1000);
  }

  /**
   * The task's deadline trigger. Kept as a row of the expiry index's triggers' lane
   * (`EXPIRY_KIND_DEADLINE`, due at the deadline plus the delay), which the reaper's sweep finds then: rows of concurrent
   * creates go out together (ExpiryIndex group commit), the resolution deletes nothing (the sweep
   * finds the task resolved and drops the row with others, 100 per transaction), and no queue
   * message waits a deadline long. A resolution that leaves the group's bookkeeping to `after` is
   * guarded by a safety net instead (plan.ts `guardGroupClose`). A trigger that also sweeps the
   * write's events (`sweep`) is a message of the task's own, shown after the sweep delay; their
   * delivery re-arms it for the deadline (`rearmDeadline`), the resolution drops it.
   * The row carries the task's `expiry` (its sweep records the task's expiry rows: a createTask's
   * one expiry-index write); a row per distinct expiry (`variant`), so a create that lost to another
   * definition of the taskId never overwrites the winner's.
   */
  async deadline(taskId: string, deadline: string, opts: DeadlineOptions): Promise<DeadlineRef> {
    const { sweep } = opts;
    if (!sweep) {
      const expiry = inlineExpiry(opts.expiry);
      const data: IndexedDeadline = { deadline, expiry };
      await this.opts.expiry.recordTrigger(EXPIRY_KIND_DEADLINE, taskId, this.deadlineAt(deadline).toJSON(), { ...data }, { variant: expiryDigest(expiry) });
      return INDEXED_DEADLINE;
    }
    const untilDeadline = delayS(this.deadlineAt(deadline), this.now());
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

  /**
   * The run's claim-expiry trigger. Kept as a row of the expiry index (`EXPIRY_KIND_CLAIM`, due at
   * `takenUntil`), which the reaper's expiry sweep finds then: the claims of the moment (a
   * claimWork batch's, and concurrent claimWorks') go out in one transaction (ExpiryIndex group
   * commit in the bucket of the instance's turn), and the run's end
   * deletes the row, lingering for the other reports of the moment (`drop`). A table row costs
   * Azurite a fraction of a queue message's put and delete, which scan every message of the account.
   * A trigger that guards the run's events (`guard`: someone listens to its task-running or to what
   * its end publishes) is a message of the run's own, dropped only after their delivery; if it
   * fires on the ended run it delivers them again.
   */
  async claim(taskId: string, runId: number, takenUntil: string, opts: ClaimTriggerOptions = {}): Promise<ClaimRef> {
    if (!opts.guard) {
      const data: IndexedClaim = { runId, takenUntil };
      return this.opts.expiry.recordTrigger(EXPIRY_KIND_CLAIM, taskId, takenUntil, { ...data });
    }
    return this.storage.trigger('claim').put({ taskId, runId, takenUntil } satisfies ClaimTrigger, { visibilityS: delayS(new Date(takenUntil), this.now()) });
  }

  /**
   * Deletes a claim-expiry or deadline trigger whose moment no longer matters (the run or task was
   * resolved): one delete instead of a read and a delete when it fires. If it already fired or
   * the delete fails, the handler finds nothing to do, as before. An expiry-index row's delete is
   * not waited for: it lingers to share a transaction with other reports' (ExpiryIndex.forget; app
   * close flushes it), and lost, it costs a task read when the row comes due (it guards no events).
   */
  async drop(kind: 'claim' | 'deadline', ref: ClaimRef | undefined): Promise<void> {
    if (!ref) return;
    if (!isMessage(ref)) {
      void this.opts.expiry.forget(ref).catch(() => undefined);
      return;
    }
    await this.storage
      .trigger(kind)
      .delete(ref.messageId, ref.popReceipt)
      .catch(() => undefined);
  }

  /**
   * The safety net for dependency propagation from an API call: fires later unless `done` deletes
   * it first, so dependents are scheduled even if the caller crashes and never retries. Group
   * commit: while one net is being put, the resolutions that arrive wait and then share the next
   * one, so a busy instance puts (and deletes) one message per batch, not per resolution (at
   * Azurite each queue call costs a pass over every message of the account). The message is
   * deleted once every member called `done`; if any never does (a crash, a failed propagation), it
   * fires and the reaper finishes each member's propagation (a no-op for the finished ones).
   */
  resolved(taskId: string, runId: number): Promise<TriggerRef> {
    return this.nets.join({ taskId, runId });
  }

  private async putNet(members: ResolvedTrigger[]): Promise<TriggerRef> {
    const body = members.length === 1 ? members[0] : ({ batch: members } satisfies ResolvedBatchTrigger);
    const ref = await this.storage.trigger('resolved').put(body, { visibilityS: this.resolvedNetDelayS });
    if (members.length > 1) {
      // Entries of nets some member never finished: the message fires anyway, forget them.
      const now = Date.now();
      for (const [id, e] of this.shared) if (now - e.at > this.resolvedNetDelayS * 1000) this.shared.delete(id);
      this.shared.set(ref.messageId, { left: members.length, at: now });
    }
    return ref;
  }

  /**
   * The safety net of a createTask that tracks its dependencies after answering: fires later unless
   * `done` deletes it first, so the tracking is finished even if the instance dies midway.
   */
  async tracking(taskId: string): Promise<TriggerRef> {
    return this.storage.trigger('resolved').put({ taskId, tracking: true } satisfies TrackingTrigger, { visibilityS: this.resolvedNetDelayS });
  }

  /**
   * Deletes a safety-net trigger whose work is done (a shared one once all its members are done);
   * failing to is harmless (it fires as a no-op).
   */
  async done(ref: TriggerRef): Promise<void> {
    const e = this.shared.get(ref.messageId);
    if (e && --e.left > 0) return;
    this.shared.delete(ref.messageId);
    await this.storage.trigger('resolved').delete(ref.messageId, ref.popReceipt);
  }
}
