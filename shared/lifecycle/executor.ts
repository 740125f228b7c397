/**
 * The one executor of task writes: it carries out plans (plan.ts) and nothing else. Its loop:
 * load the row, apply the transition (its named record, records.ts), plan the write from the
 * record, perform the plan's `before` effects, write the row with the plan's rows (ETag-guarded),
 * then the plan's `after` effects, events, read-model writes and log lines (`finish`). On an ETag race it loads again and recomputes; a `before` effect
 * already performed in an earlier attempt (same content: ids and `now` are fixed per call) is not
 * performed again. Crash ordering lives here: whatever a state needs exists before the row says so.
 * Three throughput steps act in the loop, each named with its saving: `cachedRow`, `early` and
 * `expiryWithDeadline`.
 */
import * as slugid from 'slugid';
import type { LifecycleDeps } from './ports';
import type { WriteEvents } from './events';
import { Effect, EffectOf, effectKey, safetyNetOf } from './effects';
import { TaskRecord, isResolved, taskState } from '../tasks/model';
import { Plan, createOwnGroup, guardGroupClose } from './plan';
import { planWrite } from './planner';
import { INDEXED_DEADLINE, isMessage, type ClaimRef, type DeadlineRef } from '../tasks/triggers';
import { Later, Refusal, Result, Step, isLater, isRefusal, propagated, rehint, schedule } from './transitions';
import type { RecordOf } from './records';
import { Rehint, releaseKey } from '../tasks/concurrency-keys';
import { notifyDependents } from './dependencies';
import { taskExpiryRows } from '../tasks/task-expiry';

/** ETag races on one task are short-lived; a handful of retries settles them. */
const MAX_WRITE_ATTEMPTS = 10;

export interface Executed {
  /** The task as written, or as found when the transition changed nothing. */
  task: TaskRecord;
  changed: boolean;
}

/** What a call performed so far: `before` effects by identity, with their trigger refs (a deadline's or a claim's may be its index row). */
type Performed = Map<string, DeadlineRef | ClaimRef | undefined>;

/** Optional extras of one `execute` call, for callers that know more than the transition. */
export interface ExecuteOptions {
  /**
   * A createTask: the step to write while no row exists (an insert); `transition` decides a row
   * found there (an idempotent repeat, or a refusal).
   */
  create?: Step<RecordOf<'create'>>;
  /** A `before` effect the caller started already, side by side with the task read (see `early`). */
  early?: { effect: Effect; ref: Promise<ClaimRef | undefined> };
  /** Runs once the outcome stands (row written, or an idempotent repeat), side by side with the `after` effects. */
  alongside?: () => Promise<void>;
}

/**
 * Runs `transition` on task `taskId` (starting from `known` when given, saving a read). Returns
 * undefined when the task does not exist, the transition's refusal or "later", or the outcome.
 */
export async function execute(
  d: LifecycleDeps,
  taskId: string,
  transition: (t: TaskRecord) => Result,
  known?: TaskRecord,
  options: ExecuteOptions = {},
): Promise<Executed | Refusal | Later | undefined> {
  const performed: Performed = new Map();
  const row = cachedRow(d, taskId, known, !!options.create);
  const own = ownGroup(d);
  const adoptEarly = early(options.early, performed);
  for (let attempt = 0; attempt < MAX_WRITE_ATTEMPTS; attempt++) {
    const current = await row.load();
    if (!current && !options.create) return undefined;
    const result = current ? transition(current) : options.create!;
    if (row.unproven(result)) continue;
    if (isRefusal(result) || isLater(result)) return settleCreate(d, performed, current, result);
    const p = current ? guardGroupClose(planOf(d, result), current.deadlineTrigger) : own.plan(planOf(d, result));
    if (!p.task) {
      await settleCreate(d, performed, current, undefined);
      await finish(d, p, current!, undefined, performed, options.alongside);
      return { task: current!, changed: false };
    }
    await adoptEarly(p);
    const { guarded, w } = await guardEvents(d, p);
    await performBefore(d, expiryWithDeadline(guarded), performed);
    const written = current ? await d.tasks.replace(current, p.task, p.rows, p.groupRows) : await insert(d, p);
    if (!current ? own.failed(written, p) : written === 'etag') continue;
    if (written === 'missing') return undefined;
    await finish(d, p, p.task, w, performed, options.alongside);
    return { task: p.task, changed: true };
  }
  throw new Error(`task ${taskId}: too many concurrent modifications`);
}

