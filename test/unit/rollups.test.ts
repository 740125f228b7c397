/**
 * Per-minute chart rollups (shared/ops/rollups.ts): what a task write adds to its minute, what a
 * flush writes (one upsert per partition and minute, rewritten whole), and how a chart reads
 * them back: pending and running from the current counts, wait percentiles, resolutions.
 */
import { MemoryStorage } from '../../shared/storage/memory';
import { ALL_PK, Rollups, histogramQuantile, readChart, rollupPk, transitionTally, WAIT_BOUNDS_MS } from '../../shared/ops/rollups';
import type { Run, TaskRecord } from '../../shared/tasks/model';
import { claimedEntry } from '../../shared/ops/history';
import type { Change } from '../../shared/ops/indexes';
import { created, moved } from '../helpers/index-changes';

const T0 = Date.parse('2026-01-01T10:00:00.000Z');

function task(taskQueueId: string, runs: Partial<Run>[]): TaskRecord {
  return {
    taskId: 'abc',
    definition: { taskQueueId },
    runs: runs.map((r, runId) => ({ runId, reasonCreated: 'scheduled', scheduled: new Date(T0).toJSON(), ...r })),
  } as unknown as TaskRecord;
}

/** What a write of `after` with `changes` tallies (its history entries as its plan derives them, shared/lifecycle/planner.ts). */
const tally = (changes: Change[], after: TaskRecord) => transitionTally(changes, after);

/** A task write as its plan notes it: created, or run 0 moved from state `from`. */
function observe(r: Rollups, after: TaskRecord, from?: Change['from']): void {
  const t = tally(from === undefined ? created(after) : [moved(after, 0, from)], after);
  if (t) r.add(after.definition.taskQueueId, t);
}

test('a transition counts the runs that entered and left pending and running, the wait, and resolutions', () => {
  const pending = task('p/w', [{ state: 'pending' }]);
  const running = task('p/w', [{ state: 'running', started: new Date(T0 + 3000).toJSON() }]);
  const failedRetried = task('p/w', [{ state: 'failed' }, { state: 'pending' }]);
  expect(tally(created(pending), pending)).toMatchObject({ pendingIn: 1, pendingOut: 0 });
  const started = tally([moved(running, 0, 'pending')], running)!;
  expect(started).toMatchObject({ pendingOut: 1, runningIn: 1, waitN: 1, waitSumMs: 3000 });
  expect(started.w[WAIT_BOUNDS_MS.indexOf(5000)]).toBe(1);
  expect(tally([moved(failedRetried, 0, 'running'), moved(failedRetried, 1, null)], failedRetried)).toMatchObject({ runningOut: 1, failed: 1, pendingIn: 1 });
  // A reclaim: a history entry, but no run changes state.
  expect(tally([claimedEntry(running, 0, 'reclaimed')], running)).toBeUndefined();
});

test('histogram quantiles are bucket bounds', () => {
  const w = new Array(WAIT_BOUNDS_MS.length + 1).fill(0);
  w[0] = 90; // ≤ 100 ms
  w[5] = 10; // ≤ 5 s
  expect(histogramQuantile(w, 0.5)).toBe(100);
  expect(histogramQuantile(w, 0.95)).toBe(5000);
  expect(
    histogramQuantile(
      w.map(() => 0),
      0.5,
    ),
  ).toBeNull();
});

test('a minute costs one upsert per task queue plus one for all; the chart reads it back', async () => {
  const storage = new MemoryStorage('roll');
  await storage.ensureAll();
  let now = T0 + 5_000;
  const r = new Rollups(storage, () => new Date(now));
  // 20 lifecycles in one minute on one task queue, 1 on another.
  for (let i = 0; i < 20; i++) {
    const p = task('p/a', [{ state: 'pending' }]);
    const c = task('p/a', [{ state: 'running', started: new Date(T0 + (i < 18 ? 200 : 20_000)).toJSON() }]);
    observe(r, p);
    observe(r, c, 'pending');
    observe(r, task('p/a', [{ state: i === 0 ? 'failed' : 'completed' }]), 'running');
  }
  observe(r, task('p/b', [{ state: 'pending' }]));
  const calls = () => Object.fromEntries(Object.entries(storage.meter.snapshot().byOp).filter(([k]) => k.startsWith('Rollups.') && k !== 'Rollups.create'));
  // The running minute is not written until it is over, unless asked.
  await r.flush();
  expect(calls()).toEqual({});
  await r.flush(true);
  // Three partitions; each first flush also looks for rows to prune (once an hour).
  expect(calls()).toEqual({ 'Rollups.upsert': 3, 'Rollups.query': 3 });
  now += 60_000;
  await r.flush();
  expect(calls()).toEqual({ 'Rollups.upsert': 6, 'Rollups.query': 3 });
  await r.flush();
  expect(calls()).toEqual({ 'Rollups.upsert': 6, 'Rollups.query': 3 });

  // Another instance's row of the same minute adds up.
  const other = new Rollups(storage, () => new Date(T0 + 10_000));
  observe(other, task('p/a', [{ state: 'pending' }]));
  await other.flush(true);

  const chart = await readChart(storage, 'p/a', new Date(now - 3600_000), new Date(now), { pending: 1, running: 0 });
  expect(chart).toHaveLength(61);
  const [minute, next] = chart.slice(-2);
  expect(minute).toMatchObject({ minute: new Date(T0).toJSON(), pending: 1, running: 0, completed: 19, failed: 1, exception: 0, started: 20 });
  expect(minute.waitP50Ms).toBe(250);
  expect(minute.waitP95Ms).toBe(20_000);
  expect(next).toMatchObject({ pending: 1, completed: 0, waitP50Ms: null });
  // Before that minute: 21 pending in, 20 out, so one fewer.
  expect(chart[chart.length - 3]).toMatchObject({ pending: 0, running: 0 });
  const all = await readChart(storage, undefined, new Date(now - 3600_000), new Date(now), { pending: 2, running: 0 });
  expect(all[all.length - 2]).toMatchObject({ completed: 19, pending: 2 });
  expect(rollupPk(undefined)).toBe(ALL_PK);
});

test('rows older than a day and an hour are pruned', async () => {
  const storage = new MemoryStorage('roll');
  await storage.ensureAll();
  let now = T0;
  const r = new Rollups(storage, () => new Date(now));
  observe(r, task('p/a', [{ state: 'pending' }]));
  await r.flush(true);
  now += 26 * 3600_000;
  observe(r, task('p/a', [{ state: 'pending' }]));
  await r.flush(true);
  const rows = await storage.table('Rollups').page({ partitionKey: rollupPk('p/a') }, 1000);
  expect(rows.items.map((e) => e.rowKey.split('~')[0])).toEqual([new Date(now).toJSON()]);
});
