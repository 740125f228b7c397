/**
 * Scheduled fires, run by a reaper phase. Each due tick is claimed with an ETag-guarded write of
 * the hook row that fixes the fire's taskId and time BEFORE the task is created, so:
 *   - two instances never fire a tick twice (the loser of the write skips it);
 *   - a fire interrupted after any storage call is retried, after the claim's lease, as the
 *     identical task, which the idempotent createTask absorbs; the lease is short (seconds, as a
 *     pending hint's) and renewed while the fire runs, so a crashed instance's tick is taken over
 *     within the lease plus one reaper interval while a slow fire keeps its claim;
 *   - missed ticks during downtime collapse into one (the next date is computed from now).
 */
import * as slugid from 'slugid';
import { ApiError } from '../errors';
import { CREATED_DRIFT_MS } from '../lifecycle/create';
import { FireRecord, HookRecord, HookStore, PendingFire } from './store';
import { HookDeps, fireHook, lastFireOf, nextDate, recordFire } from './hooks';

/** Due hooks handled per pass; the rest wait for the next pass. */
export const MAX_DUE_PER_PASS = 100;
/** A tick older than this is fired as of now: createTask only accepts `created` within 15 minutes. */
export const LATE_FIRE_MS = CREATED_DRIFT_MS - 5 * 60 * 1000;

/** The claim's lease is renewed this many times per lease while the fire runs. */
const RENEWALS_PER_LEASE = 3;

export interface ScheduleStats {
  fired: number;
  skipped: number;
  errors: number;
}

export async function fireDueHooks(d: HookDeps): Promise<ScheduleStats> {
  const stats: ScheduleStats = { fired: 0, skipped: 0, errors: 0 };
  const due = await new HookStore(d.storage).due(d.now(), MAX_DUE_PER_PASS);
  // One after another: a pass's storage calls come in a fixed order (the crash tests rely on it).
  for (const h of due) {
    try {
      await fireScheduled(d, h, stats);
    } catch (err) {
      // Storage trouble: this hook's claim lease runs out and a later pass retries it; the others go on.
      stats.errors++;
      d.log.error('hook-fire-failed', { hookGroupId: h.definition.hookGroupId, hookId: h.definition.hookId, error: String((err as Error)?.message ?? err) });
    }
  }
  return stats;
}

function unresolved(state: string | undefined): boolean {
  return state === undefined || state === 'pending' || state === 'running' || state === 'unscheduled';
}

/** Claims, fires and advances one hook's due tick. */
export async function fireScheduled(d: HookDeps, h: HookRecord, stats: ScheduleStats = { fired: 0, skipped: 0, errors: 0 }): Promise<void> {
  const store = new HookStore(d.storage);
  const now = d.now();
  if (!h.nextScheduledDate || new Date(h.nextScheduledDate) > now) return;

  // 1. Claim the tick (or take over a claim whose instance crashed).
  const prior = h.pendingFire;
  let claim: PendingFire;
  const leaseUntil = new Date(now.getTime() + d.tuning.hookLeaseS * 1000).toJSON();
  if (prior && prior.scheduled === h.nextScheduledDate) {
    if (new Date(prior.leaseUntil) > now) return; // another instance is firing it
    claim = { ...prior, leaseUntil, claimId: slugid.nice() };
  } else {
    const late = now.getTime() - new Date(h.nextScheduledDate).getTime() > LATE_FIRE_MS;
    claim = { taskId: slugid.nice(), scheduled: h.nextScheduledDate, time: late ? now.toJSON() : h.nextScheduledDate, leaseUntil, claimId: slugid.nice() };
  }
  let claimed: HookRecord = { ...h, pendingFire: claim };
  if (!(await store.replace(claimed))) {
    // The claim's retry may have met the claim itself (its answer was lost): then it is ours.
    const stored = await store.get(h.definition.hookGroupId, h.definition.hookId);
    if (!stored || stored.pendingFire?.claimId !== claim.claimId) return; // someone else claimed or changed it: theirs to fire
    claimed = stored;
  }

  const renewal = renewLease(d, store, claimed);
  try {
    await fireClaimed(d, h, claimed, claim, !!prior, stats);
  } finally {
    await renewal.stop();
  }
}

