/**
 * The one place that says what a task write does (the Plan of shared/tasks/plan.ts): pure, from
 * the row before, the transition's step, the time and the actor. Besides the step's own effects it
 * derives, from the runs before and after (the history entries, then what follows from them):
 *   - the history rows (shared/ops/history.ts), numbered on from the row's history count;
 *   - the events (shared/events/exchanges.ts), one per history entry that has one, stored on its
 *     history row (the outbox), and the trigger that can guard them until delivered;
 *   - the operator index changes (shared/ops/indexes.ts) and, from the history entries, the chart
 *     tally (shared/ops/rollups.ts);
 *   - the log lines: a `task-transition` per history entry, and the step's own.
 */
import type { Effect, EffectOf } from '../tasks/effects';
import type { TaskRecord } from '../tasks/model';
import type { DeletionPlan, Plan, PlannedEvents, Planner, ReadModelWrites, LogLine } from '../tasks/plan';
import type { Step } from '../tasks/transitions';
import { historyKeys, historyRows } from '../ops/history';
import { indexOps, repairOps } from '../ops/indexes';
import { transitionTally } from '../ops/rollups';
import type { ReadModelPlan } from '../ops/read-models';
import { taskEvents } from '../events/exchanges';
import { attachToHistoryRows } from '../events/outbox';
import type { TaskEventPlan } from '../events/recorder';

/**
 * Run endings not reported by the run's worker: nothing proves the worker got its claim, so the
 * claim's event is sent again (a worker declared gone: before the write, shared/tasks/resolve.ts).
 */
const ENDED_WITHOUT_WORKER = new Set(['canceled', 'deadline-exceeded', 'claim-expired']);

/**
 * The run whose claim-expiry trigger guards the events of the write `before` → `after`, if any:
 * a run claimed by the write (its trigger exists before the write, and stays until the run ends),
 * or a running run it ends (its trigger is dropped only after this write's delivery). A run's
 * claim and end are guarded by the same trigger; it delivers both again if it fires (`redeliverRun`).
 */
export function claimGuard(before: TaskRecord | undefined, after: TaskRecord, putsClaim: boolean): TaskEventPlan['claim'] {
  for (const a of after.runs) {
    const b = before?.runs[a.runId];
    if (b?.state === 'pending' && a.state === 'running' && (putsClaim || a.claimTrigger)) return { runId: a.runId };
    if (b?.state === 'running' && b.claimTrigger && a.state !== 'running') {
      const ended = a.reasonResolved && ENDED_WITHOUT_WORKER.has(a.reasonResolved);
      return ended ? { runId: a.runId, alsoClaimOf: a.runId } : { runId: a.runId };
    }
  }
  return undefined;
}

const has = (effects: Effect[], kind: Effect['kind']) => effects.some((e) => e.kind === kind);

/** The plan of the write of `step` over `before` (undefined: the task is new). */
export function planWrite(before: TaskRecord | undefined, step: Step, now: Date, actor: string | undefined): Plan {
  const own: LogLine[] = step.effects.filter((e): e is EffectOf<'log'> => e.kind === 'log');
  const after = step.effects.filter((e) => e.phase === 'after' && e.kind !== 'log');
  if (before && step.next === before) return { before: [], rows: [], groupRows: [], after, log: own, transitions: 0 };
  const effects = step.effects.filter((e) => e.phase === 'before');
  // Its own copy: numbering the history sets the row's count.
  const task: TaskRecord = { ...step.next };
  const { taskId } = task;
  const { taskQueueId } = task.definition;
  const { rows, entries } = historyRows(before, task, now.toJSON(), actor);
  const events = taskEvents(entries, task);
  attachToHistoryRows(rows, events);
  const guarded: TaskEventPlan = { taskId, events, deadline: has(effects, 'put-deadline-trigger') };
  const claim = claimGuard(before, task, has(effects, 'put-claim-trigger'));
  if (claim) guarded.claim = claim;
  const readModel: ReadModelPlan = {
    taskId,
    taskQueueId,
    ...(task.indexBuckets ? { indexBuckets: task.indexBuckets } : {}),
    index: indexOps(before, task),
    repair: repairOps(before, task),
    deleted: false,
    tally: transitionTally(entries, task),
  };
  const transitions = entries.map(({ event, ...e }): LogLine => ({ event: 'task-transition', fields: { taskId, taskQueueId, transition: event, ...e } }));
  return {
    before: effects,
    task,
    rows,
    groupRows: [],
    foldable: after.find((e): e is EffectOf<'close-group'> => e.kind === 'close-group' && !!e.alone && e.taskGroupId === taskId),
    after,
    readModel: readModel as unknown as ReadModelWrites,
    events: guarded as unknown as PlannedEvents,
    log: [...transitions, ...own],
    transitions: entries.filter((e) => e.runId !== undefined).length,
  };
}

/** What deleting `task` does besides its row (undefined: the row is gone already, its history may not be). */
export function planDeletion(task: TaskRecord | undefined): DeletionPlan {
  const readModel: ReadModelPlan | undefined = task && {
    taskId: task.taskId,
    taskQueueId: task.definition.taskQueueId,
    index: indexOps(task, undefined),
    repair: [],
    deleted: true,
  };
  return { ...(readModel ? { readModel: readModel as unknown as ReadModelWrites } : {}), history: historyKeys(task) };
}

export const planner: Planner = { write: planWrite, deletion: planDeletion };
