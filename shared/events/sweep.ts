/**
 * The reaper's side of events: expired subscriptions, found through the expiry index (sweep
 * triggers are handled in shared/reaper/handlers.ts, which may read artifacts).
 */
import type { Services } from '../services';

export async function expireSubscription(svc: Services, subscriptionId: string): Promise<void> {
  await svc.events.dispatcher.subscriptions.expire(subscriptionId);
}
