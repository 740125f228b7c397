/**
 * The one executor of task transitions: load (or use a known row) -> transition -> the write's
 * events and their guard (`TaskEvents`, derived from the rows before and after) -> `before`
 * effects (side by side) -> ETag-guarded write with the `with` rows and the events on its history
 * rows -> delivery of the events and the `after` effects (side by side with the operator index
 * writes; after the delivery when a trigger they drop guards it). On an ETag race it
 * reloads and recomputes the transition and its effects; a `before` effect already performed in
 * an earlier attempt (same content: ids and `now` are fixed per call) is not performed again.
 * Crash ordering lives here: whatever a state needs exists before the row says so.
 */
import * as slugid from 'slugid';
import { TaskDeps, WriteEvents } from './deps';
import { Effect, EffectOf, effectKey, safetyNetOf } from './effects';
import { MAX_MODIFY_ATTEMPTS } from './store';
import { TaskRecord } from './model';
import type { TriggerRef } from './triggers';
import type { Entity, TableAction } from '../storage/storage';
import { Later, Refusal, Result, Step, isLater, isRefusal, propagated, rehint, schedule } from './transitions';
import { Rehint, releaseKey } from './keys';
import { notifyDependents } from './dependencies';
import { EXPIRY_KIND_GROUP } from './groups';

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
  /**
   * A `before` effect the caller started already, side by side with the task read (claimWork puts
   * the claim-expiry trigger while the row loads). Used if the transition owes the same effect;
   * otherwise it is a stale trigger, which its handler finds nothing to do for.
   */
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
  const { early, alongside } = options;
  early?.ref.catch(() => undefined); // awaited below when needed; a refusal never looks at it
  const afterAll = (effects: Effect[], task: TaskRecord, w?: WriteEvents) =>
    withEvents(d, w, task, () => Promise.all([performAfter(d, effects, task, performed), alongside?.()]).then(() => undefined));
  // The row as this instance last saw it saves the read when still current: the guarded write
  // proves it, and anything but a write is decided again on a fresh read.
  let current = known ?? d.tasks.recentRow?.(taskId);
  let unproven = !known && current !== undefined;
  // A write with the group's close folded in failed on a row this ETag was current for: if the
  // task row is unchanged, the group's condition failed (someone joined), so the next try does not fold.
  let foldFailedAt: string | undefined;
  let fold = true;
  for (let attempt = 0; attempt < MAX_MODIFY_ATTEMPTS; attempt++) {
    if (!current || attempt > 0) {
      current = await d.tasks.load(taskId);
      unproven = false;
    }
    if (!current) return undefined;
    if (foldFailedAt !== undefined && current.etag === foldFailedAt) fold = false;
    foldFailedAt = undefined;
    const result = transition(current);
    if (unproven && (isRefusal(result) || isLater(result) || result.next === current)) {
      current = undefined;
      continue;
    }
    if (isRefusal(result) || isLater(result)) return result;
    if (result.next === current) {
      await afterAll(result.effects, current);
      return { task: current, changed: false };
    }
    if (early && !performed.has(effectKey(early.effect)) && result.effects.some((e) => effectKey(e) === effectKey(early.effect))) {
      performed.set(effectKey(early.effect), await early.ref);
    }
    const next = result.next;
    const prepared = await prepareEvents(d, current, next, result.effects);
    const { w } = prepared;
    await performBefore(d, { next, effects: prepared.effects }, performed);
    const rows = prepared.effects.flatMap((e) => (e.kind === 'row' ? [e.entity] : []));
    // A group of one's close goes in the resolution's own transaction (the group's rows share the task's partition).
    const closing = fold
      ? prepared.effects.find((e): e is EffectOf<'close-group'> => e.kind === 'close-group' && !!e.alone && e.taskGroupId === taskId)
      : undefined;
    const actions = closing ? d.groups.closeActions(closing.taskGroupId) : [];
    const effects = closing ? prepared.effects.map((e) => (e === closing ? { ...closing, folded: true as const } : e)) : prepared.effects;
    const written = await d.tasks.replace(current, next, rows, () => afterAll(effects, next, w), outboxOf(d, w), actions);
    if (written !== 'written' && closing) {
      foldFailedAt = current.etag;
      continue;
    }
    if (written === 'etag') continue;
    if (written === 'missing') return undefined;
    return { task: next, changed: true };
  }
  throw new Error(`task ${taskId}: too many concurrent modifications`);
}

