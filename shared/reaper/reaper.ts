/**
 * The reaper: drains the trigger queues whose messages have become visible, consumes the event
 * stream, and sweeps the expiry indexes. Its cost grows with the number of triggers that fire,
 * events published and records that expire, never with the number of stored tasks.
 *
 * Nine phases run one after another, so a pass makes its storage calls in a fixed order
 * (crash-safety tests rely on that to fail each call in turn):
 *   1. claim expiry      runs whose claim lapsed (`claim` triggers; most are rows of the expiry index, phase 6)
 *   2. deadlines         tasks past their deadline (`deadline` triggers; most are rows of the expiry index, phase 6)
 *   3. safety nets       resolutions whose dependents a crash left untold, and dependency tracking
 *                        that createTask of many dependencies left to finish (`resolved` triggers)
 *   4. event sweeps      fan-out messages and deliveries a crash interrupted (`events` triggers)
 *   5. event consumers   the index and hooks apply the system subscription's events
 *   6. expiry            the deadlines and claim expiries kept in the expiry index (their own
 *                        lane, first; a page's deadline rows record their tasks' expiry rows
 *                        first), then the records whose `expires` passed
 *   7. artifact expiry   artifacts and objects whose `expires` passed, from their own index rows
 *   8. scheduled hooks   hooks whose schedule came due are fired
 *   9. hint repair       pending runs whose hint is gone get a fresh one (every hintRepairEveryS)
 * Overlapping passes (two instances) are safe: a message is leased by one of them, and duplicate
 * triggers are re-checked against the task row by ETag-guarded writes.
 */
import type { Services } from '../services';
import { decodeMessage, MAX_DEQUEUE, QueueMessage, TriggerQueue } from '../storage/storage';
import type { TriggerResult } from '../lifecycle/resolve';
import { mapLimit } from '../limit';
import {
  handleDeadline,
  handleClaimExpired,
  handleResolved,
  handleEventSweep,
  eventSweepLane,
  EXPIRERS,
  expireTaskWithGroup,
  pairExpiryRows,
  carriedExpiry,
  recordCarriedExpiries,
} from './handlers';
import { expireArtifacts } from '../artifacts/expiry';
import { runAs } from '../ops/actor';
import { fireDueHooks } from '../hooks/schedule';
import { repairHiddenHints } from './hints';
import { EXPIRY_KIND_CLAIM, EXPIRY_KIND_DEADLINE } from '../tasks/triggers';
import type { ExpiryRow } from '../tasks/expiry';
import { consumeEvents } from './consumers';

/** Bound one pass so a timer invocation ends well inside the Functions timeout. */
export const MAX_BATCHES_PER_PASS = 20;
/** Expiry index rows handled per query page. */
const EXPIRY_PAGE = 100;
/** Expired records handled at once: each takes a handful of sequential storage calls. */
const EXPIRY_CONCURRENCY = 16;
/** A failed handler's message comes back at the next pass, then backs off to the lease. */
const FIRST_RETRY_S = 0;

export interface ReaperStats {
  deadline: number;
  claim: number;
  resolved: number;
  /** Event sweeps: deliveries a crash interrupted (shared/events). */
  events: number;
  /** Events applied by the index and hooks consumers (shared/reaper/consumers.ts). */
  consumed?: number;
  expired: number;
  /** Pending runs given a fresh hint because theirs was lost or hidden (shared/reaper/hints.ts). */
  rehinted: number;
  deferred: number;
  failed: number;
}

/** Retry delay after the n-th failed delivery: 0, 4, 8, 16… seconds, capped by the lease. */
function retryDelayS(dequeueCount: number, leaseS: number): number {
  return dequeueCount <= 1 ? FIRST_RETRY_S : Math.min(leaseS, 2 ** dequeueCount);
}

/**
 * Drains a trigger queue's visible messages, a batch at a time, in parallel; messages of one
 * `lane` (e.g. one task's event deliveries) one after another, by rank.
 */
