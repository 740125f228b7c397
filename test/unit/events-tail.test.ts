/**
 * The tail command's bindings and lines.
 */
import { tailBindings, eventLine } from '../../shared/events/tail';
import { EXCHANGE_PREFIX, EXCHANGES } from '../../shared/events/exchanges';
import { bindingMatches } from '../../shared/events/topic';

const completed = {
  id: 'T1.4',
  seq: 4,
  exchange: `${EXCHANGE_PREFIX}task-completed`,
  routingKey: 'primary.T1.0.wg.w1.prov.wt.sched.G1._',
  routes: ['route.index.a.b'],
  payload: { version: 1, status: { taskId: 'T1', state: 'completed' }, runId: 0, workerGroup: 'wg', workerId: 'w1' },
};

test('no options: every exchange, everything', () => {
  const b = tailBindings({});
  expect(b.map((x) => x.exchange)).toEqual(EXCHANGES.map((e) => EXCHANGE_PREFIX + e));
  expect(b.every((x) => x.routingKeyPattern === '#')).toBe(true);
});

test('selectors become patterns that match the right events only', () => {
  const match = (o: Parameters<typeof tailBindings>[0]) => tailBindings({ exchanges: ['task-completed'], ...o }).some((b) => bindingMatches(b, completed));
  expect(match({ taskGroupId: 'G1' })).toBe(true);
  expect(match({ taskGroupId: 'G2' })).toBe(false);
  expect(match({ taskQueueId: 'prov/wt' })).toBe(true);
  expect(match({ taskQueueId: 'prov/other' })).toBe(false);
  expect(match({ taskId: 'T1', taskGroupId: 'G1' })).toBe(true);
  expect(match({ route: 'index.#' })).toBe(true);
  expect(match({ route: 'notify.#' })).toBe(false);
  expect(tailBindings({ exchanges: ['task-failed'] }).some((b) => bindingMatches(b, completed))).toBe(false);
  // Group exchanges bind by their own key layout.
  expect(tailBindings({ exchanges: ['task-group-sealed'], taskGroupId: 'G1' })[0].routingKeyPattern).toBe('primary.G1.*.#');
  // A task-level selector leaves out the group exchanges (they would match every group).
  expect(tailBindings({ taskQueueId: 'prov/wt' }).map((b) => b.exchange)).not.toContain(`${EXCHANGE_PREFIX}task-group-sealed`);
});

test('bad options are refused', () => {
  expect(() => tailBindings({ exchanges: ['task-exploded'] })).toThrow(/unknown exchange/);
  expect(() => tailBindings({ route: 'a', pattern: 'b' })).toThrow(/one of/);
});

test('one line per event', () => {
  const line = eventLine(completed, new Date('2026-01-01T00:00:00.000Z'));
  expect(line).toBe('2026-01-01T00:00:00.000Z task-completed      T1/0 completed wg/w1  #4 T1.4');
});
