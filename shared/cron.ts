/**
 * NCRONTAB schedules as Azure Functions timers read them, through the croner library:
 * `{second} {minute} {hour} {day} {month} {day-of-week}` (or five fields without seconds), with
 * ranges, lists, steps (`*\/10`, `5/15`, `1-30/5`) and month and day names (Jan, Mon-Fri), in UTC.
 * Croner's extensions that NCRONTAB lacks (L, W, #, ?, @nicknames, a bare `/n`) are refused so a
 * schedule that passes here also passes the Functions host.
 */
import { Cron, CronOptions } from 'croner';

/**
 * NCRONTAB semantics in croner's terms: Azure evaluates schedules in UTC (unless WEBSITE_TIME_ZONE
 * is set); a day must match both the day and the day-of-week field (NCrontab ANDs them); `5/15`
 * means "from 5, every 15".
 */
const NCRONTAB: CronOptions = { timezone: 'UTC', mode: '5-or-6-parts', domAndDow: true, sloppyRanges: true };

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const DAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];

/** Why `expr` is not an NCRONTAB schedule Azure accepts, or undefined if it is one. */
function ncrontabProblem(expr: string): string | undefined {
  const fields = expr.trim().split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) return `expected 6 fields (second minute hour day month day-of-week), got ${fields.length}`;
  const monthField = fields.length - 2;
  for (const [i, field] of fields.entries()) {
    if (!/^[0-9A-Za-z*,/-]+$/.test(field)) return `field '${field}' may hold only digits, names, '*', ',', '-' and '/'`;
    if (/(^|[,-])\//.test(field)) return `field '${field}' has a step without a start`;
    const names = i === monthField ? MONTHS : i === monthField + 1 ? DAYS : [];
    const bad = (field.match(/[A-Za-z]+/g) ?? []).find((w) => !names.includes(w.toLowerCase()));
    if (bad) return `'${bad}' in field '${field}' is not ${names.length ? `a ${names === MONTHS ? 'month' : 'day'} name` : 'allowed there'}`;
  }
  return undefined;
}

/** A parsed schedule; `nextRun(after)` is the first time strictly after `after` that it fires. */
export function parseSchedule(expr: string): Cron {
  const problem = ncrontabProblem(expr);
  if (problem) throw new Error(`'${expr}' is not an NCRONTAB schedule: ${problem}`);
  let cron: Cron;
  try {
    cron = new Cron(expr, { ...NCRONTAB, paused: true });
  } catch (err) {
    throw new Error(`'${expr}' is not an NCRONTAB schedule: ${(err as Error).message.replace(/^CronPattern: /, '')}`, { cause: err });
  }
  if (!cron.nextRun()) throw new Error(`'${expr}' is not an NCRONTAB schedule: it never fires`);
  return cron;
}

/** Calls `fn` at every time the schedule gives until `stop()`. */
export function runOnSchedule(expr: string, fn: () => void): { stop(): void } {
  parseSchedule(expr);
  const job = new Cron(expr, { ...NCRONTAB, catch: true }, fn);
  return { stop: () => job.stop() };
}

/** A timer schedule with `%SETTING%` resolved from the app settings, as the Functions host does. */
export function resolveSchedule(schedule: string, settings: Record<string, string | undefined>): string {
  const m = /^%(.+)%$/.exec(schedule.trim());
  if (!m) return schedule;
  const value = settings[m[1]];
  if (!value) throw new Error(`timer schedule ${schedule} names setting ${m[1]}, which is not set`);
  return value;
}
