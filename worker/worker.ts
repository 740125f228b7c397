/**
 * The claim loop: keeps up to `concurrency` runs going, asking the work source only for as many
 * tasks as there are free slots. `shutdown()` stops claiming and makes every running task report
 * `exception/worker-shutdown` (the queue then retries it elsewhere); `done` settles when all of
 * them have.
 */
import type { Claim, WorkerLog } from './types';
import type { WorkSource } from './protocols/source';
import type { Outcome } from './task-run';
import { messageOf } from './types';
import { sleep } from './sleep';
import { ERROR_BACKOFF_MS } from './protocols/source';

export interface WorkerDeps {
  source: WorkSource;
  concurrency: number;
  runTask: (claim: Claim, shutdown: AbortSignal) => Promise<Outcome>;
  log: WorkerLog;
  /** Stop after this many runs (demo and tests); unlimited when undefined. */
  maxTasks?: number;
}

export class Worker {
  private readonly shutdownCtl = new AbortController();
  private readonly running = new Map<string, Promise<void>>();
  private started = 0;
  readonly outcomes: { taskId: string; runId: number; outcome: Outcome }[] = [];

  constructor(private readonly deps: WorkerDeps) {}

  get stopping(): boolean {
    return this.shutdownCtl.signal.aborted;
  }

  /** Stops claiming; running tasks are stopped and reported worker-shutdown. */
  shutdown(reason = 'shutdown'): void {
    if (this.stopping) return;
    this.deps.log.info('worker-stopping', { reason, running: this.running.size });
    this.shutdownCtl.abort(reason);
  }

  /** Runs until shutdown (or maxTasks), then waits for every started run to settle. */
  async run(): Promise<void> {
    const { source, concurrency, log, maxTasks } = this.deps;
    const signal = this.shutdownCtl.signal;
    const aborted = new Promise((r) => signal.addEventListener('abort', r, { once: true }));
    while (!signal.aborted && (maxTasks === undefined || this.started < maxTasks)) {
      const free = Math.min(concurrency - this.running.size, maxTasks === undefined ? Infinity : maxTasks - this.started);
      if (free <= 0) {
        await Promise.race([...this.running.values(), aborted]);
        continue;
      }
      let claims: Claim[] = [];
      try {
        claims = await source.claim(free, signal);
      } catch (err) {
        // Sources handle their own failures; this is a bug, but running tasks must still be seen through.
        log.error('claim-crashed', { message: messageOf(err) });
        await sleep(ERROR_BACKOFF_MS, signal);
      }
      // Claims that arrive after shutdown began still start: runTask sees the aborted signal and
      // reports worker-shutdown at once, so they are retried instead of waiting for claim expiry.
      for (const c of claims) this.start(c);
    }
    await Promise.all(this.running.values());
  }

  private start(claim: Claim): void {
    const key = `${claim.status.taskId}/${claim.runId}`;
    if (this.running.has(key)) return;
    this.started++;
    const p = this.deps
      .runTask(claim, this.shutdownCtl.signal)
      .then((outcome) => void this.outcomes.push({ taskId: claim.status.taskId, runId: claim.runId, outcome }))
      .catch((err) => this.deps.log.error('task-run-crashed', { taskId: claim.status.taskId, runId: claim.runId, message: messageOf(err) }))
      .finally(() => this.running.delete(key));
    this.running.set(key, p);
  }
}
