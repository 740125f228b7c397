/**
 * The expiry index spreads a day's rows over EXPIRY_BUCKETS partitions (one partition takes about
 * 2,000 entities/s), keeps rows recorded together in one partition and one write, and still finds
 * every due row with one query (a page per bucket).
 */
import { MemoryStorage } from '../../shared/storage/memory';
import { EXPIRY_BUCKETS, ExpiryIndex, TRIGGER_LANE } from '../../shared/tasks/expiry';
import { emptyPagesStorage } from '../helpers/empty-pages';

test('rows spread over the buckets of their day; rows recorded together share one write; due finds them all', async () => {
  const storage = new MemoryStorage('exp');
  await storage.table('Expiry').create();
  const index = new ExpiryIndex(storage);
  const expires = '2026-11-23T10:00:00.000Z';
  for (let i = 0; i < 64; i++) await index.record('task', `t${i}`, expires, {}, [{ kind: 'task-group', id: `g${i}` }], `g${i}`);
  const writes = storage.meter.snapshot().byOp;
  expect(writes['Expiry.transaction']).toBe(64); // each task's two rows in one transaction
  expect(writes['Expiry.upsert'] ?? 0).toBe(0);

  const due = await index.due(new Date('2026-11-23T10:00:00.001Z'), 1000);
  expect(due).toHaveLength(128);
  const partitions = new Set(due.map((r) => r.partitionKey));
  expect([...partitions].every((pk) => /^2026-11-23~\d$/.test(pk))).toBe(true);
  expect(partitions.size).toBe(EXPIRY_BUCKETS);
  for (let i = 0; i < 64; i++) {
    const pair = due.filter((r) => r.id === `t${i}` || r.id === `g${i}`);
    expect(new Set(pair.map((r) => r.partitionKey)).size).toBe(1);
  }
  // Nothing before its time.
  expect(await index.due(new Date('2026-11-23T09:59:59.000Z'), 1000)).toEqual([]);
  await index.removeAll(due);
  expect(await index.due(new Date('2027-01-01T00:00:00.000Z'), 1000)).toEqual([]);
});

test('due reads on through empty pages and the end of each bucket, up to its limit', async () => {
  const storage = new MemoryStorage('exp');
  await storage.table('Expiry').create();
  const index = new ExpiryIndex(emptyPagesStorage(storage, { pageSize: 3 }));
  for (let i = 0; i < 20; i++) await index.record('task', `t${i}`, '2026-11-23T10:00:00.000Z');
  const now = new Date('2026-11-23T11:00:00.000Z');
  expect(await index.due(now, 1000)).toHaveLength(20);
  expect(await index.due(now, 7)).toHaveLength(7);
});

test('rows forgotten together go out in one transaction; one already gone does not keep the others', async () => {
  const storage = new MemoryStorage('exp');
  await storage.table('Expiry').create();
  const index = new ExpiryIndex(storage, 0); // no linger: the deletes of one turn still share a write
  const expires = '2026-11-23T10:20:00.000Z';
  // One worker's batch of claims: bucketed by the worker, recorded in one turn, one write.
  const recorded = await Promise.all(Array.from({ length: 8 }, (_, i) => index.recordTrigger('claim', `t${i}`, expires, { runId: 0 }, { bucketBy: 'wg/w1' })));
  expect(storage.meter.snapshot().byOp).toEqual({ 'Expiry.create': 1, 'Expiry.transaction': 1 });
  expect(recorded).toEqual(Array.from({ length: 8 }, (_, i) => ExpiryIndex.keys('claim', `t${i}`, expires, 'wg/w1', TRIGGER_LANE)));
  const rows = Array.from({ length: 8 }, (_, i) => ExpiryIndex.keys('claim', `t${i}`, expires, 'wg/w1', TRIGGER_LANE));
  await Promise.all(rows.slice(0, 4).map((r) => index.forget(r)));
  expect(storage.meter.snapshot().byOp['Expiry.transaction']).toBe(2);
  // A row the sweep removed meanwhile: its transaction fails whole, then each row goes alone.
  await storage.table('Expiry').delete(rows[4].partitionKey, rows[4].rowKey);
  await Promise.all(rows.slice(4).map((r) => index.forget(r)));
  expect(await index.dueTriggers(new Date('2026-11-24T00:00:00.000Z'), 1000)).toEqual([]);
  // Forgetting again is fine.
  await expect(index.forget(rows[0])).resolves.toBeUndefined();
});

test('forgotten rows linger for others: deletes of many moments share one transaction, a record takes them along at once', async () => {
  const storage = new MemoryStorage('exp');
  await storage.table('Expiry').create();
  // A linger no test outlasts: only settled() or a record sends them.
  const index = new ExpiryIndex(storage, 3_600_000);
  const expires = '2026-11-23T10:20:00.000Z';
  const keys = Array.from({ length: 12 }, (_, i) => ExpiryIndex.keys('claim', `t${i}`, expires, 'wg/w1', TRIGGER_LANE));
  await Promise.all(keys.map((_, i) => index.recordTrigger('claim', `t${i}`, expires, { runId: 0 }, { bucketBy: 'wg/w1' })));
  const calls = () => storage.meter.snapshot().byOp;
  expect(calls()['Expiry.transaction']).toBe(1);
  // Reports of different moments (turns): nothing goes out while they linger.
  const forgotten: Promise<void>[] = [];
  for (const k of keys.slice(0, 4)) {
    forgotten.push(index.forget(k));
    await new Promise((r) => setImmediate(r));
  }
  expect(calls()['Expiry.transaction']).toBe(1);
  expect(calls()['Expiry.delete'] ?? 0).toBe(0);
  await index.settled();
  await Promise.all(forgotten);
  expect(calls()['Expiry.transaction']).toBe(2);
  const left = async () => (await index.dueTriggers(new Date('2026-11-24T00:00:00.000Z'), 100)).map((r) => r.id).sort();
  expect(await left()).toEqual(
    keys
      .slice(4)
      .map((_, i) => `t${i + 4}`)
      .sort(),
  );
  // A record in the partition is on a request's path: it goes at once, with the lingering deletes.
  const lingering = keys.slice(4, 8).map((k) => index.forget(k));
  await new Promise((r) => setImmediate(r));
  await index.recordTrigger('claim', 'late', expires, { runId: 0 }, { bucketBy: 'wg/w1' });
  await Promise.all(lingering);
  expect(calls()['Expiry.transaction']).toBe(3);
  expect(await left()).toEqual(['late', 't10', 't11', 't8', 't9']);
});

test('triggers have a lane of their own: swept apart from a backlog of expiries, and before it', async () => {
  const storage = new MemoryStorage('exp');
  await storage.table('Expiry').create();
  const index = new ExpiryIndex(storage);
  // A day's backlog of expiries, and one claim expiry due later than all of them.
  for (let i = 0; i < 50; i++) await index.record('task', `t${i}`, '2026-11-20T10:00:00.000Z');
  await index.recordTrigger('claim', 'c', '2026-11-23T10:00:00.000Z', { runId: 0, takenUntil: '2026-11-23T10:00:00.000Z' }, { bucketBy: 'wg/w1' });
  const now = new Date('2026-11-23T10:00:01.000Z');
  expect((await index.dueTriggers(now, 10)).map((r) => r.id)).toEqual(['c']);
  expect((await index.due(now, 100)).map((r) => r.kind)).toEqual(Array(50).fill('task'));
});
