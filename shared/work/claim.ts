/**
 * claimWork and claimTask: turning pending runs into claims with run credentials.
 */
import type { Services } from '../services';
import { claimRun, Worker } from '../tasks/resolve';
import { Run, TaskRecord, taskStatus } from '../tasks/model';
import { runCredentials } from './credentials';
import { pollersOf, LeasedHint } from './poller';
import type { Hint } from '../tasks/pending';

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

/** Claims from one batch run side by side (four storage calls each), bounded to spare the account. */
const CLAIM_PARALLELISM = 8;

async function mapLimit<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]);
    }
  });
  await Promise.all(lanes);
  return out;
}

/** Tries each leased hint; consumes used and stale hints, releases ones we failed on. */
export async function claimHints(svc: Services, leased: LeasedHint[], worker: Worker): Promise<Claim[]> {
  const seen = new Set<string>();
  const usable: (LeasedHint & { hint: Hint })[] = [];
  const garbage: LeasedHint[] = [];
  for (const l of leased) {
    if (!svc.pending.verify(l.hint)) {
      svc.log.warn('hint-invalid', { queue: l.queue.name, messageId: l.message.messageId });
      garbage.push(l);
      continue;
    }
    const key = `${l.hint.taskId}/${l.hint.runId}`;
    if (seen.has(key)) garbage.push(l);
    else {
      seen.add(key);
      usable.push(l as LeasedHint & { hint: Hint });
    }
  }
  await Promise.all(garbage.map((l) => l.queue.delete(l.message.messageId, l.message.popReceipt)));
  let firstError: unknown;
  const results = await mapLimit(usable, CLAIM_PARALLELISM, async ({ hint, message, queue }): Promise<Claim | undefined> => {
    const done = () => queue.delete(message.messageId, message.popReceipt);
    try {
      const outcome = await claimRun(svc, hint.taskId, hint.runId, worker, hint.hintId);
      if (outcome.kind === 'claimed') {
        await done();
        return claimResponse(svc, outcome.task, outcome.run);
      }
      if (outcome.kind === 'task-not-found' && message.insertedOn && Date.now() - message.insertedOn.getTime() < YOUNG_HINT_AGE_MS) {
        await queue.release(message.messageId, message.popReceipt, YOUNG_HINT_RETRY_S);
      } else {
        await done();
      }
    } catch (err) {
      firstError ??= err;
      svc.log.error('claim-failed', { taskId: hint.taskId, runId: hint.runId, error: String((err as Error)?.message ?? err) });
      await queue.release(message.messageId, message.popReceipt, 0).catch(() => undefined);
    }
    return undefined;
  });
  const claims = results.filter((c): c is Claim => c !== undefined);
  if (claims.length === 0 && firstError) throw firstError;
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
