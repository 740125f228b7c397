/**
 * The current protocol: `claimWork(taskQueueId, {workerGroup, workerId, tasks})`, a long poll
 * (up to ~20 s) that returns claims with their temporary credentials. Shutdown aborts the poll.
 */
import type { Claim, WorkerLog } from '../types';
import { messageOf, statusOf } from '../types';
import { sleep as defaultSleep } from '../sleep';
import { WorkSource, MAX_BATCH, ERROR_BACKOFF_MS, CredentialsRejected } from './source';

export interface ClaimWorkQueue {
  /** `signal` aborts the long poll (the connection closes, so the queue stops waiting for this worker). */
  claimWork(taskQueueId: string, payload: { workerGroup: string; workerId: string; tasks: number }, signal?: AbortSignal): Promise<{ tasks: Claim[] }>;
}

export interface ClaimWorkDeps {
  queue: ClaimWorkQueue;
  taskQueueId: string;
  workerGroup: string;
  workerId: string;
  log: WorkerLog;
  sleep?: typeof defaultSleep;
}

export class ClaimWorkSource implements WorkSource {
  constructor(private readonly deps: ClaimWorkDeps) {}

  async claim(max: number, signal: AbortSignal): Promise<Claim[]> {
    const { queue, taskQueueId, workerGroup, workerId, log } = this.deps;
    if (signal.aborted) return [];
    try {
      const { tasks } = await queue.claimWork(taskQueueId, { workerGroup, workerId, tasks: Math.max(1, Math.min(MAX_BATCH, max)) }, signal);
      return tasks;
    } catch (err) {
      if (signal.aborted) return [];
      if (statusOf(err) === 401) throw new CredentialsRejected(messageOf(err).split('\n')[0]);
      log.error('claim-work-failed', { taskQueueId, status: statusOf(err), message: messageOf(err).split('\n')[0] });
      await (this.deps.sleep ?? defaultSleep)(ERROR_BACKOFF_MS, signal);
      return [];
    }
  }
}
