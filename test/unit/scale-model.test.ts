/**
 * The bench's scale model (bench/scale.ts) on hand-made counts: which partition, queue or account
 * reaches its Azure limit first, with one account and with several.
 */
import { scaleModel, scaleRows } from '../../bench/scale';

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
  // One account: the claim trigger queue first (2 messages per lifecycle); four: the shared Expiry partition.
  expect(m.first.one).toMatchObject({ perSecond: 1000 });
  expect(m.first.one.what).toMatch(/p-claim/);
  expect(m.first.many).toMatchObject({ perSecond: 2000 });
  expect(m.first.many.what).toMatch(/Expiry/);
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
