/**
 * claimWork and claimTask: turning pending runs into claims with run credentials.
 */
import type { Services } from '../services';
import { claimRun, ClaimOutcome, Worker } from '../tasks/resolve';
import { Run, TaskRecord, taskStatus } from '../tasks/model';
import { runCredentials } from './credentials';
import { pollersOf, LeasedHint } from './poller';

/** A hint for a task that does not exist yet may be racing its createTask; retry it this soon. */
const YOUNG_HINT_RETRY_S = 5;
/** After this long, a hint for a missing task is garbage. */
const YOUNG_HINT_AGE_MS = 60_000;

export function claimResponse(svc: Services, task: TaskRecord, run: Run) {
  return {
    status: taskStatus(task),
    runId: run.runId,
    workerGroup: run.workerGroup!,
    workerId: run.workerId!,
    takenUntil: run.takenUntil!,
    task: task.definition,
    credentials: runCredentials(
      svc.clients,
      { taskId: task.taskId, runId: run.runId, workerGroup: run.workerGroup!, workerId: run.workerId!, takenUntil: run.takenUntil! },
      task.definition.scopes,
      svc.now(),
    ),
  };
}

export type Claim = ReturnType<typeof claimResponse>;

/**
 * Tries each leased hint; consumes used and stale hints, releases ones we failed on (so a retry, or
 * another worker, can use them at once).
 */
export async function claimHints(svc: Services, leased: LeasedHint[], worker: Worker): Promise<Claim[]> {
  const claims: Claim[] = [];
  const seen = new Set<string>();
  // A retried claimWork gets back a claim it made but never received; a stale copy of the hint
  // only reappears after a whole lease, too late to be mistaken for a retry.
  const replayWithinS = svc.tuning.hintLeaseS / 2;
  for (const l of leased) {
    const { hint, message, queue } = l;
    const done = () => queue.delete(message.messageId, message.popReceipt);
    if (!svc.pending.verify(hint)) {
      svc.log.warn('hint-invalid', { queue: queue.name, messageId: message.messageId });
      await done();
      continue;
    }
    // Once a run is claimed in this batch, its other hints are stale. (Until then every hint is
    // tried: a stale one may come before the one the run was scheduled with.)
    const key = `${hint.taskId}/${hint.runId}`;
    if (seen.has(key)) {
      await done().catch(() => undefined);
      continue;
    }
    let outcome: ClaimOutcome;
    try {
      outcome = await claimRun(svc, hint.taskId, hint.runId, worker, { hintId: hint.hintId, replayWithinS });
    } catch (err) {
      svc.log.error('claim-failed', { taskId: hint.taskId, runId: hint.runId, error: String((err as Error)?.message ?? err) });
      await queue.release(message.messageId, message.popReceipt, 0).catch(() => undefined);
      if (claims.length === 0) throw err;
      continue;
    }
    try {
      if (outcome.kind === 'claimed') {
        seen.add(key);
        claims.push(claimResponse(svc, outcome.task, outcome.run));
        await done();
      } else if (outcome.kind === 'task-not-found' && message.insertedOn && Date.now() - message.insertedOn.getTime() < YOUNG_HINT_AGE_MS) {
        await queue.release(message.messageId, message.popReceipt, YOUNG_HINT_RETRY_S);
      } else {
        await done();
      }
    } catch (err) {
      // The claim stands; a hint we could not delete comes back after its lease and is then stale.
      svc.log.warn('hint-cleanup-failed', { taskId: hint.taskId, runId: hint.runId, error: String((err as Error)?.message ?? err) });
    }
  }
  return claims;
}

/** Long-polls until at least one run is claimed or the poll window ends. */
export async function claimWork(svc: Services, taskQueueId: string, worker: Worker, count: number, pollS = svc.config.claimWorkPollS): Promise<Claim[]> {
  const end = Date.now() + pollS * 1000;
  const poller = pollersOf(svc).get(taskQueueId);
  while (Date.now() < end) {
    const leased = await poller.request(count, end);
    if (!leased.length) break;
    const claims = await claimHints(svc, leased, worker);
    if (claims.length) return claims;
  }
  return [];
}
