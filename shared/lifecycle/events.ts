/**
 * The events of task writes, as their plans list them (plan.ts `events` and `replay`): how they are
 * guarded until delivered, delivered after the commit, delivered again for an idempotent repeat or
 * a replay, and the task-group-resolved a group's close owes. Built on the event recorder
 * (shared/events/recorder.ts: guards, delivery, the outbox on history rows); the executor reaches
 * them through `TaskEvents`.
 */
import { taskStatus, type Run, type TaskRecord } from '../tasks/model';
import type { DeadlineSweep } from '../tasks/triggers';
import type { EventRecorder, PreparedEvents } from '../events/recorder';
import { EXCHANGE_PREFIX, QueueEvent, ccRoutes, groupResolvedEvent, taskRoutingKey } from '../events/exchanges';
import { readTaskEvents } from '../events/outbox';
import type { Logger } from '../log';
import type { Replay } from './records';

/** A task's events fit one page: at most 50 runs of a handful of events each. */
const MAX_EVENTS_READ = 1000;

/**
 * A task write's new events (on its history rows), with what can guard them until delivered:
 * `claim`, the run whose claim-expiry trigger does (`alsoClaimOf`: its claim's event is delivered
 * again too), else `deadline`, the deadline trigger the write puts (createTask, rerunTask), else a
 * sweep trigger of their own.
 */
export interface TaskEventPlan {
  taskId: string;
  events: QueueEvent[];
  claim?: { runId: number; alsoClaimOf?: number };
  deadline: boolean;
}

/** The task-group-resolved a group's close owes: published if the close left the group without an unresolved task. */
export interface GroupResolution {
  taskGroupId: string;
  schedulerId: string;
  taskId: string;
  runId: number;
}

/** How one task write's events travel, as `prepare` decided. */
export interface WriteEvents extends PreparedEvents {
  /** The deadline trigger the write puts also guards its events, as this sweep (no trigger of their own). */
  deadlineSweep?: DeadlineSweep;
  /** A claim-expiry trigger that the write's `after` effects drop guards them: those wait for their delivery. */
  guarded: boolean;
}

/** The executor's events port. */
export interface TaskEvents {
  /** Before the write (and its `before` effects): how its planned events are guarded until delivered. */
  prepare(p: TaskEventPlan): Promise<WriteEvents>;
  /** After the commit: true if delivered. Throws only if a guarded write's events are neither delivered nor swept (its guard must stay). */
  deliver(w: WriteEvents): Promise<boolean>;
  /** A plan's replay (records.ts `Replay`): recorded events delivered again, with their ids; how many. */
  replay(task: TaskRecord, r: Replay): Promise<number>;
  /** A group's close is done (`empty`: known without a read): its task-group-resolved, if owed. Throws if not delivered. */
  groupResolved(g: GroupResolution, empty: boolean): Promise<void>;
  /**
   * Whether anyone listens to a running run's events (its task-running, and the events its end
   * would publish): then its claim-expiry trigger is a message, which guards them all.
   */
  runListened(task: TaskRecord, runId: number): Promise<boolean>;
}

/** Where a replay's events would go (their exchange, routing key and CCs), known without a read. */
function replayRoutes(task: TaskRecord, r: Replay): Pick<QueueEvent, 'exchange' | 'routingKey' | 'routes'>[] {
  const status = taskStatus(task);
  const routes = ccRoutes(task.definition.routes);
  const at = (exchange: string, run?: Run) => ({
    exchange: EXCHANGE_PREFIX + exchange,
    routingKey: taskRoutingKey(status, run && { runId: run.runId, workerGroup: run.workerGroup, workerId: run.workerId }),
    routes,
  });
  if (r.kind === 'defined') return [at('task-defined'), ...(r.pendingRun0 ? [at('task-pending', task.runs[0])] : [])];
  const run = task.runs[r.runId];
  const next = task.runs[r.runId + 1];
  const ends = ['task-completed', 'task-failed', 'task-exception'].map((e) => at(e, run));
  return [...(r.kind === 'run' ? [at('task-running', run)] : []), ...ends, ...(next ? [at('task-pending', next)] : [])];
}

export function taskEventPort(recorder: EventRecorder, opts: { hasOpen: (taskGroupId: string) => Promise<boolean>; log: Logger }): TaskEvents {
  const { dispatcher } = recorder;
  return {
    /**
     * The guard, if anyone listens: the run's claim-expiry trigger, else the deadline trigger the
     * write puts (one update after delivery instead of a sweep trigger's put and delete), else a
     * sweep trigger.
     */
    async prepare(p) {
      const { events, taskId, claim } = p;
      const seqs = events.map((e) => e.seq);
      if ((claim || p.deadline) && (await dispatcher.interested(events))) {
        if (!claim) return { events, deadlineSweep: { seqs, delayS: recorder.opts.sweepDelayS() }, guarded: false };
        return { events, guard: { taskId, seqs }, ...(claim.alsoClaimOf === undefined ? {} : { alsoClaimOf: claim.alsoClaimOf }), guarded: true };
      }
      return { ...(await recorder.prepare(events, () => ({ kind: 'task', taskId, seqs }))), guarded: false };
    },

    deliver: (w) => recorder.delivered(w),

    /**
     * Taskcluster publishes an idempotent repeat's messages again, and a replayed claim (or a claim
     * expiry that finds its run ended) may follow a delivery a crash cut short: the recorded events
     * go again, with their ids (consumers drop repeats by id). The first delivery was guarded, so a
     * repeat's is a courtesy: a failure is logged, not raised. A run's claim-expiry trigger (`run`)
     * is their guard: its failure is raised, so the trigger comes back.
     */
    async replay(task, r) {
      const { taskId } = task;
      if (r.kind === 'run') return recorder.redeliverRun(taskId, r.runId);
      if (!(await dispatcher.interested(replayRoutes(task, r)))) return 0;
      try {
        let events: QueueEvent[];
        // The row's held entries come with it: only events already in history rows are read.
        if (r.kind === 'end') events = (await recorder.runEvents(taskId, r.runId, task.historyHeld ?? [])).ended;
        else {
          const { events: all } = await readTaskEvents(recorder.storage, taskId, MAX_EVENTS_READ, undefined, task.historyHeld ?? []);
          const wanted = (e: QueueEvent) =>
            e.exchange === EXCHANGE_PREFIX + 'task-defined' || (r.pendingRun0 && e.exchange === EXCHANGE_PREFIX + 'task-pending' && e.payload.runId === 0);
          events = all.filter(wanted).sort((a, b) => a.seq - b.seq);
        }
        // Events of the task's own history: a fan-out message finds them there again.
        if (await dispatcher.deliverBounded(events)) await recorder.handOff({ kind: 'task', taskId, seqs: events.map((e) => e.seq) });
        return events.length;
      } catch (err) {
        opts.log.warn('event-republish-failed', { taskId, error: String((err as Error)?.message ?? err) });
        return 0;
      }
    },

    runListened: (task, runId) => dispatcher.interested(replayRoutes(task, { kind: 'run', runId })),

    /** Nobody listening: not even the read of the group's open rows. */
    async groupResolved(g, empty) {
      const event = groupResolvedEvent(g.taskGroupId, g.schedulerId, g);
      if (!(await dispatcher.interested([event]))) return;
      if (!empty && (await opts.hasOpen(g.taskGroupId))) return;
      // The event is the record of itself: a fan-out message carries it.
      if (await dispatcher.deliverBounded([event])) await recorder.handOff({ kind: 'event', event });
    },
  };
}
