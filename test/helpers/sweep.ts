/**
 * The loop both sweeps share (crash.ts fails the n-th storage call, ambiguity.ts answers the n-th
 * write ambiguously): arm at n = 1, 2, … and run the scenario, until its operation no longer
 * reaches the n-th counted call. The operation runs as an invocation of its own (Sweep), so only
 * its calls and those of the requests it makes are counted.
 */
import { Sweep } from '../../shared/storage/counter';
import { settleServices } from './service';

export interface Armed<T> {
  value?: T & any;
  error?: any;
  /** Whether the operation reached its n-th counted call. */
  hit: boolean;
  /** The call armed at n, e.g. `Tasks.transaction`. */
  op?: string;
}

/** What a sweep arms: the meter (calls) or the faithful mode's plan (writes). */
export interface Trap {
  /** What a failure message calls the armed call, e.g. "a fault after storage call #3". */
  describe(n: number): string;
  /** Called after `warm` and settling, right before the operation runs. */
  arm(n: number): void;
  /** Stops the trap; how many counted calls the operation made. */
  disarm(): number;
  /** The counted calls, in order. */
  readonly ops: string[];
}

export async function eachArmed(
  trap: Trap,
  scenario: (run: <T>(op: () => Promise<T>) => Promise<Armed<T>>, n: number) => Promise<void>,
  opts: { warm?: () => Promise<unknown>; max?: number } = {},
): Promise<string[]> {
  const max = opts.max ?? 60;
  const armedOps: string[] = [];
  for (let n = 1; n <= max; n++) {
    let hit: boolean | undefined;
    const run = async <T>(op: () => Promise<T>): Promise<Armed<T>> => {
      await opts.warm?.();
      await settleServices();
      trap.arm(n);
      let value;
      let error;
      try {
        value = await Sweep.run(op);
      } catch (err) {
        error = err;
      }
      hit = trap.disarm() >= n;
      const armed = hit ? trap.ops[n - 1] : undefined;
      if (armed) armedOps.push(armed);
      return { value, error, hit, op: armed };
    };
    try {
      await scenario(run, n);
    } catch (err) {
      (err as Error).message = `with ${trap.describe(n)} (${armedOps[n - 1] ?? 'not reached'}): ${(err as Error).message}`;
      throw err;
    }
    if (hit === undefined) throw new Error('the scenario never ran its operation through the sweep');
    if (!hit) return armedOps;
  }
  throw new Error(`the operation still made counted calls after ${max}`);
}
