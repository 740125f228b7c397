/**
 * claimWork and claimTask: turning pending runs into claims with run credentials.
 */
import type { Services } from '../services';
import { claimRun, ClaimOutcome, Worker } from '../lifecycle/resolve';
import { Run, TaskRecord, definitionOf, taskStatus } from '../tasks/model';
import { runCredentials } from './credentials';
import type { LeasedHint } from './poller';
import type { Hint } from '../tasks/pending';
import { mapLimit } from '../limit';

/** A hint for a task that does not exist yet may be racing its createTask; retry it this soon. */
const YOUNG_HINT_RETRY_S = 5;
/** After this long, a hint for a missing task is garbage. */
const YOUNG_HINT_AGE_MS = 60_000;

/**
 * Whether a run carries the continuation of the last suspension (suspendRun): a resumed run does,
 * and so do its retries (its worker died: the state is still where the suspension left it); a
 * rerun, and the retries of one, start over.
 */
function continuesSuspension(task: TaskRecord, runId: number): boolean {
  for (let i = runId; i >= 0; i--) {
    const why = task.runs[i].reasonCreated;
    if (why === 'resumed') return true;
    if (why === 'scheduled' || why === 'rerun') return false;
  }
  return false;
}

export function claimResponse(svc: Services, task: TaskRecord, run: Run) {
  return {
    status: taskStatus(task),
    runId: run.runId,
    workerGroup: run.workerGroup!,
    workerId: run.workerId!,
    takenUntil: run.takenUntil!,
    task: definitionOf(task),
    ...(task.continuation && continuesSuspension(task, run.runId) ? { continuation: JSON.parse(task.continuation) } : {}),
    credentials: runCredentials(
      svc.clients,
      { taskId: task.taskId, runId: run.runId, workerGroup: run.workerGroup!, workerId: run.workerId!, takenUntil: run.takenUntil! },
      task.definition.scopes,
      svc.now(),
    ),
  };
}

export type Claim = ReturnType<typeof claimResponse>;

/** Claims from one batch run side by side (four storage calls each): a whole batch at once (claimWork takes at most 32), so a batch costs one claim's time, not four. */
const CLAIM_PARALLELISM = 32;

/** Records claims in the worker's recentTasks, in the order given (the response's); must not throw (the claims stand). */
export type RecordClaims = (runs: { taskId: string; runId: number }[]) => Promise<void>;

/**
 * Tries the leased hints: runs side by side, and for each run its hints one after another until
 * one claims it (a stale copy may come before the one the run was scheduled with). Consumes used
 * and stale hints; releases the ones we failed on, so a retry (or another worker) can use them at
 * once.
 */
