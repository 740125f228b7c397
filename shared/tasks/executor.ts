/**
 * The one executor of task writes: it carries out plans (plan.ts) and nothing else. Its loop:
 * load the row, apply the transition (its named record, records.ts), plan the write from the
 * record, perform the plan's `before` effects, write the row with the plan's rows (ETag-guarded),
 * then the plan's `after` effects, events, read-model writes and log lines (`finish`). On an ETag race it loads again and recomputes; a `before` effect
 * already performed in an earlier attempt (same content: ids and `now` are fixed per call) is not
 * performed again. Crash ordering lives here: whatever a state needs exists before the row says so.
 * Three throughput steps act in the loop, each named with its saving: `cachedRow`, `early` and
 * `groupFold` (plan.ts `foldGroupClose`).
 */
import * as slugid from 'slugid';
import { TaskDeps, WriteEvents } from './deps';
import { Effect, effectKey, safetyNetOf } from './effects';
import { TaskRecord, isResolved, taskState } from './model';
import { Plan, createOwnGroup, foldGroupClose } from './plan';
import type { TriggerRef } from './triggers';
import { Later, Refusal, Result, Step, isLater, isRefusal, propagated, rehint, schedule } from './transitions';
import type { RecordOf } from './records';
import { Rehint, releaseKey } from './keys';
import { notifyDependents } from './dependencies';
import { EXPIRY_KIND_GROUP } from './groups';

/** ETag races on one task are short-lived; a handful of retries settles them. */
const MAX_WRITE_ATTEMPTS = 10;

/**
 * Dependencies the expiry row carries, so that a task row that never got written (a refused or
 * interrupted createTask) still has its edges in other partitions removed when it expires. A
 * longer list would not fit one table property (64 KiB); without it those edges are removed with
 * the required tasks' own partitions when they expire, and until then point at nothing (harmless).
 */
const EXPIRY_INLINE_DEPENDENCIES = 100;

export interface Executed {
  /** The task as written, or as found when the transition changed nothing. */
  task: TaskRecord;
  changed: boolean;
}

/** What a call performed so far: `before` effects by identity, with their trigger refs (or the group's ETag). */
type Performed = Map<string, TriggerRef | undefined>;

/** Optional extras of one `execute` call, for callers that know more than the transition. */
export interface ExecuteOptions {
  /** A `before` effect the caller started already, side by side with the task read (see `early`). */
  early?: { effect: Effect; ref: Promise<TriggerRef | undefined> };
  /** Runs once the outcome stands (row written, or an idempotent repeat), side by side with the `after` effects. */
  alongside?: () => Promise<void>;
}

/**
 * Runs `transition` on task `taskId` (starting from `known` when given, saving a read). Returns
 * undefined when the task does not exist, the transition's refusal or "later", or the outcome.
 */
export async function execute(
  d: TaskDeps,
  taskId: string,
  transition: (t: TaskRecord) => Result,
  known?: TaskRecord,
  options: ExecuteOptions = {},
): Promise<Executed | Refusal | Later | undefined> {
  const performed: Performed = new Map();
  const row = cachedRow(d, taskId, known);
  const fold = groupFold(d);
  const adoptEarly = early(options.early, performed);
  for (let attempt = 0; attempt < MAX_WRITE_ATTEMPTS; attempt++) {
    const current = await row.load();
    if (!current) return undefined;
    const result = transition(current);
    if (row.unproven(result)) continue;
    if (isRefusal(result) || isLater(result)) return result;
    const p = fold.plan(current, planOf(d, result));
    if (!p.task) {
      await finish(d, p, current, undefined, performed, options.alongside);
      return { task: current, changed: false };
    }
    await adoptEarly(p);
    const { guarded, w } = await guardEvents(d, p);
    await performBefore(d, guarded, performed);
    const written = await d.tasks.replace(current, p.task, p.rows, p.groupRows);
    if (fold.failed(written, current, p) || written === 'etag') continue;
    if (written === 'missing') return undefined;
    await finish(d, p, p.task, w, performed, options.alongside);
    return { task: p.task, changed: true };
  }
  throw new Error(`task ${taskId}: too many concurrent modifications`);
}

/** The plan of `step`, at this call's time and actor. */
function planOf(d: TaskDeps, step: Step): Plan {
  return d.plan.write(step, d.now(), d.actor?.()?.actor);
}

/**
 * Step "cached row": the first attempt starts from the row as this instance last wrote or read it
 * (TaskStore.recentRow), when the caller knows none. The ETag-guarded write proves it current;
 * anything but a write (refusal, later, repeat) is decided again on a fresh read. Saves the row
 * read of a request that follows this instance's own write of the task (storage-count, simple
 * lifecycle: claimWork 5 and reportCompleted 4 calls, 6 and 5 without; the report's critical path
 * 2 calls, 3 without). It also carries a re-armed deadline trigger's new receipt to the report,
 * which then deletes the trigger (without: it fires later, a read and a delete).
 */
