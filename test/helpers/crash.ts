/**
 * Crash-safety harness: run an operation with a storage failure injected right after its n-th
 * storage call (the call takes effect, then the caller "crashes"), for n = 1, 2, … until the
 * operation completes without reaching the fault. Only the calls of the operation and of the
 * requests it makes count (Sweep): an instance's own loops and earlier requests' lingering work do
 * not. The scenario recovers (client retry, reaper pass) and checks the invariants after each n. On the faithful storage mode the fault draws start
 * over before each attempt, so each attempt meets the same faults (see FaultPlan.reseed).
 */
import { Sweep, type StorageMeter } from '../../shared/storage/counter';
import { reseedFaults, settleServices } from './service';

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
export async function eachStorageCall(
  meter: StorageMeter,
  scenario: (faulty: Faulty, n: number) => Promise<void>,
  opts: { warm?: () => Promise<unknown>; max?: number } = {},
): Promise<string[]> {
  const max = opts.max ?? 60;
  const failedOps: string[] = [];
  for (let n = 1; n <= max; n++) {
    let hit: boolean | undefined;
    const faulty: Faulty = async (op) => {
      await opts.warm?.();
      await settleServices();
      // Every attempt meets the faithful mode's faults at the same calls: n counts the same calls.
      reseedFaults();
      meter.failAfterCall(n);
      let value;
      let error;
      try {
        value = await Sweep.run(op);
      } catch (err) {
        error = err;
      }
      const calls = meter.disarm();
      hit = calls >= n;
      const failedOp = hit ? meter.armedOps[n - 1] : undefined;
      if (failedOp) failedOps.push(failedOp);
      return { value, error, hit, failedOp };
    };
    try {
      await scenario(faulty, n);
    } catch (err) {
      (err as Error).message = `with a fault after storage call #${n} (${failedOps[n - 1] ?? 'not reached'}): ${(err as Error).message}`;
      throw err;
    }
    if (hit === undefined) throw new Error('the scenario never ran its operation through faulty()');
    if (!hit) return failedOps;
  }
  throw new Error(`the operation still made storage calls after ${max}`);
}
