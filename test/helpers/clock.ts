/**
 * The clock of a test file's services and of their in-memory store: real time plus an offset that
 * the test moves forward, so a claim expiry, a deadline or a lease that a test waits for passes at
 * once instead of in real seconds. Durations are the production ones (a 20-minute claim expires
 * when the test advances 20 minutes), so a slow machine never reaches them by itself.
 */
export class TestClock {
  private offsetMs = 0;

  /** Whether this file's services read this clock (in-memory store); on Azurite time passes for real. */
  controlled = false;

  /** Services of this file running on Azurite, on real time: the clock may not move while one runs. */
  realTimeServices = 0;

  readonly now = (): Date => new Date(this.ms());

  /** Whether the clock was moved: a service on real time would then disagree with the others. */
  get moved(): boolean {
    return this.offsetMs > 0;
  }

  ms(): number {
    return Date.now() + this.offsetMs;
  }

  /** Moves the clock `ms` forward. */
  advance(ms: number): void {
    if (!this.controlled) throw new Error('this file runs on Azurite, where time passes for real: use passTime()');
    if (this.realTimeServices > 0 && ms > 0) throw new Error('a service of this file runs on Azurite, on real time: close it before moving the clock');
    if (ms > 0) this.offsetMs += ms;
  }

  /** Moves the clock to `at` (an ISO string, a Date or epoch ms) plus `slackMs`, if that is ahead. */
  advanceTo(at: string | number | Date, slackMs = 0): void {
    this.advance(new Date(at).getTime() + slackMs - this.ms());
  }
}
