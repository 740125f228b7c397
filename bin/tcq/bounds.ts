/**
 * The numbers and durations `tcq` takes on its command line, each a whole number within a named
 * bound: `1e12` or `999999d` is a typo to report (exit 2), not a request to send.
 */
import { UsageError } from './settings';

/** Most rows a listing prints: beyond this a terminal shows nothing useful; `tcq call` pages further. */
export const MAX_LIMIT = 10_000;
/** Furthest ahead a duration or time may reach: the queue's own bound on a subscription's expiry (a year). */
export const MAX_AHEAD_DAYS = 366;
const DAY_MS = 86_400_000;
const MAX_AHEAD_MS = MAX_AHEAD_DAYS * DAY_MS;
const DURATION = /^(\d+)\s*(s|m|h|d)$/;
const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: DAY_MS };

/** `raw` as a whole number from `min` to `max` (digits only: no `1e3`, `0x10` or `-1`). */
export function wholeNumber(flag: string, raw: string, min: number, max: number): number {
  const n = /^\d{1,16}$/.test(raw.trim()) ? Number(raw.trim()) : NaN;
  if (!(n >= min && n <= max)) throw new UsageError(`--${flag} must be a whole number from ${min} to ${max}, got '${raw}'`);
  return n;
}

/** `--until` as a date: an ISO time or a duration from now (30m, 2h, 7d) up to MAX_AHEAD_DAYS ahead, or `now`. */
export function untilDate(raw: string | undefined, now = new Date()): string {
  if (!raw) throw new UsageError('--until is required: a duration (30m, 2h, 7d), an ISO time, or `now` to lift the quarantine');
  if (raw === 'now') return now.toJSON();
  const m = DURATION.exec(raw.trim());
  const t = m ? now.getTime() + Number(m[1]) * UNIT_MS[m[2]] : Date.parse(raw);
  if (Number.isNaN(t)) throw new UsageError(`--until must be a duration (30m, 2h, 7d), an ISO time or \`now\`, got '${raw}'`);
  if (t > now.getTime() + MAX_AHEAD_MS) throw new UsageError(`--until may be at most ${MAX_AHEAD_DAYS} days ahead, got '${raw}'`);
  return new Date(t).toJSON();
}

/** Furthest `tcq from-now` reaches: further is a typo, and Date arithmetic stays exact well within it. */
export const MAX_FROM_NOW_YEARS = 1000;
/**
 * Taskcluster's relative times (`1 year 2 days`, `3h`, `90 min`, `2 weeks`), as taskcluster-client's
 * fromNow and `taskcluster from-now` read them; `30m` is minutes too, as tcq's other durations take it.
 */
const TC_DURATION =
  /^\s*(?:(\d{1,6})\s*y(?:ears?|r)?)?\s*(?:(\d{1,6})\s*mo(?:nths?)?)?\s*(?:(\d{1,6})\s*w(?:eeks?|k)?)?\s*(?:(\d{1,6})\s*d(?:ays?)?)?\s*(?:(\d{1,6})\s*h(?:ours?|r)?)?\s*(?:(\d{1,9})\s*m(?:in(?:utes?)?)?)?\s*(?:(\d{1,9})\s*s(?:ec(?:onds?)?)?)?\s*$/;

/** `raw` (a Taskcluster relative time) added to `now`, at most `maxDays` ahead; `what` names it in errors. */
export function fromNow(what: string, raw: string, maxDays: number, now = new Date()): Date {
  const m = TC_DURATION.exec(raw);
  if (!m || !m.slice(1).some((x) => x !== undefined))
    throw new UsageError(`${what} must be a duration like 1d, 2 hours, 30 min or '1 year 2 weeks', got '${raw}'`);
  const [years, months, weeks, days, hours, minutes, seconds] = m.slice(1).map((x) => Number(x ?? 0));
  const t = new Date(now.getTime() + ((weeks * 7 + days) * 24 * 3600 + hours * 3600 + minutes * 60 + seconds) * 1000);
  t.setUTCFullYear(t.getUTCFullYear() + years, t.getUTCMonth() + months);
  if (!(t.getTime() <= now.getTime() + maxDays * DAY_MS)) throw new UsageError(`${what} may be at most ${maxDays} days ahead, got '${raw}'`);
  return t;
}
