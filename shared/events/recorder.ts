/**
 * The hook points that make every committed change publish its events, never lost:
 *
 *   before the write   `prepare*`  decide the guard: the write's claim-expiry or deadline trigger,
 *                                  or a sweep trigger put now (only if events have somewhere to go)
 *   with the write     outbox      the events ride on the transition's history rows (its plan puts them there)
 *   after the commit   `deliver` / `delivered`  deliver, then drop the sweep trigger; more
 *                                  subscribers than a request serves get one fan-out message
 *   reaper             `sweep`     deliver what a crash between commit and delivery left, and
 *                                  expand fan-out messages
 *
 * Task writes reach them through the lifecycle (shared/lifecycle/events.ts), with the events their
 * plan lists; createArtifact, sealTaskGroup and hook writes call them directly.
 */
import type { Storage } from '../storage/storage';
import type { HeldEntry, TaskRecord } from '../tasks/model';
import type { DeadlineSweep, TriggerRef } from '../tasks/triggers';
import type { Logger } from '../log';
import {
  QueueEvent,
  artifactEvent,
  announcesArtifact,
  groupSealedEvent,
  ArtifactInfo,
  GroupInfo,
  EXCHANGE_PREFIX,
  HookExchange,
  hookChangedEvent,
} from './exchanges';
import { SweepTrigger, dropSweepTrigger, putSweepTrigger, readTaskOutbox, readTaskEvents, rearmSweepTrigger } from './outbox';
import type { EventDispatcher } from './dispatch';

/** A task's events fit one page: at most 50 runs of a handful of events each. */
const MAX_EVENTS_READ = 1000;

export interface RecorderOptions {
  /** The sweep fires this long after it was put, if delivery has not deleted it by then. */
  sweepDelayS: () => number;
}

/** A change about to be written whose events must be delivered once it commits. */
export interface PreparedEvents {
  events: QueueEvent[];
  trigger?: TriggerRef;
  /** The body of `trigger` (it becomes the fan-out message if one is needed). */
  sweep?: SweepTrigger;
  /** The write's deadline trigger guards them (shared/tasks/triggers.ts DeadlineTrigger.sweep). */
  deadlineSweep?: DeadlineSweep;
  /**
   * No sweep trigger of its own: the write claims or ends a run, whose claim-expiry trigger is
   * dropped only after this delivery (the executor's `after` effects wait for it) and, if it
   * fires first, delivers the events again (the claim expiry's replay). A failed delivery puts a sweep
   * trigger before the drop.
   */
  guard?: { taskId: string; seqs: number[] };
  /** The write ended this run without its worker (cancel, deadline, claim expiry, worker gone): its task-running is delivered again. */
  alsoClaimOf?: number;
}

/** Exchanges of a run's resolution (and the retry's or resumed run's task-pending that may follow it in the same write). */
const RUN_END_EXCHANGES = new Set(['task-completed', 'task-failed', 'task-exception'].map((e) => EXCHANGE_PREFIX + e));

export class EventRecorder {
  constructor(
    readonly storage: Storage,
    readonly dispatcher: EventDispatcher,
    private readonly log: Logger,
    readonly opts: RecorderOptions,
  ) {}

  /** Before a write: the sweep trigger that guarantees delivery if we die after the commit. */
  async prepare(events: QueueEvent[], trigger: (events: QueueEvent[]) => SweepTrigger): Promise<PreparedEvents> {
    if (!(await this.dispatcher.interested(events))) return { events };
    const sweep = trigger(events);
    return { events, sweep, trigger: await putSweepTrigger(this.storage, sweep, this.opts.sweepDelayS()) };
  }

