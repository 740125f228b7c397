/**
 * The reaper: drains the trigger queues whose messages have become visible. Its cost grows with
 * the number of triggers that fire, never with the number of stored tasks.
 */
import type { Services } from '../services';
import { decodeMessage, MAX_DEQUEUE, QueueMessage, TriggerQueue } from '../storage/storage';
import { handleDeadline, handleClaimExpired, handleResolved } from './handlers';
import { expireArtifacts } from '../artifacts/expiry';
import { runAs } from '../ops/actor';

/** A message being handled stays invisible this long; if we crash it comes back afterwards. */
export const TRIGGER_LEASE_S = 5 * 60;
/** Bound one pass so a timer invocation ends well inside the Functions timeout. */
export const MAX_BATCHES_PER_PASS = 20;

export interface ReaperStats {
  deadline: number;
  claim: number;
  resolved: number;
  failed: number;
}

async function drain<T>(svc: Services, queue: TriggerQueue, handle: (svc: Services, body: T) => Promise<void>, stats: ReaperStats): Promise<void> {
  const q = svc.storage.trigger(queue);
  for (let batch = 0; batch < MAX_BATCHES_PER_PASS; batch++) {
    const msgs: QueueMessage[] = await q.receive(MAX_DEQUEUE, TRIGGER_LEASE_S);
    if (msgs.length === 0) return;
    await Promise.all(
      msgs.map(async (m) => {
        const body = decodeMessage<T>(m);
        try {
          if (body) await handle(svc, body);
          await q.delete(m.messageId, m.popReceipt);
          (stats[queue] as number)++;
        } catch (err) {
          stats.failed++;
          svc.log.error('reaper-handler-failed', { queue, message: body as unknown as Record<string, unknown>, error: String((err as Error)?.message ?? err) });
        }
      }),
    );
    if (msgs.length < MAX_DEQUEUE) return;
  }
}

/**
 * One pass. Each run it resolves or retries is logged as its own `task-transition` event (actor
 * `reaper`, see shared/ops/observer.ts); the pass line adds the totals.
 */
export async function runReaper(svc: Services): Promise<ReaperStats> {
  const stats: ReaperStats = { deadline: 0, claim: 0, resolved: 0, failed: 0 };
  const started = Date.now();
  const actor = { actor: 'reaper', transitions: 0 };
  await runAs(actor, () =>
    Promise.all([
      drain(svc, 'claim', handleClaimExpired, stats),
      drain(svc, 'deadline', handleDeadline, stats),
      drain(svc, 'resolved', handleResolved, stats),
      expireArtifacts(svc),
    ]),
  );
  await svc.storage.table('Indexes').upsert({ partitionKey: 'reaper', rowKey: 'last-run', at: new Date().toJSON() }).catch(() => undefined);
  svc.log.info('reaper-pass', { ...stats, transitions: actor.transitions, ms: Date.now() - started });
  return stats;
}
