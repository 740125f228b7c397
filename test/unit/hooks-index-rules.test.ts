/**
 * The pure rules of hooks and the index: next fire dates, entry preference, event task ids. No
 * storage (definition checks, which run in the sandbox: test/local/hook-definitions.test.ts).
 */
import { nextDate } from '../../shared/hooks/hooks';
import { eventTaskId, eventTime } from '../../shared/hooks/bindings';
import { unionBindings } from '../../shared/events/subscriptions';
import { prefers, namespaceExpiry } from '../../shared/index/index';
import { SLUGID } from '../../shared/api/schemas';
import type { HookDefinition } from '../../shared/hooks/store';

const def = (over: Partial<HookDefinition> = {}): HookDefinition => ({
  hookGroupId: 'g',
  hookId: 'h',
  metadata: { name: 'n', description: 'd', owner: 'o', emailOnError: true },
  schedule: [],
  task: {},
  triggerSchema: { type: 'object' },
  bindings: [],
  ...over,
});

test('the next fire is the earliest of every pattern, in UTC, strictly after the reference', () => {
  const at = new Date('2026-03-01T10:30:00.000Z');
  expect(nextDate(['0 12 * * *', '45 10 * * *'], at)?.toJSON()).toBe('2026-03-01T10:45:00.000Z');
  expect(nextDate(['*/15 * * * * *'], new Date('2026-03-01T10:30:15.000Z'))?.toJSON()).toBe('2026-03-01T10:30:30.000Z');
  expect(nextDate([], at)).toBeUndefined();
});

test("schedules read as Taskcluster's cron-parser reads them: day OR day-of-week, `5/15` from 5, names", () => {
  // 2026-03-01 is a Sunday: '1,15 of the month or Mondays' fires on the 1st, then Monday the 2nd.
  const sunday = new Date('2026-02-28T12:00:00.000Z');
  expect(nextDate(['0 0 0 1,15 * 1'], sunday)?.toJSON()).toBe('2026-03-01T00:00:00.000Z');
  expect(nextDate(['0 0 0 1,15 * 1'], new Date('2026-03-01T00:00:00.000Z'))?.toJSON()).toBe('2026-03-02T00:00:00.000Z');
  expect(nextDate(['5/15 * * * * *'], new Date('2026-03-01T10:30:21.000Z'))?.toJSON()).toBe('2026-03-01T10:30:35.000Z');
  expect(nextDate(['0 0 12 * Mar MON-FRI'], sunday)?.toJSON()).toBe('2026-03-02T12:00:00.000Z');
});

test('a higher rank wins; an equal rank wins unless it is older', () => {
  expect(prefers({ rank: 2, order: '2026-01-01' }, { rank: 1, order: '2027-01-01' })).toBe(true);
  expect(prefers({ rank: 1, order: '2027-01-01' }, { rank: 2, order: '2026-01-01' })).toBe(false);
  expect(prefers({ rank: 1, order: '2026-01-02' }, { rank: 1, order: '2026-01-01' })).toBe(true);
  expect(prefers({ rank: 1, order: '2026-01-01' }, { rank: 1, order: '2026-01-01' })).toBe(true);
  expect(prefers({ rank: 1, order: '2025-12-31' }, { rank: 1, order: '2026-01-01' })).toBe(false);
});

test('namespaces expire at the end of the day after their entry', () => {
  expect(namespaceExpiry('2026-05-06T13:14:15.000Z')).toBe('2026-05-07T00:00:00.000Z');
});

test('an event picks the same valid taskId every time, different per hook and event', () => {
  const a = eventTaskId(def(), 'evt-1');
  expect(a).toMatch(new RegExp(SLUGID));
  expect(eventTaskId(def(), 'evt-1')).toBe(a);
  expect(eventTaskId(def(), 'evt-2')).not.toBe(a);
  expect(eventTaskId(def({ hookId: 'other' }), 'evt-1')).not.toBe(a);
});

describe('event times and binding unions (the consumers)', () => {
  const run = {
    runId: 0,
    state: 'completed',
    scheduled: '2026-01-01T00:00:00.000Z',
    started: '2026-01-01T00:01:00.000Z',
    resolved: '2026-01-01T00:02:00.000Z',
  };
  const event = (exchange: string, payload: Record<string, unknown>) => ({
    id: 't.1',
    seq: 1,
    exchange: `exchange/taskcluster-queue/v1/${exchange}`,
    routingKey: 'primary.t',
    routes: [],
    payload,
  });
  test.each([
    ['task-completed', run.resolved],
    ['task-failed', run.resolved],
    ['task-running', run.started],
    ['artifact-created', run.started],
    ['task-pending', run.scheduled],
  ])('%s happened at its run time', (exchange, time) => {
    expect(eventTime(event(exchange, { status: { runs: [run] }, runId: 0 }))).toBe(time);
  });
  test('a sealed group at its sealing; task-defined has no time in its message', () => {
    expect(eventTime(event('task-group-sealed', { sealed: run.started }))).toBe(run.started);
    expect(eventTime(event('task-defined', { status: { runs: [] } }))).toBeUndefined();
  });
  test('unionBindings keeps order and drops duplicates', () => {
    const a = { exchange: 'x', routingKeyPattern: 'a.#' };
    const b = { exchange: 'x', routingKeyPattern: 'b.#' };
    expect(unionBindings([a], [b, { ...a }])).toEqual([a, b]);
    expect(unionBindings([], [a, a])).toEqual([a]);
  });
});
