/**
 * The expiry index spreads a day's rows over EXPIRY_BUCKETS partitions (one partition takes about
 * 2,000 entities/s), keeps rows recorded together in one partition and one write, and still finds
 * every due row, bucketed or from before buckets, with one query.
 */
import { MemoryStorage } from '../../shared/storage/memory';
import { EXPIRY_BUCKETS, ExpiryIndex } from '../../shared/tasks/expiry';

test('rows spread over the buckets of their day; rows recorded together share one write; due finds them all', async () => {
  const storage = new MemoryStorage('exp');
  await storage.table('Expiry').create();
  const index = new ExpiryIndex(storage);
  const expires = '2026-11-23T10:00:00.000Z';
  for (let i = 0; i < 64; i++) await index.record('task', `t${i}`, expires, {}, [{ kind: 'task-group', id: `g${i}` }], `g${i}`);
  // A row written before buckets existed (its partition is the bare day).
  await storage.table('Expiry').upsert({
    partitionKey: '2026-11-22',
    rowKey: '2026-11-22T01:00:00.000Z~task~old',
    kind: 'task',
    id: 'old',
    expires: '2026-11-22T01:00:00.000Z',
    data: '{}',
  });
  const writes = storage.meter.snapshot().byOp;
  expect(writes['Expiry.transaction']).toBe(64); // each task's two rows in one transaction
  expect(writes['Expiry.upsert'] ?? 0).toBe(1);

  const due = await index.due(new Date('2026-11-23T10:00:00.001Z'), 1000);
  expect(due).toHaveLength(129);
  const partitions = new Set(due.filter((r) => r.id !== 'old').map((r) => r.partitionKey));
  expect([...partitions].every((pk) => /^2026-11-23~\d$/.test(pk))).toBe(true);
  expect(partitions.size).toBe(EXPIRY_BUCKETS);
  for (let i = 0; i < 64; i++) {
    const pair = due.filter((r) => r.id === `t${i}` || r.id === `g${i}`);
    expect(new Set(pair.map((r) => r.partitionKey)).size).toBe(1);
  }
  // Nothing before its time: a second earlier, only the old row is due.
  expect((await index.due(new Date('2026-11-23T09:59:59.000Z'), 1000)).map((r) => r.id)).toEqual(['old']);
  await index.removeAll(due);
  expect(await index.due(new Date('2027-01-01T00:00:00.000Z'), 1000)).toEqual([]);
});