async function drain<T>(
  svc: Services,
  queue: TriggerQueue,
  handle: (svc: Services, body: T) => Promise<TriggerResult>,
  stats: ReaperStats,
  lane?: (body: T) => { key: string; rank: number } | undefined,
): Promise<void> {
  const q = svc.storage.trigger(queue);
  const leaseS = svc.tuning.triggerLeaseS;
  for (let batch = 0; batch < MAX_BATCHES_PER_PASS; batch++) {
    const msgs: QueueMessage[] = await q.receive(MAX_DEQUEUE, leaseS);
    if (msgs.length === 0) return;
    const lanes = new Map<string, { rank: number; run: () => Promise<void> }[]>();
    const each = msgs.map((m) => {
      const body = decodeMessage<T>(m);
      const run = async () => {
        try {
          const result = body ? await handle(svc, body) : undefined;
          if (result && result.retryAfterS > 0) {
            // Not due yet by our clock: show it again when it is.
            if (result.body === undefined) await q.release(m.messageId, m.popReceipt, result.retryAfterS);
            else await q.rearm(m.messageId, m.popReceipt, result.body, result.retryAfterS);
            stats.deferred++;
            return;
          }
          // Deleted last: a crash before this line re-delivers the message and the handler redoes its work.
          await q.delete(m.messageId, m.popReceipt);
          stats[queue]++;
        } catch (err) {
          stats.failed++;
          svc.log.error('reaper-handler-failed', { queue, message: body as unknown as Record<string, unknown>, error: String((err as Error)?.message ?? err) });
          await q.release(m.messageId, m.popReceipt, retryDelayS(m.dequeueCount, leaseS)).catch(() => undefined);
        }
      };
      const l = body && lane?.(body);
      if (!l) return run;
      lanes.set(l.key, [...(lanes.get(l.key) ?? []), { rank: l.rank, run }]);
      return undefined;
    });
    const inLanes = [...lanes.values()].map(async (runs) => {
      for (const r of runs.sort((a, b) => a.rank - b.rank)) await r.run();
    });
    await Promise.all([...each.map((run) => run?.()), ...inLanes]);
    if (msgs.length < MAX_DEQUEUE) return;
  }
}

/** The event sweeps alone: fan-out messages and deliveries a crash interrupted (the bench settles events with it). */
export async function drainEventSweeps(svc: Services): Promise<number> {
  const stats: ReaperStats = { deadline: 0, claim: 0, resolved: 0, events: 0, expired: 0, rehinted: 0, deferred: 0, failed: 0 };
  await drain(svc, 'events', handleEventSweep, stats, eventSweepLane);
  return stats.events;
}

/**
 * Acts on the expiry index: the triggers kept there (deadlines, claim expiries) first, with a
 * budget of their own, so a backlog of expiries never holds a lapsed claim up; then the records
 * whose `expires` has passed. One lane after the other: a task resolved while its expiry deletes
 * its rows would leave the resolution's history row behind.
 */
async function sweepExpired(svc: Services, stats: ReaperStats): Promise<void> {
  await sweepLane(svc, stats, (now, limit) => svc.expiry.dueTriggers(now, limit));
  await sweepLane(svc, stats, (now, limit) => svc.expiry.due(now, limit));
}

