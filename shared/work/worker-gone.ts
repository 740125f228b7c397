/**
 * A worker known to be gone (its instance was terminated, its machine died): rather than waiting
 * for each claim to expire (up to the claim timeout), its running runs resolve at once as
 * exception/worker-shutdown and are retried. The runs come from the worker's claims index and its
 * recent claims (the index is written after the task row, so a claim made a moment ago may only be
 * in the latter); each is resolved only if that worker still holds it.
 */
import type { Services } from '../services';
import { listWorkerRuns } from '../ops/indexes';
import { workerGoneRun } from '../lifecycle/resolve';
import { mapLimit } from '../limit';
import { pagesOf } from '../storage/storage';

/** Index rows read per page. */
const PAGE = 1000;
/** Runs resolved at once. */
const CONCURRENCY = 16;

export interface GoneResult {
  taskQueueId: string;
  workerGroup: string;
  workerId: string;
  /** The runs this call resolved. */
  resolved: { taskId: string; runId: number }[];
}

export async function declareWorkerGone(svc: Services, taskQueueId: string, workerGroup: string, workerId: string): Promise<GoneResult> {
  const now = svc.now();
  // A run can stay claimed (by reclaims) until its deadline, at most this long after it started.
  const since = new Date(now.getTime() - svc.config.maxTaskDeadlineDays * 24 * 3600 * 1000).toJSON();
  await svc.indexes.settled(); // this instance's queued index writes (a claim made a moment ago) first
  const candidates = new Map<string, { taskId: string; runId: number }>();
  const add = (taskId: string, runId: number) => candidates.set(`${taskId}/${runId}`, { taskId, runId });
  const running = (c?: string) => listWorkerRuns(svc.storage, taskQueueId, workerGroup, workerId, { since, state: 'running' }, PAGE, c);
  for await (const page of pagesOf(running)) for (const r of page.rows) add(r.taskId, Number(r.runId));
  const row = await svc.workers.getRow(taskQueueId, workerGroup, workerId);
  for (const r of JSON.parse(row?.recentTasks || '[]') as { taskId: string; runId: number }[]) add(r.taskId, r.runId);
  const worker = { workerGroup, workerId };
  const done = await mapLimit([...candidates.values()], CONCURRENCY, async (c) => ((await workerGoneRun(svc, c.taskId, c.runId, worker)) ? c : undefined));
  const resolved = done.filter((c): c is { taskId: string; runId: number } => !!c);
  svc.log.info('worker-declared-gone', { taskQueueId, workerGroup, workerId, resolved: resolved.length });
  return { taskQueueId, workerGroup, workerId, resolved };
}
