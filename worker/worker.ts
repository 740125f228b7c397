/**
 * The claim loop: keeps up to `concurrency` runs going, asking the work source only for as many
 * tasks as there are free slots. `shutdown()` stops claiming at once (aborting a long poll in
 * flight), then stops every running task, which reports `exception/worker-shutdown` (the queue
 * retries it elsewhere): at once, or after `shutdownGraceMs` for tasks to finish on their own.
 * A second `shutdown()` stops the tasks without waiting for the grace. `run()` settles when every
 * run has.
 */
import type { Claim, WorkerLog } from './types';
import type { WorkSource } from './protocols/source';
import type { Outcome } from './task-run';
import { messageOf } from './types';
import { sleep } from './sleep';
import { CredentialsRejected, ERROR_BACKOFF_MS } from './protocols/source';

export interface WorkerDeps {
  source: WorkSource;
  concurrency: number;
  runTask: (claim: Claim, shutdown: AbortSignal) => Promise<Outcome>;
  log: WorkerLog;
  /** Stop after this many runs (demo and tests); unlimited when undefined. */
  maxTasks?: number;
  /** After shutdown, how long running tasks may go on before they are stopped (default 0: at once). */
  shutdownGraceMs?: number;
  /** Timer for the grace period (tests pass a controllable one); returns a cancel function. */
  setTimer?: (ms: number, fn: () => void) => () => void;
}

const realTimer = (ms: number, fn: () => void) => {
  const t = setTimeout(fn, ms);
  return () => clearTimeout(t);
};

export class Worker {
  /** Aborted at shutdown: no claim starts after it, and the one in flight is aborted. */
  private readonly claimCtl = new AbortController();
  /** Aborted when running tasks must stop (after the grace). */
  private readonly taskCtl = new AbortController();
  private readonly running = new Map<string, Promise<void>>();
  /** The claim call in flight, if any: tasks are stopped only once it has ended. */
  private claiming: Promise<unknown> = Promise.resolve();
  private cancelGrace: (() => void) | undefined;
  private tasksStopping = false;
  private started = 0;
  readonly outcomes: { taskId: string; runId: number; outcome: Outcome }[] = [];
  /** Why the worker stopped on its own (credentials rejected), if it did. */
  fatal: CredentialsRejected | undefined;

  constructor(private readonly deps: WorkerDeps) {}

  get stopping(): boolean {
    return this.claimCtl.signal.aborted;
  }

  /** Whether running tasks have been told to stop (at shutdown, or when its grace ended). */
  get stoppingTasks(): boolean {
    return this.tasksStopping;
  }

  /** Stops claiming now; running tasks stop (worker-shutdown) at once or after the grace period. */
  shutdown(reason = 'shutdown'): void {
    if (this.stopping) {
      if (!this.taskCtl.signal.aborted) this.deps.log.info('worker-stopping-tasks', { reason, running: this.running.size });
      this.stopTasks(reason);
      return;
    }
    const graceMs = this.deps.shutdownGraceMs ?? 0;
    this.deps.log.info('worker-stopping', { reason, running: this.running.size, graceS: graceMs ? graceMs / 1000 : undefined });
    this.claimCtl.abort(reason);
    if (graceMs > 0 && this.running.size) this.cancelGrace = (this.deps.setTimer ?? realTimer)(graceMs, () => this.stopTasks(reason));
    else this.stopTasks(reason);
  }

  private stopTasks(reason: string): void {
    this.tasksStopping = true;
    this.cancelGrace?.();
    // Only once our own claim request has ended, so it cannot pick up the retries our reports create.
    void this.claiming.finally(() => this.taskCtl.abort(reason));
  }

  /** Runs until shutdown (or maxTasks), then waits for every started run to settle. */
  async run(): Promise<void> {
    const { source, concurrency, log, maxTasks } = this.deps;
    const signal = this.claimCtl.signal;
    const aborted = new Promise((r) => signal.addEventListener('abort', r, { once: true }));
    while (!signal.aborted && (maxTasks === undefined || this.started < maxTasks)) {
      const free = Math.min(concurrency - this.running.size, maxTasks === undefined ? Infinity : maxTasks - this.started);
      if (free <= 0) {
        await Promise.race([...this.running.values(), aborted]);
        continue;
      }
      let claims: Claim[] = [];
      const call = source.claim(free, signal);
      this.claiming = call.catch(() => undefined);
      try {
        claims = await call;
      } catch (err) {
        if (err instanceof CredentialsRejected) {
          this.fatal = err;
          log.error('credentials-rejected', { message: err.detail });
          this.shutdown('credentials-rejected');
          break;
        }
        // Sources handle their own failures; this is a bug, but running tasks must still be seen through.
        log.error('claim-crashed', { message: messageOf(err) });
        await sleep(ERROR_BACKOFF_MS, signal);
      }
      // A claim answered just as shutdown began still runs (or reports worker-shutdown at once if
      // the tasks are being stopped), so it is retried at once instead of waiting for claim expiry.
      for (const c of claims) this.start(c);
    }
    await Promise.all(this.running.values());
    this.cancelGrace?.();
  }

  private start(claim: Claim): void {
    const key = `${claim.status.taskId}/${claim.runId}`;
    if (this.running.has(key)) return;
    this.started++;
    const p = this.deps
      .runTask(claim, this.taskCtl.signal)
      .then((outcome) => void this.outcomes.push({ taskId: claim.status.taskId, runId: claim.runId, outcome }))
      .catch((err) => this.deps.log.error('task-run-crashed', { taskId: claim.status.taskId, runId: claim.runId, message: messageOf(err) }))
      .finally(() => this.running.delete(key));
    this.running.set(key, p);
  }
}
