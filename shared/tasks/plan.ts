/**
 * A plan: everything one task write does, in the order the executor (executor.ts) carries it out.
 *
 *   before      effects that must exist before the row says so (hints, triggers, expiry, group)
 *   task, rows  the ETag-guarded transaction: the task row, its history rows (each carrying the
 *               write's event: the outbox), and group rows a named step folds in
 *   after       effects once the write took effect (drops, wakes, propagation, group bookkeeping)
 *   readModel   operator index and rollup writes, after the row (the task row is the truth)
 *   events      the write's events, for the events port to guard and deliver
 *   log         structured log lines of the write
 *
 * The story of a write: a row of the state table (README) is a transition (transitions.ts), which
 * returns its named record (records.ts); one pure function makes the plan from the record, the row
 * it wrote, its effects, the time and the actor: `Planner.write` (shared/plans/plan.ts). It derives
 * history, events and read-model writes from the record, so nothing else infers them; it reaches
 * the executor as `TaskDeps.plan` because it builds on the history, events and index modules,
 * which build on this folder. The executor (executor.ts) carries the plan out; its two named plan
 * steps below put group rows into the row's transaction.
 */
import type { Entity, KeyRange, TableAction } from '../storage/storage';
import type { Effect, EffectOf, LogEntry } from './effects';
import type { LogEventAt } from '../log-events';
import type { TaskRecord } from './model';
import type { Step } from './transitions';

/** The write's events as planned; read only by the events port (shared/events/recorder.ts). */
export interface PlannedEvents {
  readonly planned: 'events';
}

/** The write's operator read-model changes as planned; read only by the read-model port (shared/ops/read-models.ts). */
export interface ReadModelWrites {
  readonly planned: 'read-model';
}

/** A registered info event with its fields (shared/log-events.ts). */
export type LogLine = LogEntry<LogEventAt<'info'>>;

export interface Plan {
  before: Effect[];
  /** The row to write, with its history count; undefined for a `repeat` record (the row is unchanged; it owes only `after`). */
  task?: TaskRecord;
  /** Rows of the task's partition in the row's transaction: its history rows, with the events on them. */
  rows: Entity[];
  /** Other rows of the task's partition in the same transaction (named steps: `createOwnGroup`, `foldGroupClose`). */
  groupRows: TableAction[];
  /** A create's membership of the group the task starts (its taskGroupId is its taskId), which its write may carry. */
  ownGroup?: EffectOf<'add-group-member'>;
  /** A group of one's close this write may carry (the task created its group in its own transaction). */
  foldable?: EffectOf<'close-group'>;
  after: Effect[];
  readModel?: ReadModelWrites;
  events?: PlannedEvents;
  log: LogLine[];
  /** Run transitions in the write (the reaper reports them per pass). */
  transitions: number;
}

/** What deleting a task (expired, or refused at creation) does besides the row. */
export interface DeletionPlan {
  /** Its index rows, removed before the row (the row says which they are); none when the row is gone already. */
  readModel?: ReadModelWrites;
  /** Its history rows: their keys, from the row's history count, or the range to read them from. */
  history: string[] | KeyRange;
}

export interface Planner {
  write(step: Step, now: Date, actor: string | undefined): Plan;
  deletion(task: TaskRecord | undefined): DeletionPlan;
}

/**
 * Plan step "own group": a task that starts its own group creates the group's rows (`createActions`)
 * in its row's transaction, as the group's rows share the task's partition, instead of joining it
 * before the write; the row then says so (`groupAlone`), which later lets its resolution fold the
 * group's close (`foldGroupClose`). storage-count, simple lifecycle: createTask 4 calls, 5 without
 * (a second Tasks transaction); without it the report cannot fold either (with a listener for
 * task-group-resolved, a Tasks.query more).
 * If the insert fails and no task row is there, the group existed already: the executor joins it
 * as any member does and writes the plan without this step.
 */
export function createOwnGroup(p: Plan, createActions: TableAction[]): Plan {
  const join = p.ownGroup;
  if (!join || !p.task) return p;
  return { ...p, before: p.before.filter((e) => e !== join), task: { ...p.task, groupAlone: true }, groupRows: [...p.groupRows, ...createActions] };
}

/**
 * Plan step "fold": a group of one's close (its open row's delete, on the condition that nobody
 * joined: `closeActions`) goes in the resolution's own transaction, as the group's rows share the
 * task's partition. The `after` close then has no call left, and the group is known empty (no read
 * before task-group-resolved). For a task in its own group (storage-count, simple lifecycle):
 * reportCompleted 4 calls, 5 without (the close), and 2 on its critical path, 3 without; with a
 * listener for task-group-resolved, one read (Tasks.query) fewer too.
 */
export function foldGroupClose(p: Plan, closeActions: TableAction[]): Plan {
  const close = p.foldable;
  if (!close) return p;
  return {
    ...p,
    groupRows: [...p.groupRows, ...closeActions],
    after: p.after.map((e) => (e === close ? { ...close, folded: true as const } : e)),
  };
}
