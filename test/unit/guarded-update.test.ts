/**
 * The guarded-update helper on the in-memory table: a lost race is decided again on the new row,
 * a write whose answer was lost is recognised as its own success, and running out of attempts is
 * WriteCongestion (a 500, which clients retry).
 */
import { MemoryStorage } from '../../shared/storage/memory';
import { Entity, StorageConflict, Table } from '../../shared/storage/port';
import { REMOVE, UNCHANGED, WriteCongestion, guardedUpdate, withActions } from '../../shared/storage/guarded-update';

const KEY = { partitionKey: 'p', rowKey: 'r' };

async function fresh(): Promise<Table> {
  const storage = new MemoryStorage('gu');
  await storage.ensureAll();
  return storage.table('Workers');
}

/** `table` whose next write applies and then fails as a lost answer does, its retry meeting the write (409/412). */
function losingAnswers(table: Table, times = 1): Table {
  let left = times;
  const ambiguous =
    (op: 'insert' | 'update' | 'merge') =>
    async (e: Entity, etag?: string): Promise<string> => {
      const out = op === 'insert' ? await table.insert(e) : await table[op](e, etag!);
      if (left-- > 0) throw new StorageConflict(op === 'insert' ? 'exists' : 'etag', 'retry met its own write');
      return out;
    };
  return new Proxy(table, { get: (t, p) => (p === 'insert' || p === 'update' || p === 'merge' ? ambiguous(p) : Reflect.get(t, p, t)) });
}

test('inserts a missing row, then updates it under its ETag; UNCHANGED writes nothing', async () => {
  const table = await fresh();
  const first = await guardedUpdate(table, KEY, (cur) => ({ n: ((cur?.n as number) ?? 0) + 1 }), { what: 'row' });
  expect(first).toMatchObject({ written: true, row: { n: 1 } });
  const second = await guardedUpdate(table, KEY, (cur) => ({ n: (cur!.n as number) + 1 }), { what: 'row' });
  expect(second.row?.n).toBe(2);
  expect((await table.get('p', 'r'))?.etag).toBe(second.row?.etag);
  const same = await guardedUpdate(table, KEY, () => UNCHANGED, { what: 'row' });
  expect(same).toEqual({ written: false, row: await table.get('p', 'r') });
});

test('a lost race reads again and decides on the winner’s row', async () => {
  const table = await fresh();
  await table.insert({ ...KEY, n: 0 });
  let calls = 0;
  const out = await guardedUpdate(
    table,
    KEY,
    async (cur) => {
      // Another writer changes the row between this attempt's read and its write, once.
      if (calls++ === 0) await table.upsert({ ...KEY, n: 10 });
      return { n: (cur!.n as number) + 1 };
    },
    { what: 'row' },
  );
  expect(calls).toBe(2);
  expect(out.row?.n).toBe(11);
  expect((await table.get('p', 'r'))?.n).toBe(11);
});

test('a write whose answer was lost is recognised as its own success, not applied twice', async () => {
  const base = await fresh();
  await base.insert({ ...KEY, n: 0 });
  const decided: number[] = [];
  const out = await guardedUpdate(
    losingAnswers(base),
    KEY,
    (cur) => {
      decided.push(cur!.n as number);
      return { n: (cur!.n as number) + 1 };
    },
    { what: 'row' },
  );
  expect(decided).toEqual([0]);
  expect(out).toMatchObject({ written: true, row: { n: 1 } });
  expect((await base.get('p', 'r'))?.n).toBe(1);
});

test('an insert whose answer was lost is its own success too (the retry met 409)', async () => {
  const base = await fresh();
  let decided = 0;
  const out = await guardedUpdate(
    losingAnswers(base),
    KEY,
    (cur) => {
      decided++;
      if (cur) throw new Error('exists already');
      return { n: 1 };
    },
    { what: 'row', current: 'absent' },
  );
  expect(decided).toBe(1);
  expect(out).toMatchObject({ written: true, row: { n: 1 } });
});

test('merge mode writes only the decided properties; actions commit in the same transaction', async () => {
  const table = await fresh();
  await table.insert({ ...KEY, a: 1, b: 2 });
  const out = await guardedUpdate(table, KEY, () => withActions({ b: 3 }, [{ op: 'upsert', entity: { partitionKey: 'p', rowKey: 'side', x: 1 } }]), {
    what: 'row',
    mode: 'merge',
  });
  expect(out.row).toMatchObject({ a: 1, b: 3 });
  expect(await table.get('p', 'r')).toMatchObject({ a: 1, b: 3 });
  expect(await table.get('p', 'side')).toMatchObject({ x: 1 });
});

test('REMOVE deletes the row under the ETag read; a lost race decides again; a missing row stays missing, unwritten', async () => {
  const table = await fresh();
  await table.insert({ ...KEY, n: 0 });
  const seen: number[] = [];
  const out = await guardedUpdate(
    table,
    KEY,
    async (cur): Promise<typeof REMOVE> => {
      seen.push(cur!.n as number);
      if (seen.length === 1) await table.upsert({ ...KEY, n: 1 }); // another writer, between read and delete
      return REMOVE;
    },
    { what: 'row' },
  );
  expect(seen).toEqual([0, 1]);
  expect(out).toEqual({ row: undefined, written: true });
  expect(await table.get('p', 'r')).toBeUndefined();
  expect(await guardedUpdate(table, KEY, () => REMOVE, { what: 'row' })).toEqual({ row: undefined, written: false });
});

test('a known row saves the first read; a stale one costs a read and a second decision', async () => {
  const table = await fresh();
  await table.insert({ ...KEY, n: 0 });
  const stale = (await table.get('p', 'r'))!;
  await table.upsert({ ...KEY, n: 5 });
  const seen: number[] = [];
  const out = await guardedUpdate(
    table,
    KEY,
    (cur) => {
      seen.push(cur!.n as number);
      return { n: (cur!.n as number) + 1 };
    },
    { what: 'row', current: stale },
  );
  expect(seen).toEqual([0, 5]);
  expect(out.row?.n).toBe(6);
});

test('decide’s errors reach the caller as they are', async () => {
  const table = await fresh();
  await expect(
    guardedUpdate(
      table,
      KEY,
      () => {
        throw new RangeError('no such worker');
      },
      { what: 'row' },
    ),
  ).rejects.toThrow(RangeError);
});

test('attempts run out: WriteCongestion (answered 500, which clients retry), after exactly that many decisions', async () => {
  const table = await fresh();
  await table.insert({ ...KEY, n: 0 });
  let decided = 0;
  const out = guardedUpdate(
    table,
    KEY,
    async (cur) => {
      decided++;
      await table.upsert({ ...KEY, n: (cur!.n as number) + 100 }); // someone always wins first
      return { n: 1 };
    },
    { what: 'worker g/w', attempts: 3 },
  );
  await expect(out).rejects.toThrow(WriteCongestion);
  await expect(out).rejects.toThrow('worker g/w is changing too fast');
  expect(decided).toBe(3);
});