  /**
   * After the commit: deliver, then drop the trigger. Throws only for a guarded write whose
   * delivery and fallback sweep trigger both failed (then its guard must stay); otherwise the sweep
   * retries what failed.
   */
  async delivered(p: PreparedEvents | undefined): Promise<boolean> {
    if (!p || !p.events.length) return false;
    try {
      const claim = p.alsoClaimOf === undefined || !p.guard ? [] : (await this.runEvents(p.guard.taskId, p.alsoClaimOf)).claim;
      const events = [...claim, ...p.events];
      const sweep = p.sweep ?? sweepOf(p);
      if (!sweep) {
        await this.dispatcher.deliver(events);
        return true;
      }
      if (await this.dispatcher.deliverBounded(events)) await this.handOff(sweep, p.trigger);
      else await dropSweepTrigger(this.storage, p.trigger);
      return true;
    } catch (err) {
      this.log.error('event-delivery-failed', { ids: p.events.map((e) => e.id), error: String((err as Error)?.message ?? err) });
      if (p.guard) {
        const { taskId, seqs } = p.guard;
        const sweep: SweepTrigger = p.alsoClaimOf === undefined ? { kind: 'task', taskId, seqs } : { kind: 'run', taskId, runId: p.alsoClaimOf };
        await putSweepTrigger(this.storage, sweep, this.opts.sweepDelayS());
      }
      return false;
    }
  }

  /**
   * More subscriptions match than a request delivers to (INLINE_FANOUT): one fan-out message,
   * visible at once, that the reaper's event sweep expands into their queues (`fanout`: the
   * request delivered to the system subscription and the sinks). The write's own sweep trigger
   * becomes it (one call instead of its delete); otherwise one is put. Either way the events stay
   * guarded: the message is deleted only once every subscription has them.
   */
  async handOff(sweep: SweepTrigger, own?: TriggerRef): Promise<void> {
    const fanout: SweepTrigger = { ...sweep, fanout: this.dispatcher.now().toJSON() };
    if (own && (await rearmSweepTrigger(this.storage, own, fanout, 0))) return;
    await putSweepTrigger(this.storage, fanout, 0);
  }

  // ---- tasks ----

  /**
   * The recorded events of run `runId`: its claim's task-running, and its end (with the pending run
   * that may follow it). `held`: the entries the task's row holds, when the caller has the row.
   */
  async runEvents(taskId: string, runId: number, held?: HeldEntry[]): Promise<{ claim: QueueEvent[]; ended: QueueEvent[] }> {
    const { events } = await readTaskEvents(this.storage, taskId, MAX_EVENTS_READ, undefined, held);
    const sorted = [...events].sort((a, b) => a.seq - b.seq);
    const isEnd = (e: QueueEvent) =>
      (e.payload.runId === runId && RUN_END_EXCHANGES.has(e.exchange)) || (e.payload.runId === runId + 1 && e.exchange === EXCHANGE_PREFIX + 'task-pending');
    return { claim: sorted.filter((e) => e.payload.runId === runId && e.exchange === EXCHANGE_PREFIX + 'task-running'), ended: sorted.filter(isEnd) };
  }

  /**
   * Run `runId`'s claim-expiry trigger fired (shared/reaper/handlers.ts), or its claim was replayed to
   * a worker that may have missed it: delivers again what that trigger guards (the claim's event and,
   * once the run ended, the events of the write that ended it), as a crash may have cut them short.
   */
  async redeliverRun(taskId: string, runId: number, fanout?: string): Promise<number> {
    if (!(await this.dispatcher.anyTarget())) return 0;
    const { claim, ended } = await this.runEvents(taskId, runId);
    await this.deliverAll([...claim, ...ended], fanout);
    return claim.length + ended.length;
  }

  /** Everywhere, or (`fanout`: a fan-out message handed off then) only to the subscriptions that existed then. */
  private async deliverAll(events: QueueEvent[], fanout?: string): Promise<void> {
    if (fanout) await this.dispatcher.deliverToSubscriptions(events, new Date(fanout));
    else await this.dispatcher.deliver(events);
  }

  // ---- artifacts: the trigger carries the event; the artifact row proves the write ----

  /** `present`: the write makes the artifact visible (an object artifact only at finishArtifact). */
  async prepareArtifact(task: TaskRecord, runId: number, a: ArtifactInfo, present = true): Promise<PreparedEvents> {
    if (!announcesArtifact(a.storageType, present)) return { events: [] };
    return this.prepare([artifactEvent(task, runId, a)], ([event]) => ({ kind: 'artifact', taskId: task.taskId, runId, name: a.name, event }));
  }

  // ---- groups: sealing happens once; the sealed group row proves it ----

  async prepareGroupSealed(g: GroupInfo, sealedAt: string): Promise<PreparedEvents> {
    return this.prepare([groupSealedEvent({ ...g, sealed: sealedAt })], ([event]) => ({ kind: 'group-sealed', taskGroupId: g.taskGroupId, event }));
  }

