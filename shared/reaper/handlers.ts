/**
 * Trigger handlers. Each re-reads the task and acts only if the trigger still matches it, so
 * duplicates, stale messages and overlapping reaper instances are harmless.
 */
import type { Services } from '../services';
import {
  EXPIRY_KIND_CLAIM,
  EXPIRY_KIND_DEADLINE,
  type ClaimTrigger,
  type IndexedClaim,
  type DeadlineTrigger,
  type IndexedDeadline,
  type ResolvedBatchTrigger,
  type ResolvedTrigger,
  type TrackingTrigger,
} from '../tasks/triggers';
import { finishTracking } from '../lifecycle/create';
import { resolveDeadline, expireClaim, finishResolution, TriggerResult } from '../lifecycle/resolve';
import { expireGroup, expireTask, TaskExpiryData } from '../lifecycle/remove-expired';
import { EXPIRY_KIND_GROUP } from '../tasks/groups';
import type { ExpiryRow } from '../tasks/expiry';
import { taskExpiryRows, type TaskExpiry } from '../tasks/task-expiry';
import { expireSubscription } from '../events/sweep';
import type { SweepTrigger } from '../events/outbox';
import { ArtifactStore } from '../artifacts/store';
import { isPresent } from '../artifacts/model';
import { EXPIRY_KIND as SUBSCRIPTION_EXPIRY } from '../events/subscriptions';
import { EXPIRY_KIND_NAMESPACE, EXPIRY_KIND_TASK, expireIndexedTask, expireNamespaces } from '../index/index';
import { EXPIRY_KIND_FIRE } from '../hooks/hooks';
import { EXPIRY_KIND_SECRET, expireSecret } from '../secrets/secrets';
import { EXPIRY_KIND_AUDIT, expireAudit } from '../audit/history';
import { HookStore, definitionDigest } from '../hooks/store';
import { mapLimit } from '../limit';

/** Members of a shared safety net finished side by side (each is a read, and rarely a propagation). */
const NET_CONCURRENCY = 8;

export async function handleDeadline(svc: Services, t: DeadlineTrigger): Promise<TriggerResult> {
  if (!t.sweep) return resolveDeadline(svc, t.taskId, t.deadline);
  // It also guards a write's events, whose delivery did not re-arm it: deliver them (again) first.
  await handleEventSweep(svc, { kind: 'task', taskId: t.taskId, seqs: t.sweep });
  const result = await resolveDeadline(svc, t.taskId, t.deadline);
  // Not due yet: it shows again at the deadline, without the sweep.
  return result ? { ...result, body: { taskId: t.taskId, deadline: t.deadline } satisfies DeadlineTrigger } : result;
}

/** The claim expiry's plan also delivers again the run's events this trigger guards, if it finds the run ended (lifecycle/transitions.ts `expireClaim`). */
export async function handleClaimExpired(svc: Services, t: ClaimTrigger): Promise<TriggerResult> {
  return expireClaim(svc, t.taskId, t.runId, t.takenUntil, await svc.tasks.load(t.taskId));
}

/**
 * A claim expiry kept in the expiry index. Not due yet by the task's clock (the sweep's is the
 * same, so only a skewed row): it throws, and the row stays for a later pass.
 */
async function handleIndexedClaim(svc: Services, row: ExpiryRow): Promise<void> {
  const { runId, takenUntil } = row.data as unknown as IndexedClaim;
  const result = await expireClaim(svc, row.id, runId, takenUntil, undefined, true);
  if (result) throw new Error(`claim of run ${runId} not due for ${result.retryAfterS} s`);
}

export async function handleResolved(svc: Services, t: ResolvedTrigger | ResolvedBatchTrigger | TrackingTrigger): Promise<TriggerResult> {
  if ('tracking' in t) await finishTracking(svc, t.taskId);
  // A shared net: every member (any failure leaves the message for a later pass; each is idempotent).
  else if ('batch' in t) await mapLimit(t.batch, NET_CONCURRENCY, (m) => finishResolution(svc, m.taskId));
  else await finishResolution(svc, t.taskId);
}

/** Delivers the events of a write a crash interrupted before their delivery (shared/events/outbox.ts). */
export async function handleEventSweep(svc: Services, t: SweepTrigger): Promise<TriggerResult> {
  const delivered = await svc.events.sweep(t, {
    artifact: async (taskId, runId, name) => {
      const a = await new ArtifactStore(svc.storage).get(taskId, runId, name);
      return !!a && isPresent(a);
    },
    groupSealed: async (taskGroupId) => (await svc.groups.meta(taskGroupId))?.sealed,
    hook: async (hookGroupId, hookId) => {
      const h = await new HookStore(svc.storage).get(hookGroupId, hookId);
      return h && definitionDigest(h.definition);
    },
  });
  if (delivered) svc.log.info('events-swept', { kind: t.kind, delivered, fanout: !!t.fanout });
}