function cachedRow(d: TaskDeps, taskId: string, known: TaskRecord | undefined) {
  let current = known ?? d.tasks.recentRow?.(taskId);
  let unproven = !known && current !== undefined;
  let first = true;
  return {
    async load(): Promise<TaskRecord | undefined> {
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
 * Step "early": claimWork puts the claim-expiry trigger while the row loads; used if the plan owes
 * the same effect (otherwise it is a stale trigger, which its handler finds nothing to do for).
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
 * Step "fold" across attempts (plan.ts `foldGroupClose`): a write that carried the group's close
 * failed on a row whose ETag is still current, so the group's condition failed (someone joined):
 * the next attempt does not fold.
 */
function groupFold(d: TaskDeps) {
  let failedAt: string | undefined;
  let on = true;
  return {
    plan(current: TaskRecord, p: Plan): Plan {
      if (failedAt !== undefined && current.etag === failedAt) on = false;
      failedAt = undefined;
      return on && p.foldable ? foldGroupClose(p, d.groups.closeActions(p.foldable.taskGroupId)) : p;
    },
    failed(written: string, current: TaskRecord, p: Plan): boolean {
      if (written === 'written' || !p.groupRows.length) return false;
      failedAt = current.etag;
      return true;
    },
  };
}

/**
 * The write's events and their guard (shared/events/recorder.ts): a deadline trigger the plan
 * puts anyway may carry their sweep.
 */
async function guardEvents(d: TaskDeps, p: Plan): Promise<{ guarded: Plan; w?: WriteEvents }> {
  if (!d.taskEvents || !p.events) return { guarded: p };
  const w = await d.taskEvents.prepare(p.events);
  const sweep = w.deadlineSweep;
  if (!sweep) return { guarded: p, w };
  return { guarded: { ...p, before: p.before.map((e) => (e.kind === 'put-deadline-trigger' ? { ...e, sweep } : e)) }, w };
}

/** Once the outcome stands: the plan's log lines, read-model writes, events and `after` effects. */
async function finish(
  d: TaskDeps,
  p: Plan,
  task: TaskRecord,
  w: WriteEvents | undefined,
  performed: Performed,
  alongside?: () => Promise<void>,
): Promise<void> {
  const ctx = d.actor?.();
  if (ctx) ctx.transitions += p.transitions;
  for (const line of p.log) d.log.info(line.event, line.fields);
  const after = () => Promise.all([performAfter(d, p.after, task, performed), alongside?.()]).then(() => undefined);
  await Promise.all([p.readModel && d.readModels?.write(p.readModel), withEvents(d, w, task, after)]);
}

/** What executeCreate did: the task as written, or the task that holds the taskId already (undefined: gone meanwhile). */
export type Created = { created: TaskRecord } | { existing: TaskRecord | undefined };

/**
 * Creates a task row from `create`'s step. A task that starts its own group writes the group's
 * rows in its row's transaction (plan step `createOwnGroup`); if that fails and the task row is not
 * there, the group existed already (a member came first): it joins as any member does, before its
 * row is written. When the taskId is taken, nothing `after` is done, and group rows this call
 * added that the existing task does not own are taken back.
 */
export async function executeCreate(d: TaskDeps, step: Step<RecordOf<'create'>>): Promise<Created> {
  const performed: Performed = new Map();
  const { guarded, w } = await guardEvents(d, planOf(d, step));
  const insert = async (p: Plan): Promise<Created | undefined> => {
    await performBefore(d, p, performed);
    if (!(await d.tasks.insert(p.task!, p.rows, p.groupRows))) return undefined;
    await finish(d, p, p.task!, w, performed);
    return { created: p.task! };
  };
  const join = guarded.ownGroup;
  if (join) {
    const owned = await insert(createOwnGroup(guarded, d.groups.createActions(join.taskGroupId, join.taskId, join.schedulerId, join.expires, join.created)));
    if (owned) return owned;
    const existing = await d.tasks.load(join.taskId);
    if (existing) return { existing };
    await d.groups.addMember(join.taskGroupId, join.taskId, join.schedulerId, join.expires, join.created, true);
    performed.set(effectKey(join), undefined);
  }
  const created = await insert(guarded);
  if (created) return created;
  const task = guarded.task!;
  const existing = await d.tasks.load(task.taskId);
  const def = task.definition;
  // Our group rows went in first: take back an open row the existing task does not have.
  if (existing && existing.definition.taskGroupId !== def.taskGroupId) await d.groups.removeMember(def.taskGroupId, task.taskId, true, def.created);
  else if (existing && isResolved(taskState(existing))) await d.groups.close(def.taskGroupId, task.taskId);
  return { existing };
}

/**
 * After the commit: delivers the write's events side by side with `after`, or before it when a
 * trigger that `after` drops guards them (a failed delivery then keeps the guard: `after` is not
 * run). Delivered events a deadline trigger swept re-arm it for the deadline.
 */
async function withEvents(d: TaskDeps, w: WriteEvents | undefined, task: TaskRecord, after: () => Promise<void>): Promise<void> {
  if (!w) return after();
  const delivery = d.taskEvents!.deliver(w).then(async (delivered) => {
    const ref = task.deadlineTrigger;
    if (!delivered || !w.deadlineSweep || !ref) return;
    const fresh = await d.triggers.rearmDeadline(ref, task.taskId, task.definition.deadline).catch((err) => {
      // It fires after the sweep delay and delivers them again: a duplicate, never a loss.
      d.log.warn('deadline-rearm-failed', { taskId: task.taskId, error: String(err?.message ?? err) });
      return undefined;
    });
    if (!fresh) return;
    d.tasks.amendRecent(task.taskId, (t) => {
      if (t.deadlineTrigger?.messageId === ref.messageId) t.deadlineTrigger = fresh;
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
async function performBefore(d: TaskDeps, p: Plan, performed: Performed): Promise<void> {
  const todo = new Map<string, Effect>();
  for (const e of p.before) if (!performed.has(effectKey(e))) todo.set(effectKey(e), e);
  const settled = await Promise.allSettled([...todo].map(async ([key, e]) => performed.set(key, await before(d, e))));
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  for (const e of p.before) {
    const ref = performed.get(effectKey(e));
    if (e.kind === 'put-claim-trigger') p.task!.runs[e.runId].claimTrigger = ref;
    else if (e.kind === 'put-deadline-trigger') p.task!.deadlineTrigger = ref;
  }
}

async function before(d: TaskDeps, e: Effect): Promise<TriggerRef | undefined> {
  switch (e.kind) {
    case 'put-hint':
      await d.pending.put(e.taskQueueId, e.priority, e.taskId, e.runId, e.hintId, e.deadline, e.visibleAt);
      return undefined;
    case 'put-claim-trigger':
      return d.triggers.claim(e.taskId, e.runId, e.takenUntil);
    case 'put-deadline-trigger':
      return d.triggers.deadline(e.taskId, e.deadline, e.sweep);
    case 'put-safety-net':
      return d.triggers.resolved(e.taskId, e.runId);
    case 'record-expiry':
      // With it, in the same write (the group's partition), its group's row at this expires (EXPIRY_KIND_GROUP, shared/tasks/expire.ts).
      await d.expiry.record(
        'task',
        e.taskId,
        e.expires,
        { taskGroupId: e.taskGroupId, dependencies: e.dependencies.length <= EXPIRY_INLINE_DEPENDENCIES ? e.dependencies : [] },
        [{ kind: EXPIRY_KIND_GROUP, id: e.taskGroupId }],
        e.taskGroupId,
      );
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
 * `after` effects side by side, except two chains that stay in order: propagation, then the
 * deletion of its safety net (the net guards the propagation until it is done); the group's
 * bookkeeping, then the deadline trigger's drop (the trigger guards the bookkeeping). A chain stops
 * at its first failure, so its guard stays.
 */
async function performAfter(d: TaskDeps, after: Effect[], task: TaskRecord, performed: Performed): Promise<void> {
  const chains = [
    (e: Effect) => e.kind === 'propagate' || e.kind === 'delete-safety-net',
    (e: Effect) => e.kind === 'close-group' || (e.kind === 'drop-trigger' && e.trigger === 'deadline'),
  ];
  const chained = (e: Effect) => chains.some((c) => c(e));
  const one = (e: Effect) => (e.kind === 'drop-trigger' ? d.triggers.drop(e.trigger, e.ref) : afterOne(d, e, task, performed));
  await Promise.all([
    ...after.filter((e) => !chained(e)).map(one),
    ...chains.map(async (c) => {
      for (const e of after.filter(c)) await one(e);
    }),
  ]);
}

async function afterOne(d: TaskDeps, e: Effect, task: TaskRecord, performed: Performed): Promise<void> {
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
      if (ref) await d.triggers.done(ref).catch((err) => d.log.warn('resolved-net-delete-failed', { taskId: e.taskId, error: String(err?.message ?? err) }));
      return;
    }
    case 'release-key':
      await releaseKey(d, e.key, e.taskId, e.runId, rehinter(d), task);
      return;
    case 'close-group':
      // Folded into the write: its open row went with it, on the condition that nobody joined.
      if (!e.folded) await d.groups.close(e.taskGroupId, e.taskId);
      await d.groupResolved?.(e, !!e.folded);
      return;
    default:
      throw new Error(`not an after effect: ${e.kind}`);
  }
}

/** Fresh hints for keyed runs (a waiter's turn, or fencing a dead holder), through this executor. */
export function rehinter(d: TaskDeps): Rehint {
  return async (t, runId, staleHintId) => {
    const input = { runId, staleHintId, hintId: slugid.nice() };
    const now = d.now();
    const r = await execute(d, t.taskId, (x) => rehint(x, input, now), t);
    return r && 'task' in r ? r.task : undefined;
  };
}

/** Tells the dependents of a finally resolved task, then records that (dependentsNotified). */
async function propagate(d: TaskDeps, task: TaskRecord): Promise<void> {
  const last = task.runs.length - 1;
  await notifyDependents(d, task, async (dependent, t) => {
    const input = { hintId: slugid.nice() };
    const now = d.now();
    await execute(d, dependent, (x) => schedule(x, input, now), t);
  });
  await execute(d, task.taskId, (x) => propagated(x, { last }), task);
}
