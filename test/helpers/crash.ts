/**
 * Crash-safety harness: run an operation with a storage failure injected right after its n-th
 * storage call (the call takes effect, then the caller "crashes"), for n = 1, 2, … until the
 * operation completes without reaching the fault (the loop is sweep.ts's). The scenario recovers
 * (client retry, reaper pass) and checks the invariants after each n. On the faithful storage mode
 * the fault draws start over before each attempt, so each attempt meets the same faults (see
 * FaultPlan.reseed).
 */
import type { StorageMeter } from '../../shared/storage/counter';
import { reseedFaults } from './service';
import { eachArmed } from './sweep';

export interface FaultResult<T> {
  value?: T & any;
  error?: any;
  /** Whether the operation reached its n-th storage call (and so failed after it). */
  hit: boolean;
  /** The storage operation that failed, e.g. `Tasks.insert`. */
  failedOp?: string;
}

export type Faulty = <T>(op: () => Promise<T>) => Promise<FaultResult<T>>;

/**
 * Fails each storage call of a scenario on `svc` in turn, after filling its auth cache so every
 * armed call sequence starts the same way.
 */
export function sweeperFor(svc: {
  services: { storage: { meter: StorageMeter }; events: { dispatcher: { subscriptions: { refresh(): Promise<unknown> } } } };
  auth(): { currentScopes(): Promise<unknown> };
}) {
  // The event subscription list is re-read on a timer too (shared/events/subscriptions.ts).
  const warm = () => Promise.all([svc.auth().currentScopes(), svc.services.events.dispatcher.subscriptions.refresh()]);
  return (scenario: Parameters<typeof eachStorageCall>[1]) => eachStorageCall(svc.services.storage.meter, scenario, { warm });
}

/**
 * Returns the storage operation failed at each n (the last n ran clean). `warm` runs before each
 * armed operation to fill per-instance caches that expire on a timer (the auth roles cache), so
 * every n sees the same sequence of calls.
 */
export function eachStorageCall(
  meter: StorageMeter,
  scenario: (faulty: Faulty, n: number) => Promise<void>,
  opts: { warm?: () => Promise<unknown>; max?: number } = {},
): Promise<string[]> {
  const trap = {
    describe: (n: number) => `a fault after storage call #${n}`,
    // Every attempt meets the faithful mode's faults at the same calls: n counts the same calls.
    arm: (n: number) => {
      reseedFaults();
      meter.failAfterCall(n);
    },
    disarm: () => meter.disarm(),
    ops: meter.armedOps,
  };
  return eachArmed(
    trap,
    (run, n) =>
      scenario(async (op) => {
        const r = await run(op);
        return { ...r, failedOp: r.op };
      }, n),
    opts,
  );
}
