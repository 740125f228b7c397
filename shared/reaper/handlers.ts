/**
 * Trigger handlers. Each re-reads the task and acts only if the trigger still matches it, so
 * duplicates, stale messages and overlapping reaper instances are harmless.
 */
import type { Services } from '../services';
import type { ClaimTrigger, DeadlineTrigger, ResolvedTrigger } from '../tasks/triggers';
import { resolveDeadline, expireClaim, finishResolution, TriggerResult } from '../tasks/resolve';
import { expireTask, TaskExpiryData } from '../tasks/expire';
import type { ExpiryRow } from '../tasks/expiry';
import { EXPIRY_KIND_NAMESPACE, EXPIRY_KIND_TASK, expireIndexedTask, expireNamespaces } from '../index/index';
import { EXPIRY_KIND_FIRE } from '../hooks/hooks';
import { HookStore } from '../hooks/store';

export async function handleDeadline(svc: Services, t: DeadlineTrigger): Promise<TriggerResult> {
  return resolveDeadline(svc, t.taskId, t.deadline);
}

export async function handleClaimExpired(svc: Services, t: ClaimTrigger): Promise<TriggerResult> {
  return expireClaim(svc, t.taskId, t.runId, t.takenUntil);
}

export async function handleResolved(svc: Services, t: ResolvedTrigger): Promise<TriggerResult> {
  await finishResolution(svc, t.taskId);
}

/** Expirers by index-row kind; a kind without one is left in the index (and logged). */
export const EXPIRERS: Record<string, (svc: Services, row: ExpiryRow) => Promise<void>> = {
  task: (svc, row) => expireTask(svc, row.id, row.data as unknown as TaskExpiryData),
  [EXPIRY_KIND_TASK]: expireIndexedTask,
  [EXPIRY_KIND_NAMESPACE]: expireNamespaces,
  [EXPIRY_KIND_FIRE]: (svc, row) => new HookStore(svc.storage).removeFire(row.data.partitionKey as string, row.data.rowKey as string),
};