async function sweepLane(svc: Services, stats: ReaperStats, due: (now: Date, limit: number) => Promise<ExpiryRow[]>): Promise<void> {
  for (let batch = 0; batch < MAX_BATCHES_PER_PASS; batch++) {
    const rows = await due(svc.now(), EXPIRY_PAGE);
    const held = await recordCarried(svc, rows, stats);
    let stuck = held.size;
    const done: typeof rows = [];
    await mapLimit(pairExpiryRows(rows), EXPIRY_CONCURRENCY, async ([row, group]) => {
      const expire = EXPIRERS[row.kind];
      if (!expire) {
        stuck++;
        svc.log.warn('expiry-kind-unknown', { kind: row.kind, id: row.id });
        return;
      }
      try {
        if (group) await expireTaskWithGroup(svc, row, group);
        else await expire(svc, row);
        if (!held.has(row)) done.push(row, ...(group ? [group] : []));
      } catch (err) {
        stuck++;
        stats.failed++;
        svc.log.error('expiry-failed', { kind: row.kind, id: row.id, error: String((err as Error)?.message ?? err) });
      }
    });
    // Last, and together (one transaction per day): a crash before this redoes the idempotent deletes.
    try {
      await svc.expiry.removeAll(done);
      const deadlines = done.filter((r) => r.kind === EXPIRY_KIND_DEADLINE).length;
      const claims = done.filter((r) => r.kind === EXPIRY_KIND_CLAIM).length;
      stats.deadline += deadlines;
      stats.claim += claims;
      stats.expired += done.length - deadlines - claims;
    } catch (err) {
      stats.failed++;
      svc.log.error('expiry-rows-remove-failed', { rows: done.length, error: String((err as Error)?.message ?? err) });
      return; // they come back first next pass, and their deletes are redone
    }
    // Rows we could not remove would come back first; leave them for the next pass.
    if (stuck || rows.length < EXPIRY_PAGE) return;
  }
}

/**
 * First of a page: the task expiries its deadline rows carry (handlers.ts `recordCarriedExpiries`).
 * If they could not be stored, those rows are still handled (the deadline is acted on) but not
 * deleted: the returned rows come back next pass.
 */
async function recordCarried(svc: Services, rows: ExpiryRow[], stats: ReaperStats): Promise<Set<ExpiryRow>> {
  try {
    await recordCarriedExpiries(svc, rows);
    return new Set();
  } catch (err) {
    const held = rows.filter((r) => carriedExpiry(r));
    stats.failed++;
    svc.log.error('carried-expiries-failed', { rows: held.length, error: String((err as Error)?.message ?? err) });
    return new Set(held);
  }
}

/**
 * One pass. Each run it resolves or retries is logged as its own `task-transition` event (actor
 * `reaper`, see shared/lifecycle/planner.ts); the pass line adds the totals.
 */
export async function runReaper(svc: Services): Promise<ReaperStats> {
  const stats: ReaperStats = { deadline: 0, claim: 0, resolved: 0, events: 0, consumed: 0, expired: 0, rehinted: 0, deferred: 0, failed: 0 };
  const started = Date.now();
  const actor = { actor: 'reaper', transitions: 0 };
  await runAs(actor, async () => {
    await drain(svc, 'claim', handleClaimExpired, stats);
    await drain(svc, 'deadline', handleDeadline, stats);
    await drain(svc, 'resolved', handleResolved, stats);
    await drain(svc, 'events', handleEventSweep, stats, eventSweepLane);
    const consumer = await consumeEvents(svc, retryDelayS);
    stats.consumed = consumer.consumed;
    stats.failed += consumer.failed;
    await sweepExpired(svc, stats);
    await expireArtifacts(svc);
    await fireDueHooks(svc).catch((err) => {
      stats.failed++;
      svc.log.error('hook-schedule-failed', { error: String((err as Error)?.message ?? err) });
    });
    stats.rehinted = await repairHiddenHints(svc).catch((err) => {
      stats.failed++;
      svc.log.error('hint-repair-failed', { error: String((err as Error)?.message ?? err) });
      return 0;
    });
  });
  // Health (shared/ops/health.ts) reads this stamp to tell whether the reaper runs.
  await svc.storage
    .table('Indexes')
    .upsert({ partitionKey: 'reaper', rowKey: 'last-run', at: svc.now().toJSON() })
    .catch(() => undefined);
  svc.log.info('reaper-pass', { ...stats, transitions: actor.transitions, ms: Date.now() - started });
  return stats;
}
