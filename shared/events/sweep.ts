/**
 * The reaper's side of events: sweep triggers whose delivery a crash interrupted, and expired
 * subscriptions. Both are found through queue messages or the expiry index, never by scanning.
 */
import type { Services } from '../services';
import type { TriggerResult } from '../tasks/resolve';
import type { SweepTrigger } from './outbox';
import { ArtifactStore } from '../artifacts/store';

export async function handleEventSweep(svc: Services, t: SweepTrigger): Promise<TriggerResult> {
  const delivered = await svc.events.sweep(t, {
    artifact: async (taskId, runId, name) => !!(await new ArtifactStore(svc.storage).get(taskId, runId, name)),
    groupSealed: async (taskGroupId) => (await svc.groups.meta(taskGroupId))?.sealed,
  });
  if (delivered) svc.log.info('events-swept', { kind: t.kind, delivered });
}

export async function expireSubscription(svc: Services, subscriptionId: string): Promise<void> {
  await svc.events.dispatcher.subscriptions.expire(subscriptionId);
}
