/**
 * The lingering part of a group commit, shared by the operator index's (shared/ops/indexes.ts
 * `IndexBatcher`) and the expiry index's (shared/tasks/expiry.ts `ExpiryIndex`): a partition's
 * drain waits a while for more writers, and can be woken early (a full batch, a write that must not
 * wait); `settled()` wakes every drain and waits for every write queued before it.
 */
export class Lingering {
  /** Wakes a partition's waiting drain. */
  private readonly wakers = new Map<string, () => void>();
  /** Every write queued or in flight, for settled(). */
  private readonly open = new Set<Promise<void>>();
  /** settled() calls under way: while any is, nothing lingers. */
  private hurry = 0;

  /** Whether a settled() is under way: a drain should not wait then. */
  get hurried(): boolean {
    return this.hurry > 0;
  }

  /** Waits up to `ms` for partition `pk`'s other writers, or until woken. */
  wait(pk: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wakers.delete(pk);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wakers.set(pk, done);
    });
  }

  /** Ends partition `pk`'s wait, if it is waiting. */
  wake(pk: string): void {
    this.wakers.get(pk)?.();
  }

  /** Counts a queued write until it has gone out or failed (for settled()). */
  track(p: Promise<void>): void {
    const settled = p.then(
      () => undefined,
      () => undefined,
    );
    this.open.add(settled);
    void settled.then(() => this.open.delete(settled));
  }

  /** Resolves once every write queued before the call has gone out or failed; waiting partitions go out at once. */
  async settled(): Promise<void> {
    this.hurry++;
    try {
      for (const wake of [...this.wakers.values()]) wake();
      await Promise.allSettled([...this.open]);
    } finally {
      this.hurry--;
    }
  }
}