  // ---- hooks: the hook row (or its absence, for a delete) proves the write ----

  /**
   * Before a hook write: its hook-created / -updated / -deleted event, guarded until delivered.
   * `digest`: of the definition the write stores (none for a delete).
   */
  async prepareHookChanged(change: HookExchange, hookGroupId: string, hookId: string, callId: string, digest?: string): Promise<PreparedEvents> {
    return this.prepare([hookChangedEvent(change, hookGroupId, hookId, callId)], ([event]) => ({
      kind: 'hook',
      hookGroupId,
      hookId,
      event,
      ...(digest === undefined ? {} : { digest }),
    }));
  }

  /**
   * A client or role write announced as Taskcluster's auth service does: the event's sweep trigger
   * goes before the write and carries the event, so a crash after the write never loses it; a
   * write that fails drops it. (A crash between the two can announce a change that did not land:
   * consumers read the client or role again, as they would anyway.)
   */
  async announced<T>(event: QueueEvent, write: () => Promise<T>): Promise<T> {
    const p = await this.prepare([event], ([e]) => ({ kind: 'event', event: e }));
    let out: T;
    try {
      out = await write();
    } catch (err) {
      await this.discard(p);
      throw err;
    }
    await this.delivered(p);
    return out;
  }

  /** The write these events were prepared for did not happen: drop their sweep trigger. */
  async discard(p: PreparedEvents | undefined): Promise<void> {
    await dropSweepTrigger(this.storage, p?.trigger);
  }

  /** An event not tied to a stored write (a call's summary): a sweep trigger, then delivery, as for the others. */
  async publish(event: QueueEvent): Promise<void> {
    await this.delivered(await this.prepare([event], ([e]) => ({ kind: 'event', event: e })));
  }

  /**
   * Reaper: delivers what the write behind a sweep trigger committed. Throws on delivery failure,
   * so the trigger comes back and is tried again.
   */
  async sweep(
    t: SweepTrigger,
    /** `artifact`: the artifact is there and visible (a finished object artifact). */
    exists: {
      artifact(taskId: string, runId: number, name: string): Promise<boolean>;
      groupSealed(taskGroupId: string): Promise<string | undefined>;
      /** The digest of the hook's definition (`definitionDigest`), undefined without the hook. */
      hook(hookGroupId: string, hookId: string): Promise<string | undefined>;
    },
  ): Promise<number> {
    let events: QueueEvent[] = [];
    if (t.kind === 'task') events = await readTaskOutbox(this.storage, t.taskId, t.seqs);
    else if (t.kind === 'artifact') events = (await exists.artifact(t.taskId, t.runId, t.name)) ? [t.event] : [];
    else if (t.kind === 'group-sealed') {
      const sealed = await exists.groupSealed(t.taskGroupId);
      // Only the sealing that won is reported (a concurrent seal may have stamped another time).
      events = sealed ? [groupSealedEvent({ ...(t.event.payload as unknown as GroupInfo), sealed })] : [];
    } else if (t.kind === 'hook') {
      // Created or updated: the hook holds the definition written (a later change announces itself). Deleted: no hook.
      const current = await exists.hook(t.hookGroupId, t.hookId);
      events = (t.digest === undefined ? current === undefined : current === t.digest) ? [t.event] : [];
    } else if (t.kind === 'event') events = [t.event];
    else if (t.kind === 'run') return this.redeliverRun(t.taskId, t.runId, t.fanout);
    await this.deliverAll(events, t.fanout);
    return events.length;
  }
}

/** The sweep trigger that delivers a guarded write's events again (from the task's outbox), if it has one. */
function sweepOf(p: PreparedEvents): SweepTrigger | undefined {
  if (p.guard)
    return p.alsoClaimOf === undefined
      ? { kind: 'task', taskId: p.guard.taskId, seqs: p.guard.seqs }
      : { kind: 'run', taskId: p.guard.taskId, runId: p.alsoClaimOf };
  const taskId = (p.events[0]?.payload as { status?: { taskId?: string } }).status?.taskId;
  if (p.deadlineSweep && taskId) return { kind: 'task', taskId, seqs: p.deadlineSweep.seqs };
  return undefined;
}