/** A create's write: the row inserted, or 'etag' when a row holds the taskId already (the next attempt reads it). */
async function insert(d: LifecycleDeps, p: Plan): Promise<'written' | 'etag'> {
  return (await d.tasks.insert(p.task!, p.rows, p.groupRows)) ? 'written' : 'etag';
}

/**
 * A create that found the taskId taken after it joined the task's group (a concurrent create won
 * the insert): the group row this call added, which the existing task does not hold, is taken back;
 * `result` is passed through.
 */
async function settleCreate<R>(d: LifecycleDeps, performed: Performed, existing: TaskRecord | undefined, result: R): Promise<R> {
  // An effect's key is its content (effects.ts effectKey).
  const joined = [...performed.keys()].map((k) => JSON.parse(k) as Effect).find((e): e is EffectOf<'add-group-member'> => e.kind === 'add-group-member');
  if (!joined || !existing) return result;
  if (existing.definition.taskGroupId !== joined.taskGroupId) await d.groups.removeMember(joined.taskGroupId, joined.taskId, true, joined.created);
  else if (isResolved(taskState(existing))) await d.groups.close(joined.taskGroupId, joined.taskId);
  return result;
}

/**
 * Step "own group" across attempts (plan.ts `createOwnGroup`): a create whose insert carried the
 * rows of the group it starts failed, and no task row is there: the group existed already (a
 * member came first), so the next attempt joins it as any member does, before its row.
 */
function ownGroup(d: LifecycleDeps) {
  let on = true;
  return {
    plan(p: Plan): Plan {
      const join = p.ownGroup;
      return on && join ? createOwnGroup(p, d.groups.createActions(join.taskGroupId, join.taskId, join.schedulerId, join.expires, join.created)) : p;
    },
    failed(written: 'written' | 'etag' | 'missing', p: Plan): boolean {
      if (written === 'written') return false;
      if (p.task?.groupAlone) on = false;
      return true;
    },
  };
}

/** The plan of `step`, at this call's time and actor. */
function planOf(d: LifecycleDeps, step: Step): Plan {
  return planWrite(step, d.now(), d.actor?.()?.actor);
}

/**
 * Step "cached row": the first attempt starts from the row as this instance last wrote or read it
 * (TaskStore.recentRow), when the caller knows none. The ETag-guarded write proves it current;
 * anything but a write (refusal, later, repeat) is decided again on a fresh read. Saves the row
 * read of a request that follows this instance's own write of the task (storage-count, simple
 * lifecycle: claimWork 6 and reportCompleted 3 calls, 7 and 4 without; the report's critical path
 * 1 call, 2 without). It also carries a re-armed deadline trigger's new receipt to the report,
 * which then deletes the trigger (without: it fires later, a read and a delete). A create
 * (`absentFirst`) starts from no row: its insert proves that, and a row found is read then (saves
 * createTask's read: storage-count, simple lifecycle, 4 calls, 5 with it).
 */
function cachedRow(d: LifecycleDeps, taskId: string, known: TaskRecord | undefined, absentFirst: boolean) {
  let current = known ?? (absentFirst ? undefined : d.tasks.recentRow?.(taskId));
  let unproven = !known && current !== undefined;
  let first = true;
  return {
    async load(): Promise<TaskRecord | undefined> {
      if (first && absentFirst && !known) {
        first = false;
        return undefined;
      }
      if (!first || !current) {
        current = await d.tasks.load(taskId);
        unproven = false;
      }
      first = false;
      return current;
    },
    /** The cached row led to no write: decide again on a fresh read. */
    unproven(result: Result): boolean {
      return unproven && (isRefusal(result) || isLater(result) || result.record.name === 'repeat');
    },
  };
}

