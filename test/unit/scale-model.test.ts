/**
 * The bench's scale model (bench/scale.ts) on hand-made counts: which partition, queue or account
 * reaches its Azure limit first, with one account and with several.
 */
import { scaleModel, scaleRows } from '../../bench/scale';
import { TRIGGER_SHARDS } from '../../shared/storage/port';
import { triggerShardNames, triggerShardOf } from '../../shared/storage/trigger-shards';

test('per-task partitions are ignored; trigger queues and task data spread over accounts; global tables stay on the first', () => {
  const partitions = new Map<string, { calls: number; entities: number }>();
  for (let i = 0; i < 10; i++) partitions.set(`table Tasks task${i}`, { calls: 5, entities: 6 });
  partitions.set('table Indexes q~bench!2fcost', { calls: 10, entities: 50 });
  partitions.set('table Expiry 2026-11-23', { calls: 10, entities: 10 });
  partitions.set('queue p-claim', { calls: 20, entities: 20 });
  partitions.set(`queue p-${'a'.repeat(26)}-1`, { calls: 30, entities: 30 });
  const m = scaleModel({ lifecycles: 10, totalTx: 120, partitions, taskQueueMarks: ['bench!2fcost', `p-${'a'.repeat(26)}`], prefix: 'p', accounts: 4 });

  expect(m.txPerLifecycle).toBe(12);
  expect(m.globalTxPerLifecycle).toBe(2);
  expect(m.hotspots.map((h) => [h.where, h.scope, h.limitOne, h.limitMany])).toEqual([
    ['Indexes q~bench!2fcost', 'task-queue', 400, 400],
    [`p-${'a'.repeat(26)}-1`, 'task-queue', 666, 666],
    ['p-claim', 'spread', 1000, 4000],
    ['Expiry 2026-11-23', 'deployment', 2000, 2000],
  ]);
  // One account: a trigger queue in one storage queue is first (2 messages per lifecycle); four: the shared Expiry partition.
  expect(m.first.one).toMatchObject({ perSecond: 1000 });
  expect(m.first.one.what).toMatch(/p-claim/);
  expect(m.first.many).toMatchObject({ perSecond: 2000 });
  expect(m.first.many.what).toMatch(/Expiry/);
});

/**
 * The bench's measured mix (12.2 tx per lifecycle, 2.26 claim-trigger messages per lifecycle, as
 * measured before trigger queues were sharded), with the trigger messages spread over shards as the
 * trigger queue places them, and every other call in per-task partitions: the limit is the account's own.
 */
function measuredMix(accounts: number) {
  const lifecycles = 1000;
  const partitions = new Map<string, { calls: number; entities: number }>();
  const names = triggerShardNames('p', 'claim');
  const perShard = new Array<number>(names.length).fill(0);
  for (let i = 0; i < 2260; i++) perShard[triggerShardOf({ taskId: `task${i % lifecycles}`, runId: i })]++;
  names.forEach((n, i) => partitions.set(`queue ${n}`, { calls: perShard[i], entities: perShard[i] }));
  for (let i = 0; i < lifecycles; i++) partitions.set(`table Tasks task${i}`, { calls: 9.94, entities: 9.94 });
  return scaleModel({ lifecycles, totalTx: 12_200, partitions, taskQueueMarks: [], prefix: 'p', accounts });
}

test('trigger queues spread over TRIGGER_SHARDS queues: the first limit of one account is the account itself, and N accounts scale linearly', () => {
  expect(TRIGGER_SHARDS).toBeGreaterThan(1);
  const one = measuredMix(1);
  // Every claim-trigger shard listed carries the account's own limit (20,000 / 12.2 = 1,639 lifecycles/s) and more.
  const shards = one.hotspots.filter((h) => h.where.startsWith('p-claim'));
  expect(shards.length).toBeGreaterThan(0);
  for (const h of shards) expect(h.limitOne).toBeGreaterThan(1639);
  expect(one.first.one).toEqual({ what: 'account (12.2 tx/lifecycle on the busiest)', perSecond: 1639 });
  // One storage queue would have stopped at 2,000 / 2.26 = 884.
  const row = scaleRows(one, 100).model.find((r) => r.metric.startsWith('trigger queue claim'))!;
  expect(row.target).toBe('1 queue: 884');
  expect(Number(row.value.split(' ')[0])).toBeGreaterThan(1639);
  // Every call follows its task to an account: N accounts carry N times as much.
  for (const n of [2, 4, 8]) expect(measuredMix(n).first.many.perSecond).toBe(Math.floor((20_000 * n) / 12.2));
});

