/**
 * The one place that says what a task write does (the Plan of shared/lifecycle/plan.ts): pure, from
 * the transition's step (its named record, the row it wrote, its effects), the time and the actor.
 * Besides the step's own effects it derives from the record (`historyOf`, one case per name):
 *   - the history entries (shared/ops/history.ts), numbered on from the row's count, held in the
 *     row (`holdHistory`) or, when they would not fit there, written as history rows;
 *   - the events (shared/events/exchanges.ts), one per history entry that has one, stored with
 *     its entry (the outbox), and the trigger that guards them until delivered (`claimGuard`);
 *   - the operator index changes (shared/ops/indexes.ts) and the chart tally (shared/ops/rollups.ts);
 *   - the log lines: a `task-transition` per history entry, and the step's own.
 * Nothing here compares the row before and after: the record says what happened.
 */
import type { Effect, EffectOf } from './effects';
import type { TaskRecord } from '../tasks/model';
import type { DeletionPlan, Plan, LogLine } from './plan';
import type { TransitionRecord } from './records';
import type { Step } from './transitions';
import {
  claimedEntry,
  createdEntry,
  historyKeys,
  historyRowsOf,
  holdHistory,
  numberHistory,
  resolvedEntry,
  scheduledEntry,
  type Transition,
} from '../ops/history';
import { deletionOps, indexOps, repairOps } from '../ops/indexes';
import { transitionTally } from '../ops/rollups';
import type { ReadModelPlan } from '../ops/read-models';
import { taskEvents } from '../events/exchanges';
import { isMessage } from '../tasks/triggers';
import { attachToHistoryRows } from '../events/outbox';
import type { GroupResolution, TaskEventPlan } from './events';

/** The history entries of a write, in order (a retried run's end before its retry), from its record and the row it wrote. */
export function historyOf(record: TransitionRecord, task: TaskRecord): Transition[] {
  switch (record.name) {
    case 'create':
      return [createdEntry(), ...(record.scheduled ? [scheduledEntry(task, 0)] : []), ...(record.claimed ? [claimedEntry(task, 0, 'claimed')] : [])];
    case 'schedule':
    case 'rerun':
      return [scheduledEntry(task, record.runId)];
    case 'claim':
      return [claimedEntry(task, record.runId, 'claimed')];
    case 'reclaim':
      return [claimedEntry(task, record.runId, 'reclaimed')];
    case 'report':
    case 'claim-expired':
    case 'worker-gone':
      return [resolvedEntry(task, record.runId, 'running'), ...(record.retry === undefined ? [] : [scheduledEntry(task, record.retry)])];
    case 'suspend':
      return [resolvedEntry(task, record.runId, 'running'), scheduledEntry(task, record.resumed)];
    case 'deadline':
      return record.ended.map((e) => resolvedEntry(task, e.runId, e.from));
    case 'cancel':
      return [resolvedEntry(task, record.ended.runId, record.ended.from)];
    case 'change-priority':
      // Its event is task-priority-changed: from and to are priorities.
      return [{ event: 'prioritized', from: record.from, to: record.to, reason: 'priority-changed' }];
    case 'rehint':
    case 'propagated':
    case 'dependent-added':
    case 'mark-uploads':
    case 'repeat':
      return [];
  }
}

/**
 * The run whose claim-expiry trigger guards the write's events, if any: the run a claim put it
 * for (it exists before the write and stays until the run ends; the executor makes it a message
 * when anyone listens, else it guards nothing), or a running run the write ends, when its trigger
 * is a message (dropped only after this write's delivery). A run's claim and end are guarded by
 * the same trigger; it delivers both again if it fires (the claim expiry's `run` replay). Endings
 * not reported by the run's worker (cancel, deadline, claim expiry, worker gone) send the claim's
 * event again too: nothing proves the worker got it.
 */