/**
 * Step "early": claimWork puts the claim-expiry trigger (its expiry-index row) while the row loads;
 * used if the plan owes the same effect (otherwise it is a stale trigger, which its handler finds
 * nothing to do for, or a second trigger of the same claim when the plan owes a message).
 * When the row is read (a claim on another instance than the create's), it takes the put off
 * claimWork's critical path: 4 calls one after another, 5 without (storage-count, cached row off).
 */
function early(started: ExecuteOptions['early'], performed: Performed): (p: Plan) => Promise<void> {
  started?.ref.catch(() => undefined); // awaited only when owed; a refusal never looks at it
  return async (p) => {
    const key = started && effectKey(started.effect);
    if (key && !performed.has(key) && p.before.some((e) => effectKey(e) === key)) performed.set(key, await started.ref);
  };
}

/**
 * The write's events and their guard (shared/events/recorder.ts): a deadline trigger the plan
 * puts anyway may carry their sweep; a claim-expiry trigger the plan puts is a message when it
 * guards the claim's events or anyone listens to the run's (its end's are guarded by it too).
 */
async function guardEvents(d: LifecycleDeps, p: Plan): Promise<{ guarded: Plan; w?: WriteEvents }> {
  if (!d.taskEvents || !p.events) return { guarded: p };
  const events = d.taskEvents;
  const w = await events.prepare(p.events);
  const sweep = w.deadlineSweep;
  const guard = async (e: Effect): Promise<Effect> => {
    if (e.kind === 'put-deadline-trigger' && sweep) return { ...e, sweep };
    if (e.kind === 'put-claim-trigger' && !e.guard && (w.guarded || (await events.runListened(p.task!, e.runId)))) return { ...e, guard: true };
    return e;
  };
  return { guarded: { ...p, before: await Promise.all(p.before.map(guard)) }, w };
}

/**
 * Step "expiry with the deadline": a create whose deadline trigger is an expiry-index row leaves
 * its `record-expiry` to that row, which carries the expiry (shared/tasks/task-expiry.ts): the
 * reaper's sweep records the task's and group's expiry rows at the deadline, before it deletes the
 * row, whatever became of the task. Saves createTask's second expiry-index write (storage-count,
 * simple lifecycle: createTask 4 calls, 5 with it). A deadline that is a message (it guards the
 * write's events, and a resolution drops it) carries nothing: the create records them itself.
 */
function expiryWithDeadline(p: Plan): Plan {
  const carried = new Set(p.before.flatMap((e) => (e.kind === 'put-deadline-trigger' && !e.sweep ? [e.taskId] : [])));
  const rides = (e: Effect) => e.kind === 'record-expiry' && carried.has(e.taskId);
  return p.before.some(rides) ? { ...p, before: p.before.filter((e) => !rides(e)) } : p;
}

/** Once the outcome stands: the plan's log lines, read-model writes, events and `after` effects. */
async function finish(
  d: LifecycleDeps,
  p: Plan,
  task: TaskRecord,
  w: WriteEvents | undefined,
  performed: Performed,
  alongside?: () => Promise<void>,
): Promise<void> {
  const ctx = d.actor?.();
  if (ctx) ctx.transitions += p.transitions;
  for (const line of p.log) d.log.info(line.event, line.fields);
  const after = () => Promise.all([performAfter(d, p, task, performed), alongside?.(), p.replay && replay(d, task, p)]).then(() => undefined);
  await Promise.all([p.readModel && d.readModels?.write(p.readModel), withEvents(d, w, task, after)]);
}

/**
 * After the commit: delivers the write's events side by side with `after`, or before it when a
 * trigger that `after` drops guards them (a failed delivery then keeps the guard: `after` is not
 * run). Delivered events a deadline trigger swept re-arm it for the deadline.
 */
