/**
 * The port's read and write helpers against a table that pages as Azure may: an empty page with a
 * continuation before every page of rows, and short pages.
 */
import { MemoryStorage } from '../../shared/storage/memory';
import {
  allRows,
  deleteIfMatch,
  firstRow,
  insertIfAbsent,
  mergeIfMatch,
  pagesOf,
  readPage,
  replaceIfMatch,
  rowBatches,
  rows,
  transactIf,
  type Table,
} from '../../shared/storage/port';
import { emptyPagesTable } from '../helpers/empty-pages';

async function seeded(n: number): Promise<Table> {
  const table = new MemoryStorage('t').table('Tasks');
  await table.create();
  for (let i = 0; i < n; i++) await table.insert({ partitionKey: `p${i % 3}`, rowKey: `r${String(i).padStart(3, '0')}`, i });
  return table;
}

test('rows reads to the end through empty and short pages', async () => {
  const table = emptyPagesTable(await seeded(25), { pageSize: 4 });
  // One page is not the answer here: the first is empty and continues.
  expect((await table.page({}, 1000)).items).toEqual([]);
  const all = await allRows(table, {});
  expect(all.map((r) => r.i).sort((a, b) => Number(a) - Number(b))).toEqual([...Array(25).keys()]);
});

test('rows stops at max rows, with the page size it is given', async () => {
  const table = emptyPagesTable(await seeded(25), { pageSize: 4 });
  const seen: number[] = [];
  for await (const r of rows(table, { partitionKey: 'p0' }, { pageSize: 2, max: 5 })) seen.push(Number(r.i));
  expect(seen).toEqual([0, 3, 6, 9, 12]);
});

test('rows of a query nothing matches is empty', async () => {
  const table = emptyPagesTable(await seeded(5));
  expect(await allRows(table, { partitionKey: 'none' })).toEqual([]);
});

test('rowBatches gathers short pages into batches of its size', async () => {
  const table = emptyPagesTable(await seeded(10), { pageSize: 3 });
  const sizes: number[] = [];
  for await (const batch of rowBatches(table, {}, 4)) sizes.push(batch.length);
  expect(sizes).toEqual([4, 4, 2]);
});

test('firstRow reads through an empty first page', async () => {
  const table = emptyPagesTable(await seeded(5));
  expect((await firstRow(table, { partitionKey: 'p1' }))?.rowKey).toBe('r001');
  expect(await firstRow(table, { partitionKey: 'p9' })).toBeUndefined();
});

test('readPage answers full pages while rows remain, through short and empty ones, and a continuation while they do', async () => {
  const table = emptyPagesTable(await seeded(10), { pageSize: 2 });
  const keys: string[] = [];
  let continuation: string | undefined;
  let pages = 0;
  do {
    const page = await readPage(table, { partitionKey: 'p0' }, 3, continuation);
    if (page.continuation) expect(page.items).toHaveLength(3);
    else expect(page.items.length).toBeGreaterThan(0);
    keys.push(...page.items.map((r) => r.rowKey));
    continuation = page.continuation;
    pages++;
  } while (continuation);
  expect(keys).toEqual(['r000', 'r003', 'r006', 'r009']);
  expect(pages).toBe(2);
});

test('pagesOf follows a paged reader to its end, through empty pages', async () => {
  const table = emptyPagesTable(await seeded(7), { pageSize: 2 });
  const keys: string[] = [];
  for await (const page of pagesOf((c) => table.page({}, 2, c))) keys.push(...page.items.map((r) => r.rowKey));
  expect(keys).toHaveLength(7);
});

test('the conditional writes answer a refusal instead of throwing', async () => {
  const table = await seeded(1);
  const row = { partitionKey: 'p0', rowKey: 'r000', i: 1 };
  expect(await insertIfAbsent(table, row)).toEqual({ ok: false, reason: 'exists' });
  const fresh = await insertIfAbsent(table, { ...row, rowKey: 'new' });
  expect(fresh.ok).toBe(true);
  const current = (await table.get('p0', 'r000'))!;
  expect(await replaceIfMatch(table, row, 'W/"stale"')).toEqual({ ok: false, reason: 'etag' });
  expect(await replaceIfMatch(table, { ...row, rowKey: 'gone' }, current.etag)).toEqual({ ok: false, reason: 'missing' });
  const replaced = await replaceIfMatch(table, row, current.etag);
  expect(replaced.ok && replaced.etag).not.toBe(current.etag);
  expect(await mergeIfMatch(table, row, current.etag)).toEqual({ ok: false, reason: 'etag' });
  expect(await deleteIfMatch(table, 'p0', 'r000', current.etag)).toEqual({ ok: false, reason: 'etag' });
  expect(
    await transactIf(table, [
      { op: 'create', entity: { partitionKey: 'p0', rowKey: 'x' } },
      { op: 'create', entity: row },
    ]),
  ).toEqual({ ok: false, reason: 'exists' });
  expect(await table.get('p0', 'x')).toBeUndefined();
  if (!replaced.ok) throw new Error('replace refused');
  expect(await deleteIfMatch(table, 'p0', 'r000', replaced.etag)).toEqual({ ok: true, value: true });
});

test('a failure that is not a conflict still throws', async () => {
  const table = new MemoryStorage('t').table('Tasks'); // never created
  await expect(insertIfAbsent(table, { partitionKey: 'p', rowKey: 'r' })).rejects.toThrow();
});