export async function claimHints(svc: Services, leased: LeasedHint[], worker: Worker, record?: RecordClaims): Promise<Claim[]> {
  // A retried claimWork gets back a claim it made but never received (its hint message released at
  // once); the same message left undeleted only reappears after a whole lease, too late to be
  // mistaken for a retry, and another copy of the hint is another message (shared/lifecycle/transitions.ts).
  const replayWithinS = svc.tuning.hintLeaseS / 2;
  const byRun = new Map<string, (LeasedHint & { hint: Hint })[]>();
  const garbage: LeasedHint[] = [];
  for (const l of leased) {
    if (!svc.pending.verify(l.hint)) {
      svc.log.warn('hint-invalid', { queue: l.queue.name, messageId: l.message.messageId });
      garbage.push(l);
      continue;
    }
    const key = `${l.hint.taskId}/${l.hint.runId}`;
    byRun.set(key, [...(byRun.get(key) ?? []), l as LeasedHint & { hint: Hint }]);
  }
  const remove = (l: LeasedHint) => l.queue.delete(l.message.messageId, l.message.popReceipt);
  await Promise.all(garbage.map(remove));
  // With a single run to claim, its recentTasks entry is known up front: written side by side with
  // the hint delete and the index write once the claim stands, not after them.
  const recordEarly = record && byRun.size === 1;
  let firstError: unknown;
  const results = await mapLimit([...byRun.values()], CLAIM_PARALLELISM, async (hints): Promise<Claim | undefined> => {
    for (let i = 0; i < hints.length; i++) {
      const { hint, message, queue } = hints[i];
      // Once the claim stands: the claim holds even if cleanup fails (an undeleted hint comes back
      // after its lease, stale), so these run beside the claim's index write.
      const cleanup = () =>
        Promise.all([
          Promise.all(hints.slice(i).map(remove)).catch((err) =>
            svc.log.warn('hint-cleanup-failed', { taskId: hint.taskId, runId: hint.runId, error: String((err as Error)?.message ?? err) }),
          ),
          recordEarly ? record([{ taskId: hint.taskId, runId: hint.runId }]) : undefined,
        ]).then(() => undefined);
      let outcome: ClaimOutcome;
      try {
        outcome = await claimRun(
          svc,
          hint.taskId,
          hint.runId,
          worker,
          { hintId: hint.hintId, messageId: message.messageId, replayWithinS },
          undefined,
          cleanup,
        );
      } catch (err) {
        firstError ??= err;
        svc.log.error('claim-failed', { taskId: hint.taskId, runId: hint.runId, error: String((err as Error)?.message ?? err) });
        await Promise.all(hints.slice(i).map((l) => l.queue.release(l.message.messageId, l.message.popReceipt, 0).catch(() => undefined)));
        return undefined;
      }
      try {
        if (outcome.kind === 'claimed') return claimResponse(svc, outcome.task, outcome.run);
        if (outcome.kind === 'task-not-found' && message.insertedOn && svc.now().getTime() - message.insertedOn.getTime() < YOUNG_HINT_AGE_MS) {
          await queue.release(message.messageId, message.popReceipt, YOUNG_HINT_RETRY_S);
        } else {
          await remove(hints[i]);
        }
      } catch (err) {
        svc.log.warn('hint-cleanup-failed', { taskId: hint.taskId, runId: hint.runId, error: String((err as Error)?.message ?? err) });
      }
    }
    return undefined;
  });
  const claims = results.filter((c): c is Claim => c !== undefined);
  if (claims.length === 0 && firstError) throw firstError;
  if (record && !recordEarly) await record(claims.map((c) => ({ taskId: c.status.taskId, runId: c.runId })));
  return claims;
}

/**
 * Long-polls until at least one run is claimed or the poll window ends; `record` lists the claims
 * in the worker's recentTasks. `gone` (the caller hung up) ends the poll without claiming.
 */
export async function claimWork(
  svc: Services,
  taskQueueId: string,
  worker: Worker,
  count: number,
  pollS = svc.config.claimWorkPollS,
  record?: RecordClaims,
  gone?: AbortSignal,
): Promise<Claim[]> {
  const end = Date.now() + pollS * 1000;
  const poller = svc.pollers.get(taskQueueId);
  // At least one look, however short the window (see HintPoller.request).
  do {
    const got = await poller.request(count, end, gone, worker);
    if ('handed' in got) {
      // createTask claimed run 0 for this worker in its own write (HintPoller.take): the claim stands.
      const run = got.handed.runs[0];
      await record?.([{ taskId: got.handed.taskId, runId: run.runId }]);
      return [claimResponse(svc, got.handed, run)];
    }
    const leased = got;
    if (!leased.length) break;
    if (gone?.aborted) {
      // Nobody would receive these claims: leave the runs pending for another worker.
      await Promise.all(leased.map((l) => l.queue.release(l.message.messageId, l.message.popReceipt, 0).catch(() => undefined)));
      break;
    }
    const claims = await claimHints(svc, leased, worker, record);
    if (claims.length) return claims;
  } while (Date.now() < end && !gone?.aborted);
  return [];
}
