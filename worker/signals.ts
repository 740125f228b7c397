/**
 * What SIGTERM/SIGINT do, signal after signal: the first stops claiming (tasks stop at once, or
 * after the grace period); the next stops the tasks without waiting for the grace; once tasks are
 * stopping, another exits at once without reporting.
 */
import type { WorkerLog } from './types';

/**
 * `npm run worker` forwards the terminal's SIGINT to a worker that already got it from the
 * terminal: one Ctrl-C arrives twice within milliseconds, and must count once.
 */
export const DUPLICATE_SIGNAL_MS = 1_000;

export interface Stoppable {
  shutdown(reason: string): void;
  /** Whether running tasks have been told to stop (after shutdown, once the grace is over or skipped). */
  readonly stoppingTasks: boolean;
  readonly stopping: boolean;
}

export function signalHandler(worker: Stoppable, log: WorkerLog, exit: (code: number) => void, now: () => number = Date.now): (sig: NodeJS.Signals) => void {
  let last = -Infinity;
  return (sig) => {
    const t = now();
    if (t - last < DUPLICATE_SIGNAL_MS) return;
    last = t;
    if (worker.stopping && worker.stoppingTasks) {
      log.warn('worker-killed', { signal: sig });
      exit(1);
      return;
    }
    worker.shutdown(sig);
  };
}