/** A task's event sweeps run one after another, oldest events first, so each subscription queue receives them in order. */
export function eventSweepLane(t: SweepTrigger): { key: string; rank: number } | undefined {
  if (t.kind === 'task') return { key: t.taskId, rank: Math.min(...t.seqs) };
  if (t.kind === 'artifact') return { key: t.taskId, rank: t.event.seq };
  // A run's claim and end again, after the rest (it is rare: a guarded delivery that failed).
  if (t.kind === 'run') return { key: t.taskId, rank: Number.MAX_SAFE_INTEGER };
  // task-group-resolved after the resolution that caused it: its id is `<taskGroupId>.resolved.<taskId>.<runId>`.
  const [, resolved, cause] = t.kind === 'event' ? t.event.id.split('.') : [];
  if (resolved === 'resolved' && cause) return { key: cause, rank: Number.MAX_SAFE_INTEGER - 1 };
  return undefined;
}

/**
 * The sweep's units of work: each row on its own, except a task's row and its group's row at the
 * same expires (a task that created its own group writes both in one transaction, so they are
 * adjacent in one day partition): together, so a group of one goes without its partition read.
 */
export function pairExpiryRows(rows: ExpiryRow[]): ExpiryRow[][] {
  const groupRows = new Map(rows.filter((r) => r.kind === EXPIRY_KIND_GROUP).map((r) => [`${r.id}~${r.expires}`, r]));
  // A group that another task of this page belongs to has been joined: its partition read it is.
  const joined = new Set(rows.filter((r) => r.kind === 'task' && r.data.taskGroupId !== r.id).map((r) => r.data.taskGroupId));
  const paired = new Set<ExpiryRow>();
  const units: ExpiryRow[][] = [];
  for (const r of rows) {
    const g = r.kind === 'task' && r.data.taskGroupId === r.id && !joined.has(r.id) ? groupRows.get(`${r.id}~${r.expires}`) : undefined;
    if (g && !paired.has(g)) {
      paired.add(g).add(r);
      units.push([r, g]);
    }
  }
  for (const r of rows) if (!paired.has(r)) units.push([r]);
  return units;
}

/** A task's row with its group's (pairExpiryRows): the group's partition is read only if the task could not remove it. */
export async function expireTaskWithGroup(svc: Services, task: ExpiryRow, group: ExpiryRow): Promise<void> {
  if (!(await expireTask(svc, task.id, task.data as unknown as TaskExpiryData, true))) await expireGroup(svc, group.id);
}

/** The task expiry a deadline row carries (shared/tasks/triggers.ts `deadline`); other rows carry none. */
export function carriedExpiry(row: ExpiryRow): TaskExpiry | undefined {
  return row.kind === EXPIRY_KIND_DEADLINE ? (row.data as unknown as IndexedDeadline).expiry : undefined;
}

/**
 * The expiry rows of the tasks whose deadline rows are in a sweep page, recorded before any of
 * those deadline rows is deleted, whatever became of the task (resolved, never written, gone): so a
 * crash anywhere leaves each task, its group and its edges a future expiry (a repeat records them
 * again: upserts). All in one turn: a day bucket's rows share one transaction.
 */
export async function recordCarriedExpiries(svc: Services, rows: ExpiryRow[]): Promise<void> {
  const entries = rows.flatMap((r) => {
    const e = carriedExpiry(r);
    return e ? taskExpiryRows(r.id, e) : [];
  });
  if (entries.length) await svc.expiry.recordAll(entries);
}

/** Expirers by index-row kind; a kind without one is left in the index (and logged). */
export const EXPIRERS: Record<string, (svc: Services, row: ExpiryRow) => Promise<void>> = {
  task: async (svc, row) => void (await expireTask(svc, row.id, row.data as unknown as TaskExpiryData)),
  [EXPIRY_KIND_GROUP]: (svc, row) => expireGroup(svc, row.id),
  // Not an expiry: the task's deadline, kept in this index (shared/tasks/triggers.ts); a resolved task has nothing to do.
  // The expiry rows it carries were recorded before (recordCarriedExpiries).
  [EXPIRY_KIND_DEADLINE]: async (svc, row) => void (await resolveDeadline(svc, row.id, (row.data as unknown as IndexedDeadline).deadline, true)),
  // Nor this: a run's claim expiry (shared/tasks/triggers.ts `claim`); its run's end deletes it, so one found here mostly lapsed.
  [EXPIRY_KIND_CLAIM]: handleIndexedClaim,
  [SUBSCRIPTION_EXPIRY]: (svc, row) => expireSubscription(svc, row.id),
  [EXPIRY_KIND_TASK]: expireIndexedTask,
  [EXPIRY_KIND_NAMESPACE]: expireNamespaces,
  [EXPIRY_KIND_SECRET]: (svc, row) => expireSecret(svc, row.id),
  [EXPIRY_KIND_AUDIT]: (svc, row) => expireAudit(svc, row.data),
  [EXPIRY_KIND_FIRE]: (svc, row) => new HookStore(svc.storage).removeFire(row.data.partitionKey as string, row.data.rowKey as string),
};
