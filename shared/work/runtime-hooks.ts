/**
 * Attaches the claimWork pollers to a services instance (so wakes reach them from the start).
 */
import type { Services } from '../services';
import { pollersOf } from './poller';

export function startPollers(svc: Services): void {
  pollersOf(svc);
}

export function stopPollers(svc: Services): void {
  pollersOf(svc).stop();
}
