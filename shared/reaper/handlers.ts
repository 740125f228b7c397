/**
 * Trigger handlers. Each re-reads the task and acts only if the trigger still matches it, so
 * duplicates, stale messages and overlapping reaper instances are harmless.
 */
import type { Services } from '../services';
import type { ClaimTrigger, DeadlineTrigger, ResolvedBatchTrigger, ResolvedTrigger, TrackingTrigger } from '../tasks/triggers';
import { finishTracking } from '../tasks/create';
import { resolveDeadline, expireClaim, finishResolution, TriggerResult } from '../tasks/resolve';
import { expireTask, TaskExpiryData } from '../tasks/expire';
import type { ExpiryRow } from '../tasks/expiry';
import { expireSubscription } from '../events/sweep';
import type { SweepTrigger } from '../events/outbox';
import { ArtifactStore } from '../artifacts/store';
import { EXPIRY_KIND as SUBSCRIPTION_EXPIRY } from '../events/subscriptions';
import { EXPIRY_KIND_NAMESPACE, EXPIRY_KIND_TASK, expireIndexedTask, expireNamespaces } from '../index/index';
import { EXPIRY_KIND_FIRE } from '../hooks/hooks';
import { HookStore } from '../hooks/store';
import { mapLimit } from '../limit';

/** Members of a shared safety net finished side by side (each is a read, and rarely a propagation). */
const NET_CONCURRENCY = 8;

export async function handleDeadline(svc: Services, t: DeadlineTrigger): Promise<TriggerResult> {
  return resolveDeadline(svc, t.taskId, t.deadline);
}

export async function handleClaimExpired(svc: Services, t: ClaimTrigger): Promise<TriggerResult> {
  const task = await svc.tasks.load(t.taskId);
  const result = await expireClaim(svc, t.taskId, t.runId, t.takenUntil, task);
  // This trigger guards the events of its run's claim and end (shared/events/recorder.ts): still
  // here after the run ended, it was not dropped after their delivery, so deliver them again. (A
  // run it finds running is ended by this expiry or the deadline, which send the claim's again.)
  const run = task?.runs[t.runId];
  if (run && run.takenUntil === t.takenUntil && run.state !== 'running' && run.state !== 'pending') {
    const n = await svc.events.redeliverRun(t.taskId, t.runId);
    if (n) svc.log.info('events-redelivered', { taskId: t.taskId, runId: t.runId, events: n });
  }
  return result;
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
    artifact: async (taskId, runId, name) => !!(await new ArtifactStore(svc.storage).get(taskId, runId, name)),
    groupSealed: async (taskGroupId) => (await svc.groups.meta(taskGroupId))?.sealed,
  });
  if (delivered) svc.log.info('events-swept', { kind: t.kind, delivered });
}

/** Expirers by index-row kind; a kind without one is left in the index (and logged). */
export const EXPIRERS: Record<string, (svc: Services, row: ExpiryRow) => Promise<void>> = {
  task: (svc, row) => expireTask(svc, row.id, row.data as unknown as TaskExpiryData),
  [SUBSCRIPTION_EXPIRY]: (svc, row) => expireSubscription(svc, row.id),
  [EXPIRY_KIND_TASK]: expireIndexedTask,
  [EXPIRY_KIND_NAMESPACE]: expireNamespaces,
  [EXPIRY_KIND_FIRE]: (svc, row) => new HookStore(svc.storage).removeFire(row.data.partitionKey as string, row.data.rowKey as string),
};
