/**
 * NCRONTAB schedules as Azure Functions reads them (shared/cron.ts over croner), the setting that
 * carries the reaper's schedule (the local host running a timer at those times: test/local/cron-host.test.ts).
 */
import { parseSchedule, resolveSchedule } from '../../shared/cron';
import { loadConfig } from '../../shared/config';

const FROM = new Date('2026-11-21T12:00:03Z'); // a Saturday
const next = (expr: string, n = 3) =>
  parseSchedule(expr)
    .nextRuns(n, FROM)
    .map((d) => d.toISOString());

test.each([
  ['*/10 * * * * *', ['2026-11-21T12:00:10.000Z', '2026-11-21T12:00:20.000Z', '2026-11-21T12:00:30.000Z']],
  ['0 */5 * * * *', ['2026-11-21T12:05:00.000Z', '2026-11-21T12:10:00.000Z', '2026-11-21T12:15:00.000Z']],
  ['5/20 * * * * *', ['2026-11-21T12:00:05.000Z', '2026-11-21T12:00:25.000Z', '2026-11-21T12:00:45.000Z']],
  ['0 30 9 * * 1-5', ['2026-11-23T09:30:00.000Z', '2026-11-24T09:30:00.000Z', '2026-11-25T09:30:00.000Z']],
  ['0 0 9,17 * * Mon-Fri', ['2026-11-23T09:00:00.000Z', '2026-11-23T17:00:00.000Z', '2026-11-24T09:00:00.000Z']],
  ['0 0 0 1 Jan,Jul *', ['2027-01-01T00:00:00.000Z', '2027-07-01T00:00:00.000Z', '2028-01-01T00:00:00.000Z']],
  ['0 0 1-30/10 * * *', ['2026-11-21T21:00:00.000Z', '2026-11-22T01:00:00.000Z', '2026-11-22T11:00:00.000Z']],
  // NCrontab requires both day fields to match: the 1st of a month that is a Monday.
  ['0 0 0 1 * Mon', ['2027-02-01T00:00:00.000Z', '2027-03-01T00:00:00.000Z', '2027-11-01T00:00:00.000Z']],
  // Five fields: minutes first, at second 0 (the Functions host accepts these too).
  ['*/15 * * * *', ['2026-11-21T12:15:00.000Z', '2026-11-21T12:30:00.000Z', '2026-11-21T12:45:00.000Z']],
])('%s fires at the times it names, in UTC', (expr, want) => {
  expect(next(expr)).toEqual(want);
});

test.each([
  ['', /expected 6 fields/],
  ['* * * *', /expected 6 fields .* got 4/],
  ['* * * * * * *', /got 7/],
  ['60 * * * * *', /second: 60/],
  ['*/0 * * * * *', /stepping: 0/],
  ['0 0 25 * * *', /hour: 25/],
  ['0 0 0 L * *', /'L' .* not allowed there/],
  ['0 0 0 * * 5#2', /may hold only/],
  ['0 0 0 ? * *', /may hold only/],
  ['@daily', /expected 6 fields/],
  ['/10 * * * * *', /step without a start/],
  ['0 0 0 * * Sunday', /'Sunday' .* not a day name/],
  ['0 0 0 * Mon *', /'Mon' .* not a month name/],
  ['0 0 0 31 2 *', /never fires/],
])('%j is refused: %s', (expr, why) => {
  expect(() => parseSchedule(expr)).toThrow(why);
});

const ENV = {
  QUEUE_STORAGE_CONNECTION: 'UseDevelopmentStorage=true',
  QUEUE_PUBLIC_URL: 'http://localhost:1',
  QUEUE_ROOT_ACCESS_TOKEN: 'x'.repeat(22),
  QUEUE_TOKEN_ENCRYPTION_KEY: Buffer.alloc(32).toString('base64'),
};

test('an invalid QUEUE_REAPER_SCHEDULE stops start-up with an error naming the setting', () => {
  expect(() => loadConfig({ ...ENV, QUEUE_REAPER_SCHEDULE: '*/10 * * * *  * *' })).toThrow(/^setting QUEUE_REAPER_SCHEDULE: '.*' is not an NCRONTAB schedule/);
  expect(() => loadConfig({ ...ENV, QUEUE_REAPER_SCHEDULE: 'every 10 seconds' })).toThrow(/QUEUE_REAPER_SCHEDULE/);
  expect(loadConfig({ ...ENV, QUEUE_REAPER_SCHEDULE: '0 */2 * * * *' }).reaperSchedule).toBe('0 */2 * * * *');
  expect(loadConfig(ENV).reaperSchedule).toBe('*/10 * * * * *');
});

test('%SETTING% schedules resolve from the app settings; an unset one is an error', () => {
  expect(resolveSchedule('%S%', { S: '0 * * * * *' })).toBe('0 * * * * *');
  expect(resolveSchedule('*/5 * * * * *', {})).toBe('*/5 * * * * *');
  expect(() => resolveSchedule('%S%', {})).toThrow(/names setting S, which is not set/);
});