async function withEvents(d: LifecycleDeps, w: WriteEvents | undefined, task: TaskRecord, after: () => Promise<void>): Promise<void> {
  if (!w) return after();
  const delivery = d.taskEvents!.deliver(w).then(async (delivered) => {
    const ref = task.deadlineTrigger;
    if (!delivered || !w.deadlineSweep || !ref || ref === INDEXED_DEADLINE) return;
    const fresh = await d.triggers.rearmDeadline(ref, task.taskId, task.definition.deadline).catch((err) => {
      // It fires after the sweep delay and delivers them again: a duplicate, never a loss.
      d.log.warn('deadline-rearm-failed', { taskId: task.taskId, error: String(err?.message ?? err) });
      return undefined;
    });
    if (!fresh) return;
    d.tasks.amendRecent(task.taskId, (t) => {
      if (t.deadlineTrigger !== INDEXED_DEADLINE && t.deadlineTrigger?.messageId === ref.messageId) t.deadlineTrigger = fresh;
    });
  });
  if (w.guarded) {
    await delivery;
    return after();
  }
  await Promise.all([delivery, after()]);
}

/**
 * `before` effects side by side (each only has to exist before the row, none depends on another),
 * each once per call; trigger refs go into the row they guard. If one fails, the row is not
 * written, and what the others put is at most a stale message or index row, as after a crash.
 */
async function performBefore(d: LifecycleDeps, p: Plan, performed: Performed): Promise<void> {
  const todo = new Map<string, Effect>();
  for (const e of p.before) if (!performed.has(effectKey(e))) todo.set(effectKey(e), e);
  const settled = await Promise.allSettled([...todo].map(async ([key, e]) => performed.set(key, await before(d, e))));
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  for (const e of p.before) {
    const ref = performed.get(effectKey(e));
    if (e.kind === 'put-claim-trigger') p.task!.runs[e.runId].claimTrigger = typeof ref === 'object' ? ref : undefined;
    else if (e.kind === 'put-deadline-trigger') p.task!.deadlineTrigger = ref === INDEXED_DEADLINE || isMessage(ref) ? ref : undefined;
  }
}

async function before(d: LifecycleDeps, e: Effect): Promise<DeadlineRef | ClaimRef | undefined> {
  switch (e.kind) {
    case 'put-hint':
      await d.pending.put(e.taskQueueId, e.priority, e.taskId, e.runId, e.hintId, e.deadline, e.visibleAt);
      return undefined;
    case 'put-claim-trigger':
      return d.triggers.claim(e.taskId, e.runId, e.takenUntil, { guard: e.guard });
    case 'put-deadline-trigger':
      return d.triggers.deadline(e.taskId, e.deadline, { sweep: e.sweep, expiry: e.expiry });
    case 'put-safety-net':
      return d.triggers.resolved(e.taskId, e.runId);
    case 'record-expiry':
      // With it, in the same write (the group's partition), its group's row at this expires (shared/lifecycle/remove-expired.ts).
      await d.expiry.recordAll(taskExpiryRows(e.taskId, e));
      return undefined;
    case 'add-group-member':
      await d.groups.addMember(e.taskGroupId, e.taskId, e.schedulerId, e.expires, e.created);
      return undefined;
    case 'reopen-group':
      await d.groups.reopen(e.taskGroupId, e.taskId, e.expires);
      return undefined;
    default:
      throw new Error(`not a before effect: ${e.kind}`);
  }
}

/**
 * `after` effects side by side, except what guards stay in order: the group's bookkeeping, then
 * the deadline trigger's drop (the trigger guards the bookkeeping); the safety net's deletion
 * once propagation and the bookkeeping are both done (the net guards them). A failure stops its
 * chain, so its guard stays.
 */