test('a task queue spread over pending shards: each shard is its own queue, and the report shows how far the busiest carries', () => {
  const partitions = new Map<string, { calls: number; entities: number }>();
  const base = `p-${'b'.repeat(26)}`;
  partitions.set(`queue ${base}-1`, { calls: 12, entities: 12 });
  partitions.set(`queue ${base}-1-1`, { calls: 10, entities: 10 });
  partitions.set(`queue ${base}-1-2`, { calls: 8, entities: 8 });
  const m = scaleModel({ lifecycles: 10, totalTx: 30, partitions, taskQueueMarks: [base], prefix: 'p', accounts: 4, pendingShards: 3 });
  expect(m.hotspots.map((h) => [h.where, h.scope, h.limitOne])).toEqual([
    [`${base}-1`, 'task-queue', 1666],
    [`${base}-1-1`, 'task-queue', 2000],
    [`${base}-1-2`, 'task-queue', 2500],
  ]);
  const row = scaleRows(m, 10).model.find((r) => r.metric.startsWith("one task queue's pending queues"))!;
  expect(row).toMatchObject({ value: '1666 lifecycles/s', target: '1 shard: 666' });
  expect(row.metric).toContain('3 shard(s)');
});

test("a task queue's index over hash buckets: each bucket is its own partition, and the report shows how far the busiest carries", () => {
  const partitions = new Map<string, { calls: number; entities: number }>();
  partitions.set('table pIndexes q~bench!2fcost', { calls: 10, entities: 30 });
  partitions.set('table pIndexes q~bench!2fcost~1', { calls: 10, entities: 25 });
  partitions.set('table pIndexes q~bench!2fcost~2', { calls: 10, entities: 25 });
  partitions.set('table pIndexes queues', { calls: 1, entities: 1 }); // the registry: touched once, not listed
  const m = scaleModel({ lifecycles: 10, totalTx: 31, partitions, taskQueueMarks: ['bench!2fcost'], prefix: 'p', accounts: 1, pendingShards: 3 });
  expect(m.hotspots.map((h) => [h.where, h.scope, h.limitOne])).toEqual([
    ['pIndexes q~bench!2fcost', 'task-queue', 666],
    ['pIndexes q~bench!2fcost~1', 'task-queue', 800],
    ['pIndexes q~bench!2fcost~2', 'task-queue', 800],
  ]);
  const rows = scaleRows(m, 10).model;
  expect(rows.find((r) => r.metric.startsWith("one task queue's index partitions"))).toMatchObject({
    metric: "one task queue's index partitions, 3 bucket(s): busiest (3 of 8 entities/lifecycle)",
    value: '666 lifecycles/s',
    target: '1 bucket: 250',
  });
  // The task queue's first limit is its busiest bucket, three times what one partition would carry.
  expect(rows.find((r) => r.metric.startsWith('first partition, one task queue'))).toMatchObject({
    metric: 'first partition, one task queue: pIndexes q~bench!2fcost',
    value: '666 / 666 lifecycles/s',
  });
});

test("the triggers' lane counts as its buckets carry it under sustained load: each an even share of the day", () => {
  const partitions = new Map<string, { calls: number; entities: number }>();
  // A short run: the instance's turn left 600 of 800 rows in one bucket.
  partitions.set('table pExpiry t~2026-11-28~3', { calls: 8, entities: 600 });
  partitions.set('table pExpiry t~2026-11-28~4', { calls: 3, entities: 200 });
  for (let i = 0; i < 100; i++) partitions.set(`table pTasks task${i}`, { calls: 3, entities: 3 });
  const m = scaleModel({ lifecycles: 100, totalTx: 311, partitions, taskQueueMarks: [], prefix: 'p', accounts: 1 });
  // 800 rows over 8 buckets: 1 per lifecycle each (2,000 lifecycles/s a bucket), not 6 in the busiest (333/s).
  expect(m.hotspots.map((h) => [h.where, h.perLifecycle, h.limitOne])).toEqual([['pExpiry t~2026-11-28~*', 1, 2000]]);
  expect(m.first.one.what).toMatch(/t~2026-11-28~\*/);
});
