/**
 * The expiry index spreads a day's rows over EXPIRY_BUCKETS partitions (one partition takes about
 * 2,000 entities/s), keeps rows recorded together in one partition and one write, and still finds
 * every due row with one query (a page per bucket).
 */
import { MemoryStorage } from '../../shared/storage/memory';
import type { Table, TableName } from '../../shared/storage/port';
import { EXPIRY_BUCKETS, ExpiryIndex } from '../../shared/tasks/expiry';
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
  // One worker's batch of claims: recorded in one turn, one write.
  const rows = await Promise.all(Array.from({ length: 8 }, (_, i) => index.recordTrigger('claim', `t${i}`, expires, { runId: 0 })));
  expect(storage.meter.snapshot().byOp).toEqual({ 'Expiry.create': 1, 'Expiry.transaction': 1 });
  expect(new Set(rows.map((r) => r.partitionKey)).size).toBe(1);
  expect(rows[0].partitionKey).toMatch(/^t~2026-11-23~\d$/);
  expect(rows.map((r) => r.rowKey)).toEqual(Array.from({ length: 8 }, (_, i) => `${expires}~claim~t${i}`));
  await Promise.all(rows.slice(0, 4).map((r) => index.forget(r)));
  expect(storage.meter.snapshot().byOp['Expiry.transaction']).toBe(2);
  // A row the sweep removed meanwhile: its transaction fails whole, then each row goes alone.
  await storage.table('Expiry').delete(rows[4].partitionKey, rows[4].rowKey);
  await Promise.all(rows.slice(4).map((r) => index.forget(r)));
  expect(await index.dueTriggers(new Date('2026-11-24T00:00:00.000Z'), 1000)).toEqual([]);
  // Forgetting again is fine.
  await expect(index.forget(rows[0])).resolves.toBeUndefined();
});

test('triggers of separate requests share the write in flight: one bucket per turn, the next after a transaction of rows or an idle while', async () => {
  const storage = new MemoryStorage('exp');
  await storage.table('Expiry').create();
  // The index's writes stay in flight until released, as under load.
  let release!: () => void;
  const inFlight = new Promise<void>((r) => (release = r));
  const held = (t: Table): Table =>
    new Proxy(t, {
      get: (tt, p) =>
        p === 'upsert' || p === 'transact' ? async (...a: never[]) => (await inFlight, (tt[p] as (...x: never[]) => unknown)(...a)) : Reflect.get(tt, p, tt),
    });
  const index = new ExpiryIndex(new Proxy(storage, { get: (s, p) => (p === 'table' ? (n: TableName) => held(s.table(n)) : Reflect.get(s, p, s)) }), 0);
  const at = (i: number) => `2026-11-23T10:${String(i % 60).padStart(2, '0')}:00.000Z`;
  // 250 claimWorks of one task each, each in a turn of its own.
  const recorded: Promise<{ partitionKey: string }>[] = [];
  for (let i = 0; i < 250; i++) {
    recorded.push(index.recordTrigger('claim', `t${i}`, at(i), { runId: 0 }));
    await Promise.resolve();
  }
  release();
  const keys = await Promise.all(recorded);
  // A turn's first row goes alone; the others wait for it and share the next write, 100 rows a turn.
  expect(storage.meter.snapshot().byOp).toEqual({ 'Expiry.create': 1, 'Expiry.upsert': 3, 'Expiry.transaction': 3 });
  const buckets = keys.map((k) => k.partitionKey);
  expect([0, 100, 200].map((i) => new Set(buckets.slice(i, i + 100)).size)).toEqual([1, 1, 1]);
  expect(new Set([buckets[0], buckets[100], buckets[200]]).size).toBe(3);
  expect(await index.dueTriggers(new Date('2026-11-24T00:00:00.000Z'), 1000)).toHaveLength(250);

  // Idle: rows of separate moments move to the next bucket once the turn is LANE_TURN_MS old, so
  // they spread over the buckets as a hash would.
  const clock = jest.spyOn(Date, 'now');
  try {
    let ms = Date.now();
    clock.mockImplementation(() => ms);
    const spread = new Set<string>();
    for (let i = 0; i < EXPIRY_BUCKETS; i++) {
      ms += 1000;
      spread.add((await index.recordTrigger('deadline', `d${i}`, at(i), {})).partitionKey);
    }
    expect(spread.size).toBe(EXPIRY_BUCKETS);
    // Within the while, an idle turn keeps its bucket.
    const [x, y] = [await index.recordTrigger('deadline', 'x', at(1), {}), await index.recordTrigger('deadline', 'y', at(2), {})];
    expect(x.partitionKey).toBe(y.partitionKey);
  } finally {
    clock.mockRestore();
  }
});

test('forgotten rows linger for others: deletes of many moments share one transaction, a record takes them along at once', async () => {
  const storage = new MemoryStorage('exp');
  await storage.table('Expiry').create();
  // A linger no test outlasts: only settled() or a record sends them.
  const index = new ExpiryIndex(storage, 3_600_000);
  const expires = '2026-11-23T10:20:00.000Z';
  const keys = await Promise.all(Array.from({ length: 12 }, (_, i) => index.recordTrigger('claim', `t${i}`, expires, { runId: 0 })));
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
  // A record in the partition is on a request's path: it goes at once, with the lingering deletes
  // (it joins their bucket: the turn's write is waiting).
  const lingering = keys.slice(4, 8).map((k) => index.forget(k));
  await new Promise((r) => setImmediate(r));
  expect((await index.recordTrigger('claim', 'late', expires, { runId: 0 })).partitionKey).toBe(keys[4].partitionKey);
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
  await index.recordTrigger('claim', 'c', '2026-11-23T10:00:00.000Z', { runId: 0, takenUntil: '2026-11-23T10:00:00.000Z' });
  const now = new Date('2026-11-23T10:00:01.000Z');
  expect((await index.dueTriggers(now, 10)).map((r) => r.id)).toEqual(['c']);
  expect((await index.due(now, 100)).map((r) => r.kind)).toEqual(Array(50).fill('task'));
});
