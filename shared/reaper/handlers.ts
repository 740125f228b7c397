/**
 * Trigger handlers. Each re-reads the task and acts only if the trigger still matches it, so
 * duplicates, stale messages and overlapping reaper instances are harmless.
 */
import type { Services } from '../services';
import type { ClaimTrigger, DeadlineTrigger, ResolvedTrigger } from '../tasks/triggers';
import { resolveDeadline, expireClaim, finishResolution } from '../tasks/resolve';

export async function handleDeadline(svc: Services, t: DeadlineTrigger): Promise<void> {
  await resolveDeadline(svc, t.taskId, t.deadline);
}

export async function handleClaimExpired(svc: Services, t: ClaimTrigger): Promise<void> {
  await expireClaim(svc, t.taskId, t.runId, t.takenUntil);
}

export async function handleResolved(svc: Services, t: ResolvedTrigger): Promise<void> {
  await finishResolution(svc, t.taskId);
}
