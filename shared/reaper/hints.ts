/**
 * Repairs pending runs whose hint is gone: a holder of poll URLs can delete a hint, or dequeue it
 * with a visibility of up to seven days, and neither claimWork nor other workers would see the run
 * until then. A run pending for far longer than any normal wait, whose hint is not among the
 * visible messages of its queue, gets a fresh hint. The run row names the hint that may claim it,
 * so the old one, should it come back, claims nothing: this can never allow two claims.
 *
 * Cost per check: one read of the TaskQueues table and one of the index registry, one index query
 * per task queue (per bucket of a busy one), and a peek
 * per priority shard and a task read only where runs are that old. It runs every
 * `hintRepairEveryS` per instance, the first time one interval after the instance started.
 */
import type { Services } from '../services';
import { indexedQueues, stalePending } from '../ops/indexes';
import { decodeMessage, MAX_DEQUEUE } from '../storage/storage';
import type { Hint } from '../tasks/pending';
import { rehintRun } from '../lifecycle/resolve';
import { priorityOf } from '../tasks/model';
import { mapLimit } from '../limit';

/** Old pending runs looked at per task queue per check; the rest wait for the next check. */
const RUNS_PER_QUEUE = MAX_DEQUEUE;
/** Task queues checked at once. */
const QUEUE_CONCURRENCY = 4;

/** When this instance last checked for hidden hints: one check per interval, whatever the reaper's schedule. */
export class HintRepairSchedule {
  private last: number | undefined;

  /** Whether a check is due now (and so counted as done). The first comes one interval after start-up, so an idle pass stays a fixed handful of calls. */
  due(now: Date, everyS: number): boolean {
    const last = this.last;
    if (last !== undefined && now.getTime() - last < everyS * 1000) return false;
    this.last = now.getTime();
    return last !== undefined;
  }
}

/** Returns how many runs got a fresh hint; does nothing if this instance checked recently. */
export async function repairHiddenHints(svc: Services): Promise<number> {
  const now = svc.now();
  if (!svc.hintRepair.due(now, svc.tuning.hintRepairEveryS)) return 0;
  const before = new Date(now.getTime() - svc.tuning.hintRepairAfterS * 1000).toJSON();
  const queues = await svc.workers.allQueues();
  // Every task queue's index bucket count in one read of the registry, rather than one read each.
  const buckets = new Map((await indexedQueues(svc.storage)).map((q) => [q.taskQueueId, q.buckets]));
  const repaired = await mapLimit(queues, QUEUE_CONCURRENCY, async (q) => {
    const stale = await stalePending(svc.storage, q.taskQueueId, before, now, RUNS_PER_QUEUE, buckets.get(q.taskQueueId) ?? 1);
    if (!stale.length) return 0;
    const tasks = (await Promise.all(stale.map(async (s) => ({ ...s, task: await svc.tasks.load(s.taskId) })))).filter(
      (s) => s.task && s.task.runs.length - 1 === s.runId && s.task.runs[s.runId].state === 'pending',
    );
    // One peek per priority shard in use: which hints are visible right now.
    const visible = new Map<string, Set<string> | 'backlog'>();
    const priorities = new Set(tasks.map((s) => priorityOf(s.task!)));
    for (const { priority, shard } of (await svc.pending.usedQueues(q.taskQueueId)).filter((u) => priorities.has(u.priority))) {
      const msgs = await svc.pending.queue(q.taskQueueId, priority, shard).peek(MAX_DEQUEUE);
      const seen = visible.get(priority) ?? new Set<string>();
      // A full page means a backlog: the run's hint may simply be further back. Leave it.
      if (seen === 'backlog' || msgs.length >= MAX_DEQUEUE) visible.set(priority, 'backlog');
      else visible.set(priority, new Set([...seen, ...msgs.map((m) => decodeMessage<Hint>(m as never)?.hintId ?? '')]));
    }
    let n = 0;
    for (const s of tasks) {
      const run = s.task!.runs[s.runId];
      const seen = visible.get(priorityOf(s.task!));
      if (seen === 'backlog' || (seen && run.hintId && seen.has(run.hintId))) continue;
      if (await rehintRun(svc, s.taskId, s.runId, run.hintId)) {
        n++;
        svc.log.warn('hint-repaired', { taskId: s.taskId, runId: s.runId, taskQueueId: q.taskQueueId });
      }
    }
    return n;
  });
  return repaired.reduce((a, b) => a + b, 0);
}
