/**
 * The health check behind `__heartbeat__`: storage answers, and the reaper has finished a pass
 * recently (it stamps Indexes `reaper/last-run` at the end of each pass). One storage read.
 */
import type { Services } from '../services';

/** A probe must answer quickly: storage that has not answered by then counts as unreachable. */
export const STORAGE_PROBE_TIMEOUT_MS = 3000;

export interface Health {
  healthy: boolean;
  /** Why it is unhealthy (empty when healthy). */
  problems: string[];
  storage: 'ok' | 'unreachable';
  reaper: { lastRun?: string; ageS?: number; staleAfterS: number };
}

export async function checkHealth(svc: Services): Promise<Health> {
  const now = svc.now().getTime();
  const staleAfterS = svc.config.reaperStaleS;
  const h: Health = { healthy: true, problems: [], storage: 'ok', reaper: { staleAfterS } };
  let row: Record<string, unknown> | undefined;
  try {
    // Abort (with the SDK's retries) rather than leave a probe running past its answer.
    row = await svc.storage.table('Indexes').get('reaper', 'last-run', { abortSignal: AbortSignal.timeout(STORAGE_PROBE_TIMEOUT_MS) });
  } catch (err) {
    h.storage = 'unreachable';
    h.problems.push(`table storage is unreachable: ${String((err as Error)?.message ?? err).split('\n')[0]}`);
  }
  if (h.storage === 'ok') {
    if (row && typeof row.at === 'string') {
      const ageS = Math.round((now - Date.parse(row.at)) / 1000);
      h.reaper = { lastRun: row.at, ageS, staleAfterS };
      if (ageS > staleAfterS)
        h.problems.push(
          `the reaper last finished a pass ${ageS} s ago (more than ${staleAfterS} s): claim expiry, deadlines and dependency scheduling are not being processed`,
        );
    } else if (now - svc.startedAt.getTime() > staleAfterS * 1000) {
      h.problems.push(`the reaper has never finished a pass (more than ${staleAfterS} s since this instance started)`);
    }
  }
  h.healthy = h.problems.length === 0;
  return h;
}