export function claimGuard(record: TransitionRecord, task: TaskRecord): TaskEventPlan['claim'] {
  const ending = (runId: number, from: string | null, withoutWorker: boolean): TaskEventPlan['claim'] => {
    // A trigger kept in the expiry index guards no events (shared/tasks/triggers.ts `claim`).
    if (from !== 'running' || !isMessage(task.runs[runId].claimTrigger)) return undefined;
    return withoutWorker ? { runId, alsoClaimOf: runId } : { runId };
  };
  switch (record.name) {
    case 'claim':
      return { runId: record.runId };
    case 'create':
      return record.claimed ? { runId: 0 } : undefined;
    case 'report':
    case 'suspend':
      return ending(record.runId, 'running', false);
    case 'claim-expired':
    case 'worker-gone':
      return ending(record.runId, 'running', true);
    case 'cancel':
      return ending(record.ended.runId, record.ended.from, true);
    case 'deadline':
      return record.ended.map((e) => ending(e.runId, e.from, true)).find((g) => g);
    default:
      return undefined;
  }
}

const has = (effects: Effect[], kind: Effect['kind']) => effects.some((e) => e.kind === kind);

/** The task-group-resolved a close-group effect owes (published if the close leaves the group without an unresolved task). */
function groupResolution(after: Effect[]): GroupResolution | undefined {
  const close = after.find((e): e is EffectOf<'close-group'> => e.kind === 'close-group');
  return close && { taskGroupId: close.taskGroupId, schedulerId: close.schedulerId, taskId: close.taskId, runId: close.runId };
}

/** The plan of the write of `step` (its record, the row it wrote, its effects). */
export function planWrite(step: Step, now: Date, actor: string | undefined): Plan {
  const { record } = step;
  const own: LogLine[] = step.effects.filter((e): e is EffectOf<'log'> => e.kind === 'log');
  const after = step.effects.filter((e) => e.phase === 'after' && e.kind !== 'log');
  const groupResolved = groupResolution(after);
  const owed = groupResolved ? { groupResolved } : {};
  if (record.name === 'repeat')
    return { before: [], rows: [], groupRows: [], after, log: own, transitions: 0, ...owed, ...(record.replay ? { replay: record.replay } : {}) };
  const effects = step.effects.filter((e) => e.phase === 'before');
  // Its own copy: numbering the history sets the row's count.
  const task: TaskRecord = { ...step.next };
  const { taskId } = task;
  const { taskQueueId } = task.definition;
  const changes = historyOf(record, task);
  const entries = numberHistory(changes, task, now.toJSON(), actor);
  const events = taskEvents(entries, task);
  const flushed = holdHistory(task, entries, events);
  const rows = historyRowsOf(taskId, flushed.entries);
  attachToHistoryRows(rows, flushed.events);
  const guarded: TaskEventPlan = { taskId, events, deadline: has(effects, 'put-deadline-trigger') };
  const claim = claimGuard(record, task);
  if (claim) guarded.claim = claim;
  const readModel: ReadModelPlan = {
    taskId,
    taskQueueId,
    ...(task.indexBuckets ? { indexBuckets: task.indexBuckets } : {}),
    index: indexOps(changes, task),
    repair: repairOps(changes, task),
    deleted: false,
    tally: transitionTally(entries, task),
  };
  const transitions = entries.map(({ event, ...e }): LogLine => ({ event: 'task-transition', fields: { taskId, taskQueueId, transition: event, ...e } }));
  const ownGroup =
    record.name === 'create' ? effects.find((e): e is EffectOf<'add-group-member'> => e.kind === 'add-group-member' && e.taskGroupId === taskId) : undefined;
  return {
    before: effects,
    task,
    rows,
    groupRows: [],
    ...(ownGroup ? { ownGroup } : {}),
    after,
    readModel,
    events: guarded,
    ...owed,
    log: [...transitions, ...own],
    transitions: entries.filter((e) => e.runId !== undefined).length,
  };
}

/** What deleting `task` does besides its row (undefined: the row is gone already, its history may not be). */
export function planDeletion(task: TaskRecord | undefined): DeletionPlan {
  const readModel: ReadModelPlan | undefined = task && {
    taskId: task.taskId,
    taskQueueId: task.definition.taskQueueId,
    index: deletionOps(task),
    repair: [],
    deleted: true,
  };
  return { ...(readModel ? { readModel } : {}), history: historyKeys(task) };
}