/**
 * Creates a task row from `create`'s step. False when the taskId is taken (nothing `after` is done).
 * A task that starts its own group creates the group in its row's transaction (same partition);
 * if that fails and the task row is not there, the group existed already (a member came first):
 * it joins as any member does, before its row is written.
 */
export async function executeCreate(d: TaskDeps, step: Step): Promise<boolean> {
  const performed: Performed = new Map();
  const { w, effects } = await prepareEvents(d, undefined, step.next, step.effects);
  const rows = effects.flatMap((e) => (e.kind === 'row' ? [e.entity] : []));
  const insert = (actions?: TableAction[]) =>
    d.tasks.insert(step.next, rows, () => withEvents(d, w, step.next, () => performAfter(d, effects, step.next, performed)), outboxOf(d, w), actions);
  const join = effects.find((e): e is EffectOf<'add-group-member'> => e.kind === 'add-group-member');
  if (join && join.taskGroupId === join.taskId) {
    await performBefore(d, { next: step.next, effects: effects.filter((e) => e !== join) }, performed);
    step.next.groupAlone = true;
    if (await insert(d.groups.createActions(join.taskGroupId, join.taskId, join.schedulerId, join.expires, join.created))) return true;
    delete step.next.groupAlone;
    if (await d.tasks.load(join.taskId)) return false;
    await d.groups.addMember(join.taskGroupId, join.taskId, join.schedulerId, join.expires, join.created, true);
    performed.set(effectKey(join), undefined);
  }
  await performBefore(d, { next: step.next, effects }, performed);
  return insert();
}

/**
 * The write's events (shared/events/recorder.ts), derived from the rows before and after, and
 * how they are guarded: a deadline trigger the write puts anyway carries their sweep.
 */
async function prepareEvents(
  d: TaskDeps,
  before: TaskRecord | undefined,
  next: TaskRecord,
  effects: Effect[],
): Promise<{ w?: WriteEvents; effects: Effect[] }> {
  if (!d.taskEvents) return { effects };
  const puts = { deadline: effects.some((e) => e.kind === 'put-deadline-trigger'), claim: effects.some((e) => e.kind === 'put-claim-trigger') };
  const w = await d.taskEvents.prepare(before, next, puts);
  const sweep = w.deadlineSweep;
  if (!sweep) return { w, effects };
  return { w, effects: effects.map((e) => (e.kind === 'put-deadline-trigger' ? { ...e, sweep } : e)) };
}

function outboxOf(d: TaskDeps, w: WriteEvents | undefined): ((rows: Entity[]) => void) | undefined {
  return w && ((rows) => d.taskEvents!.outbox(w, rows));
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
async function performBefore(d: TaskDeps, step: Pick<Step, 'next' | 'effects'>, performed: Performed): Promise<void> {
  const todo = new Map<string, Effect>();
  for (const e of step.effects) if (e.phase === 'before' && !performed.has(effectKey(e))) todo.set(effectKey(e), e);
  const settled = await Promise.allSettled([...todo].map(async ([key, e]) => performed.set(key, await before(d, e))));
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  for (const e of step.effects) {
    if (e.phase !== 'before') continue;
    const ref = performed.get(effectKey(e));
    if (e.kind === 'put-claim-trigger') step.next.runs[e.runId].claimTrigger = ref;
    else if (e.kind === 'put-deadline-trigger') step.next.deadlineTrigger = ref;
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
async function performAfter(d: TaskDeps, effects: Effect[], task: TaskRecord, performed: Performed): Promise<void> {
  const after = effects.filter((e) => e.phase === 'after');
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
    case 'commit-uploads':
      // Saves a query per report: a run without the mark created no s3 artifact (an unmarked older
      // row's uploads are still committed on their first read).
      if (task.runs[e.runId]?.uploads) await d.uploads.commit(e.taskId, e.runId);
      return;
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
    case 'log':
      d.log.info(e.event, e.fields);
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