/**
 * Keeps the claim's lease ahead of the clock while the fire runs (the record's ETag moves along
 * with each renewal, so the fire's own later write does not conflict with it). A renewal that
 * conflicts means the hook changed: the advance step re-reads it anyway, so renewing stops.
 */
export function renewLease(d: HookDeps, store: HookStore, claimed: HookRecord): { stop(): Promise<void> } {
  let inFlight: Promise<void> | undefined;
  let stopped = false;
  const timer = setInterval(
    () => {
      if (inFlight || stopped || !claimed.pendingFire) return;
      const leaseUntil = new Date(d.now().getTime() + d.tuning.hookLeaseS * 1000).toJSON();
      const before = claimed.pendingFire;
      claimed.pendingFire = { ...before, leaseUntil };
      const giveUp = () => {
        claimed.pendingFire = before;
        stopped = true;
      };
      inFlight = store
        .replace(claimed)
        .then((ok) => (ok ? undefined : giveUp()), giveUp)
        .finally(() => (inFlight = undefined));
    },
    (d.tuning.hookLeaseS * 1000) / RENEWALS_PER_LEASE,
  );
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await inFlight;
    },
  };
}

async function fireClaimed(d: HookDeps, h: HookRecord, claimed: HookRecord, claim: PendingFire, prior: boolean, stats: ScheduleStats): Promise<void> {
  const store = new HookStore(d.storage);
  const { hookGroupId, hookId } = h.definition;
  const now = d.now();
  // 2. Fire, unless the overlap rule says the previous fire's task is still running.
  let created = false;
  let error: ApiError | undefined;
  let skip = false;
  if (h.definition.overlap === 'skip' && h.lastTaskId && h.lastTaskId !== claim.taskId) {
    const last = await d.tasks.load(h.lastTaskId);
    skip = !!last && unresolved(last.runs[last.runs.length - 1]?.state);
  }
  if (skip) {
    stats.skipped++;
    d.log.info('hook-fire-skipped', { hookGroupId, hookId, previousTaskId: h.lastTaskId, scheduled: claim.scheduled });
  } else {
    try {
      // A taken-over claim may have created its task already, long enough ago for createTask to refuse `created` now.
      const exists = prior ? await d.tasks.load(claim.taskId) : undefined;
      created = !!exists || !!(await fireHook(d, h.definition, { firedBy: 'schedule' }, claim.taskId, new Date(claim.time)));
    } catch (err) {
      if (!(err instanceof ApiError)) throw err; // storage trouble: the claim's lease expires and the fire is retried
      error = err;
    }
    if (created || error) {
      const fire: FireRecord = {
        hookGroupId,
        hookId,
        firedBy: 'schedule',
        taskId: claim.taskId,
        taskCreateTime: claim.time,
        result: error ? 'error' : 'success',
        error: error?.message ?? '',
      };
      await recordFire(d, fire);
      if (error) stats.errors++;
      else stats.fired++;
    }
  }

  // 3. Advance to the next tick (after now: missed ticks collapse into this one fire); a hook
  // updated meanwhile (e.g. updateHook) is advanced as it is now.
  await store.modify(
    hookGroupId,
    hookId,
    (cur) =>
      !cur || cur.pendingFire?.taskId !== claim.taskId // removed, or already advanced
        ? undefined
        : {
            ...cur,
            pendingFire: undefined,
            nextScheduledDate: nextDate(cur.definition.schedule, now)?.toJSON() ?? '',
            ...(created || error ? { lastFire: lastFireOf({ taskId: claim.taskId, time: claim.time, error }) } : {}),
            ...(created ? { lastTaskId: claim.taskId } : {}),
          },
    claimed,
  );
}
