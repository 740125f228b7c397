/**
 * The twin of the crash sweep (crash.ts): each storage write of an operation in turn applies and
 * then answers as a timeout, 500 or 503 would; the store retries it as the SDK's retry policy does,
 * and the retry meets its own success (409, 412, 404; a queue put leaves a second message). The
 * operation must come out as it does without the fault: the scenario checks that after each n.
 */
import { FaultyStorage } from '../../shared/storage/faults';
import type { Storage } from '../../shared/storage/port';
import { eachArmed, type Armed } from './sweep';

/** `op` is the write answered ambiguously, e.g. `Tasks.transaction`. */
export type Ambiguous = <T>(op: () => Promise<T>) => Promise<Armed<T>>;

function faultyOf(storage: Storage): FaultyStorage {
  if (!(storage instanceof FaultyStorage)) throw new Error('the ambiguity sweep needs the faithful storage mode (QUEUE_STORAGE_FAULTS)');
  return storage;
}

/** Sweeps the writes of `scenario`'s operation on `storage`; returns the write made ambiguous at each n. */
export function eachWrite(
  storage: Storage,
  scenario: (ambiguous: Ambiguous, n: number) => Promise<void>,
  opts: { warm?: () => Promise<unknown>; max?: number } = {},
): Promise<string[]> {
  const plan = faultyOf(storage).plan;
  const trap = {
    describe: (n: number) => `write #${n} answered ambiguously`,
    arm: (n: number) => plan.ambiguousAt(n),
    disarm: () => plan.disarm(),
    ops: plan.armedOps,
  };
  return eachArmed(trap, scenario, opts);
}

/**
 * The calls Azure's faults add to an operation, from now: attempts the SDK-style retry sent again
 * after they applied, and reads after a page cut short. `since()` gives them by op (`Tasks.get`);
 * none on a store without faults (Azurite).
 */
export function faultExtras(storage: Storage): { since(): Map<string, number> } {
  const plan = storage instanceof FaultyStorage ? storage.plan : undefined;
  const before = new Map(plan?.extra ?? []);
  return {
    since: () => new Map([...(plan?.extra ?? [])].map(([op, n]) => [op, n - (before.get(op) ?? 0)] as const).filter(([, n]) => n > 0)),
  };
}

/** The storage calls an operation made (`ops`, as the meter lists them) without those its faults added. */
export function operationCalls(ops: string[], extras: Map<string, number>): string[] {
  const left = new Map(extras);
  return ops.filter((op) => {
    const n = left.get(op) ?? 0;
    if (n === 0) return true;
    left.set(op, n - 1);
    return false;
  });
}

/** Messages Azure's faults stored twice (a put whose answer was lost, sent again), as `{ queue, body }`; none without faults. */
export function duplicatedPuts(storage: Storage): { queue: string; body: unknown }[] {
  return storage instanceof FaultyStorage ? [...storage.plan.duplicated] : [];
}
