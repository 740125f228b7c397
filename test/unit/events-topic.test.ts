/**
 * AMQP topic matching of subscription bindings, checked against the bindings taskcluster-client's
 * QueueEvents builds.
 */
import { topicMatches, bindingMatches, bindingProblem } from '../../shared/events/topic';
import { EXCHANGE_PREFIX, hookChangedEvent } from '../../shared/events/exchanges';

test.each([
  ['a.b.c', 'a.b.c', true],
  ['a.*.c', 'a.b.c', true],
  ['a.*.c', 'a.c', false],
  ['a.#', 'a', true],
  ['a.#', 'a.b.c', true],
  ['#', 'anything.at.all', true],
  ['#.c', 'a.b.c', true],
  ['#.c', 'a.b.d', false],
  ['a.#.c', 'a.c', true],
  ['a.#.c', 'a.x.y.c', true],
  ['a.*.#', 'a', false],
  ['*', 'a.b', false],
  ['primary.*.*.*.*.*.*.*.g1.#', 'primary.t.0._._.p.w.s.g1._', true],
  ['primary.*.*.*.*.*.*.*.g1.#', 'primary.t.0._._.p.w.s.g2._', false],
])('%s vs %s → %s', (pattern, key, expected) => {
  expect(topicMatches(pattern, key)).toBe(expected);
});

test('bindings from QueueEvents match primary keys and route CCs', async () => {
  const tc = (await import('taskcluster-client')).default;
  const qe = new tc.QueueEvents({ rootUrl: 'http://localhost:1' });
  const event = {
    exchange: `${EXCHANGE_PREFIX}task-completed`,
    routingKey: 'primary.T1.0.wg.w1.prov.wt.sched.G1._',
    routes: ['route.index.project.latest'],
  };
  expect(bindingMatches(qe.taskCompleted({ taskGroupId: 'G1' }), event)).toBe(true);
  expect(bindingMatches(qe.taskCompleted({ taskGroupId: 'G2' }), event)).toBe(false);
  expect(bindingMatches(qe.taskCompleted({ provisionerId: 'prov', workerType: 'wt' }), event)).toBe(true);
  expect(bindingMatches(qe.taskCompleted('route.index.project.*'), event)).toBe(true);
  expect(bindingMatches(qe.taskFailed({ taskGroupId: 'G1' }), event)).toBe(false);
  for (const b of [qe.taskDefined({}), qe.artifactCreated({ taskId: 'T1' }), qe.taskGroupSealed({ taskGroupId: 'G1' }), qe.taskGroupResolved({})]) {
    expect(bindingProblem(b)).toBeUndefined();
  }
});

test('bad bindings are named', () => {
  expect(bindingProblem({ exchange: 'exchange/taskcluster-queue/v1/task-exploded', routingKeyPattern: '#' })).toMatch(/unknown exchange/);
  expect(bindingProblem({ exchange: `${EXCHANGE_PREFIX}task-failed`, routingKeyPattern: 'a..b' })).toMatch(/empty word/);
  expect(bindingProblem({ exchange: `${EXCHANGE_PREFIX}task-failed`, routingKeyPattern: 'a.b*' })).toMatch(/whole words/);
  expect(bindingProblem({ exchange: `${EXCHANGE_PREFIX}task-failed`, routingKeyPattern: 'x'.repeat(300) })).toMatch(/longer/);
  expect(bindingProblem({ exchange: `${EXCHANGE_PREFIX}task-failed`, routingKeyPattern: '' })).toMatch(/non-empty/);
});

test("the hooks' exchanges are bindable; HooksEvents' default pattern matches their routing key", () => {
  const event = hookChangedEvent('hook-updated', 'g', 'a/b', 'call1');
  for (const exchange of ['hook-created', 'hook-updated', 'hook-deleted']) {
    expect(bindingProblem({ exchange: `exchange/taskcluster-hooks/v1/${exchange}`, routingKeyPattern: '#' })).toBeUndefined();
  }
  expect(bindingMatches({ exchange: 'exchange/taskcluster-hooks/v1/hook-updated', routingKeyPattern: '#' }, event)).toBe(true);
  expect(bindingMatches({ exchange: 'exchange/taskcluster-hooks/v1/hook-created', routingKeyPattern: '#' }, event)).toBe(false);
  expect(event).toEqual({
    id: 'g/a/b.hook-updated.call1',
    seq: 0,
    exchange: 'exchange/taskcluster-hooks/v1/hook-updated',
    routingKey: '_',
    routes: [],
    payload: { hookGroupId: 'g', hookId: 'a/b' },
  });
  expect(bindingProblem({ exchange: 'exchange/taskcluster-hooks/v1/hook-exploded', routingKeyPattern: '#' })).toMatch(/unknown exchange/);
});
