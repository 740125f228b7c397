/**
 * A plan: everything one task write does and publishes, in the order the executor (executor.ts)
 * carries it out.
 *
 *   before      effects that must exist before the row says so (hints, triggers, expiry, group)
 *   task, rows  the ETag-guarded write: the task row (inserted when there was none) with its
 *               history held in it, and in one transaction the history rows that no longer fit
 *               there (each carrying its event: the outbox) and the group rows a named step adds
 *   after       effects once the write took effect (drops, wakes, propagation, group bookkeeping)
 *   readModel   operator index and rollup writes, after the row (the task row is the truth)
 *   events      the write's new events, and how they are guarded until delivered
 *   replay      recorded events an idempotent repeat or a replay delivers again
 *   groupResolved  the task-group-resolved a group's close in `after` owes
 *   log         structured log lines of the write
 *
 * The story of a write: a row of the state table (README) is a transition (transitions.ts), which
 * returns its named record (records.ts); one pure function makes the plan from the record, the row
 * it wrote, its effects, the time and the actor (planner.ts `planWrite`): it derives history,
 * events and read-model writes from the record, so nothing else infers them. The executor carries
 * the plan out; its named plan step below puts a new group's rows into the row's transaction.
 */
import type { Entity, KeyRange, TableAction } from '../storage/storage';
import { effect, type Effect, type EffectOf, type LogEntry } from './effects';
import { INDEXED_DEADLINE, type DeadlineRef } from '../tasks/triggers';
import type { LogEventAt } from '../log-events';
import type { TaskRecord } from '../tasks/model';
import type { ReadModelPlan } from '../ops/read-models';
import type { GroupResolution, TaskEventPlan } from './events';
import type { Replay } from './records';

/** A registered info event with its fields (shared/log-events.ts). */
export type LogLine = LogEntry<LogEventAt<'info'>>;

export interface Plan {
  before: Effect[];
  /** The row to write, with its history count; undefined for a `repeat` record (the row is unchanged; it owes only `after`). */
  task?: TaskRecord;
  /** Rows of the task's partition in the row's transaction: its history rows, with the events on them. */
  rows: Entity[];
  /** Other rows of the task's partition in the same transaction (named step: `createOwnGroup`). */
  groupRows: TableAction[];
  /** A create's membership of the group the task starts (its taskGroupId is its taskId), which its write may carry. */
  ownGroup?: EffectOf<'add-group-member'>;
  after: Effect[];
  readModel?: ReadModelPlan;
  events?: TaskEventPlan;
  /** Recorded events delivered again (an idempotent repeat, a replayed claim, a claim expiry finding its run ended). */
  replay?: Replay;
  /** The close-group effect in `after` publishes task-group-resolved when it leaves the group without an unresolved task. */
  groupResolved?: GroupResolution;
  log: LogLine[];
  /** Run transitions in the write (the reaper reports them per pass). */
  transitions: number;
}

/** What deleting a task (expired, or refused at creation) does besides the row. */
export interface DeletionPlan {
  /** Its index rows, removed before the row (the row says which they are); none when the row is gone already. */
  readModel?: ReadModelPlan;
  /** Its history rows: their keys, from the row's history count, or the range to read them from. */
  history: string[] | KeyRange;
}

/**
 * Plan step "own group": a task that starts its own group creates the group's rows (`createActions`)
 * in its row's transaction, as the group's rows share the task's partition, instead of joining it
 * before the write; the row then says so (`groupAlone`), which later makes its resolution the
 * group's close (a close-group effect `alone`: no group row written, shared/tasks/groups.ts).
 * storage-count, simple lifecycle: createTask 4 calls, 5 without (a second Tasks transaction);
 * without it the report would close as any member does (its open row's delete; with a listener
 * for task-group-resolved, a Tasks.query more).
 * If the insert fails and no task row is there, the group existed already: the executor joins it
 * as any member does and writes the plan without this step.
 */
export function createOwnGroup(p: Plan, createActions: TableAction[]): Plan {
  const join = p.ownGroup;
  if (!join || !p.task) return p;
  return { ...p, before: p.before.filter((e) => e !== join), task: { ...p.task, groupAlone: true }, groupRows: [...p.groupRows, ...createActions] };
}

/**
 * Plan step "guard the close": the group's bookkeeping a write leaves to `after` (not alone) is
 * guarded by the task's deadline message, which is dropped only once it is done. A deadline kept
 * in the expiry index (shared/tasks/triggers.ts) is never dropped and acts only at the deadline, so
 * a safety net guards the bookkeeping instead: put before the write, deleted after the close (the
 * executor's `performAfter`), it fires if a crash cut the close short and redoes it
 * (transitions.ts `safetyNet`). A plan whose net guards its propagation already needs no second one.
 */
export function guardGroupClose(p: Plan, deadlineTrigger: DeadlineRef | undefined): Plan {
  const close = p.after.find((e): e is EffectOf<'close-group'> => e.kind === 'close-group');
  if (!p.task || !close || close.alone || deadlineTrigger !== INDEXED_DEADLINE || p.before.some((e) => e.kind === 'put-safety-net')) return p;
  return {
    ...p,
    before: [...p.before, effect.putSafetyNet(close.taskId, close.runId)],
    after: [...p.after, effect.deleteSafetyNet(close.taskId, close.runId)],
  };
}