async function performAfter(d: LifecycleDeps, p: Plan, task: TaskRecord, performed: Performed): Promise<void> {
  const { after } = p;
  const guarded = [(e: Effect) => e.kind === 'propagate', (e: Effect) => e.kind === 'close-group' || (e.kind === 'drop-trigger' && e.trigger === 'deadline')];
  const last = (e: Effect) => e.kind === 'delete-safety-net';
  const inOrder = (e: Effect) => last(e) || guarded.some((c) => c(e));
  const one = (e: Effect) => (e.kind === 'drop-trigger' ? d.triggers.drop(e.trigger, e.ref) : afterOne(d, e, p, task, performed));
  const free = after.filter((e) => !inOrder(e)).map(one);
  const chains = Promise.all(
    guarded.map(async (c) => {
      for (const e of after.filter(c)) await one(e);
    }),
  ).then(async () => {
    for (const e of after.filter(last)) await one(e);
  });
  await Promise.all([...free, chains]);
}

async function afterOne(d: LifecycleDeps, e: Effect, p: Plan, task: TaskRecord, performed: Performed): Promise<void> {
  switch (e.kind) {
    case 'wake':
      d.wake(e.taskQueueId, { taskId: e.taskId, priority: e.priority });
      return;
    case 'commit-uploads': {
      // Saves calls per report: a run without the marks created no s3 artifact and no live log.
      const run = task.runs[e.runId];
      if (run?.uploads) await d.uploads.commit(e.taskId, e.runId);
      if (run?.liveLog) await d.uploads.sealLiveLog(e.taskId, e.runId);
      return;
    }
    case 'propagate':
      await propagate(d, task);
      return;
    case 'delete-safety-net': {
      // Only a net this call put; a repeat that found the work done put none.
      const ref = performed.get(effectKey(safetyNetOf(e)));
      if (isMessage(ref))
        await d.triggers.done(ref).catch((err) => d.log.warn('resolved-net-delete-failed', { taskId: e.taskId, error: String(err?.message ?? err) }));
      return;
    }
    case 'release-key':
      await releaseKey(d, e.key, e.taskId, e.runId, rehinter(d), task);
      return;
    case 'close-group':
      // Folded into the write: its open row went with it, on the condition that nobody joined.
      // Alone: the write was the close (its open row stays while the group is alone).
      if (!e.alone) await d.groups.close(e.taskGroupId, e.taskId);
      if (p.groupResolved) await d.taskEvents?.groupResolved(p.groupResolved, !!e.alone);
      return;
    default:
      throw new Error(`not an after effect: ${e.kind}`);
  }
}

/**
 * The plan's replay: recorded events delivered again. A `run` replay's failure is raised: a
 * claim-expiry message then stays to deliver them; a run whose trigger is an index row had nobody
 * listening when claimed, and the raised failure fails the repeated claim, which the worker retries.
 */
async function replay(d: LifecycleDeps, task: TaskRecord, p: Plan): Promise<void> {
  const n = (await d.taskEvents?.replay(task, p.replay!)) ?? 0;
  if (n && p.replay!.kind === 'run') d.log.info('events-redelivered', { taskId: task.taskId, runId: p.replay!.runId, events: n });
}

/** Fresh hints for keyed runs (a waiter's turn, or fencing a dead holder), through this executor. */
export function rehinter(d: LifecycleDeps): Rehint {
  return async (t, runId, staleHintId) => {
    const input = { runId, staleHintId, hintId: slugid.nice() };
    const now = d.now();
    const r = await execute(d, t.taskId, (x) => rehint(x, input, now), t);
    return r && 'task' in r ? r.task : undefined;
  };
}

/** Tells the dependents of a finally resolved task, then records that (dependentsNotified). */
async function propagate(d: LifecycleDeps, task: TaskRecord): Promise<void> {
  const last = task.runs.length - 1;
  await notifyDependents(d, task, async (dependent, t) => {
    const input = { hintId: slugid.nice() };
    const now = d.now();
    await execute(d, dependent, (x) => schedule(x, input, now), t);
  });
  await execute(d, task.taskId, (x) => propagated(x, { last }), task);
}
