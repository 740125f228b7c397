/**
 * Every storage call goes through `StorageMeter.run`: it counts transactions (what Azure bills)
 * and, in tests, injects a failure right after a chosen call to prove crash safety.
 */
export class InjectedFault extends Error {
  constructor(
    readonly callIndex: number,
    readonly op: string,
  ) {
    super(`injected storage failure after call #${callIndex} (${op})`);
    this.name = 'InjectedFault';
  }
}

import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * One function invocation's tally, so its log line reports its own storage calls; `seq` orders
 * invocations by start, so a test sweep counts only the calls of those it started (see `Sweep`).
 */
export interface Invocation {
  calls: number;
  readonly seq: number;
}

/** The current invocation, if any (an HTTP request, or an operation a test sweep runs). */
export const invocationTally = new AsyncLocalStorage<Invocation>();

let invocationsStarted = 0;

/** A new invocation's tally, numbered after every earlier one. */
export function newInvocation(): Invocation {
  return { calls: 0, seq: ++invocationsStarted };
}

/**
 * What a test sweep counts: the calls of the invocation that armed it and of those started after
 * (the swept operation, and the requests it makes), not those of work still running from earlier
 * ones or of an instance's own loops (claimWork pollers, cache refreshes), whose timing shifts
 * under load.
 */
export class Sweep {
  private readonly after = invocationsStarted;
  private readonly arming = invocationTally.getStore();

  counts(): boolean {
    const current = invocationTally.getStore();
    return current !== undefined && (current.seq > this.after || current === this.arming);
  }

  /** Runs `op` as an invocation of its own, so a sweep armed before counts its calls. */
  static run<T>(op: () => Promise<T>): Promise<T> {
    return invocationTally.run(newInvocation(), op);
  }
}

/** What an adapter counts its calls through (an account's adapter also tallies its account). */
export interface Meter {
  run<T>(op: string, fn: () => Promise<T>): Promise<T>;
  /** Notes `n` entities (or messages) on one table partition or queue, when partitions are tracked. */
  touch?(where: string, n: number): void;
}

export class StorageMeter implements Meter {
  total = 0;
  readonly byOp = new Map<string, number>();
  /** Calls per data account (index in the deployment's account list), for the scale model. */
  readonly byAccount = new Map<number, number>();
  /** Calls and entities per table partition, calls per queue (`table <name> <pk>`, `queue <name>`), while tracked. */
  partitions: Map<string, { calls: number; entities: number }> | undefined;
  private failAt: number | undefined;
  private sweep: Sweep | undefined;
  private armedCalls = 0;
  /** ops (e.g. `Tasks.update`) seen since the fault was armed (while counting, those that failed too), for test diagnostics. */
  readonly armedOps: string[] = [];

  /** While a fault is armed, calls run one at a time in the order they were issued (see run). */
  private turn: Promise<void> = Promise.resolve();

  /** The meter one account's adapter counts through: this one, with the account tallied. */
  forAccount(account: number): Meter {
    return { run: (op, fn) => this.run(op, fn, account), touch: (where, n) => this.touch(where, n) };
  }

  /** Start tallying per partition and queue (the bench's scale model); off by default, as the keys are unbounded. */
  trackPartitions(): void {
    this.partitions = new Map();
  }

  touch(where: string, n: number): void {
    if (!this.partitions) return;
    const t = this.partitions.get(where) ?? { calls: 0, entities: 0 };
    t.calls++;
    t.entities += n;
    this.partitions.set(where, t);
  }

  async run<T>(op: string, fn: () => Promise<T>, account = 0): Promise<T> {
    this.total++;
    this.byAccount.set(account, (this.byAccount.get(account) ?? 0) + 1);
    const tally = invocationTally.getStore();
    if (tally) tally.calls++;
    this.byOp.set(op, (this.byOp.get(op) ?? 0) + 1);
    if (this.failAt === undefined || !this.sweep?.counts()) return fn();
    // Armed (crash tests): calls made side by side complete in a fixed order, so a sweep that
    // fails the n-th call reaches each call of the operation in turn, whatever the timing.
    const before = this.turn;
    let done!: () => void;
    this.turn = new Promise((r) => (done = r));
    try {
      await before;
      return await this.armed(op, fn);
    } finally {
      done();
    }
  }

  private async armed<T>(op: string, fn: () => Promise<T>): Promise<T> {
    let result: T;
    try {
      result = await fn();
    } catch (err) {
      // An error answer (a 412 to a retried write, say) is a call Azure bills too: a count lists
      // it. A sweep does not fail after it (its caller already sees an error), so its n stay as they were.
      if (this.failAt === Number.POSITIVE_INFINITY) this.armedOps.push(op);
      throw err;
    }
    if (this.failAt !== undefined) {
      this.armedCalls++;
      this.armedOps.push(op);
      if (this.armedCalls === this.failAt) {
        this.failAt = undefined;
        throw new InjectedFault(this.armedCalls, op);
      }
    }
    return result;
  }

  /**
   * Make the n-th storage call from now (1-based) of invocations started from now (`Sweep`) fail
   * after it has taken effect.
   */
  failAfterCall(n: number): void {
    this.failAt = n;
    this.sweep = new Sweep();
    this.armedCalls = 0;
    this.armedOps.length = 0;
  }

  /** Stop injecting; returns how many calls ran while armed. */
  disarm(): number {
    this.failAt = undefined;
    return this.armedCalls;
  }

  /** Count calls without injecting anything (to learn how many calls an operation makes). */
  startCounting(): void {
    this.failAt = Number.POSITIVE_INFINITY;
    this.sweep = new Sweep();
    this.armedCalls = 0;
    this.armedOps.length = 0;
  }

  snapshot(): { total: number; byOp: Record<string, number> } {
    return { total: this.total, byOp: Object.fromEntries(this.byOp) };
  }
}
