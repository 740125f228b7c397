/**
 * Transition records: what a transition (transitions.ts) did, by name, with exactly the facts its
 * plan (shared/lifecycle/planner.ts) needs. One name per row of the README's state table
 * (`test/unit/state-table.test.ts` checks both ways); `repeat` is the table's `=`. The plan reads
 * the record, not a comparison of the row before and after: the history entries, events, operator
 * index writes and chart tally all follow from the record and the row it wrote.
 */
import type { Priority } from '../tasks/vocabulary';

/** The transitions, as the README's state table names its rows. */
export const TRANSITION_NAMES = [
  'create',
  'schedule',
  'claim',
  'reclaim',
  'report',
  'claim-expired',
  'deadline',
  'cancel',
  'rerun',
  'rehint',
  'worker-gone',
  'suspend',
  'change-priority',
  'safety-net',
  'propagated',
  'dependent-added',
  'mark-uploads',
] as const;
export type TransitionName = (typeof TRANSITION_NAMES)[number];

/** A run the transition ended, and the state it ended from (null: a run added already resolved). */
export interface Ended {
  runId: number;
  from: 'pending' | 'running' | null;
}

/** A running run resolved by its worker's report or on its behalf; `retry`: the retry run it added. */
interface Resolution {
  runId: number;
  retry?: number;
}

/** A record is named for its transition: no record without a row in the table. */
type Named<N extends TransitionName, Facts = unknown> = { name: N } & Facts;

export type TransitionRecord =
  /**
   * A new task row; `scheduled`: run 0 is pending (no dependencies). `claimed`: run 0 went on to
   * a claimWork of this instance that was waiting for it, in the same write (no hint in between).
   */
  | Named<'create', { scheduled: boolean; claimed?: true }>
  /** Run 0 of an unscheduled task is pending. */
  | Named<'schedule', { runId: 0 }>
  | Named<'claim', { runId: number }>
  | Named<'reclaim', { runId: number }>
  | Named<'report', Resolution>
  | Named<'claim-expired', Resolution>
  | Named<'worker-gone', Resolution>
  /** Every unresolved run ended as deadline-exceeded (or one run added so, to an unscheduled task). */
  | Named<'deadline', { ended: Ended[] }>
  /** The latest unresolved run ended as canceled (or one run added so, to an unscheduled task). */
  | Named<'cancel', { ended: Ended }>
  /** A new pending run (`runId`). */
  | Named<'rerun', { runId: number }>
  /** The pending run has a fresh hint (no state changes). */
  | Named<'rehint', { runId: number }>
  /** The running run ended as suspended; `resumed` is the pending run that continues it. */
  | Named<'suspend', { runId: number; resumed: number }>
  | Named<'change-priority', { from: Priority; to: Priority }>
  /** Bookkeeping only (no run changes state): dependents told of run `last`, a dependent added, a run's uploads marked. */
  | Named<'propagated', { last: number }>
  | Named<'dependent-added'>
  | Named<'mark-uploads', { runId: number }>
  /** The table's `=`: the row is unchanged; the transition (`of`) only owes its effects, and `replay`'s events, again. */
  | { name: 'repeat'; of: TransitionName; replay?: Replay };

/**
 * Recorded events a repeat delivers again, as Taskcluster publishes a repeated call's messages
 * again: a createTask's task-defined (and run 0's task-pending while that run is pending), a run's
 * end (a repeated report or cancel: its resolution and the retry's task-pending), or everything of
 * run `runId` its claim-expiry trigger guards (a replayed claim, or the trigger finding its run
 * ended: the claim's task-running and the end).
 */
export type Replay = { kind: 'defined'; pendingRun0: boolean } | { kind: 'end'; runId: number } | { kind: 'run'; runId: number };

export type RecordName = TransitionRecord['name'];
export type RecordOf<N extends RecordName> = Extract<TransitionRecord, { name: N }>;
