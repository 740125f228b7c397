/**
 * The storage port's contract: the same cases against the Azure adapter (on the test Azurite) and
 * the in-memory adapter, so the in-memory one can stand in for storage in fast domain tests.
 */
import crypto from 'node:crypto';
import { allRows, createStorage, Entity, Storage, StorageConflict, StorageLimit } from '../../shared/storage/storage';
import { MemoryStorage, isMemoryStorage } from '../../shared/storage/memory';
import { FaultyStorage } from '../../shared/storage/faults';
import { parseFaults } from '../../shared/config';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const prefix = () => 'p' + crypto.randomBytes(5).toString('hex');

/** What a client holding a SAS URL gets: a real HTTP request on Azure, the adapter's own answer in memory. */
async function sasFetch(
  storage: Storage,
  method: string,
  url: string,
  body?: Buffer,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string }> {
  if (storage instanceof FaultyStorage) storage = storage.inner;
  if (isMemoryStorage(storage)) {
    const r = storage.fetch(method, url, body, headers);
    return { status: r.status, text: r.body.toString() };
  }
  const res = await fetch(url, {
    method,
    body: body ? new Uint8Array(body) : method === 'PUT' ? new Uint8Array(0) : undefined,
    headers: { ...(body ? { 'content-length': String(body.length) } : {}), ...headers },
  });
  return { status: res.status, text: await res.text() };
}

async function conflictOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (err instanceof StorageConflict) return err.reason;
    throw err;
  }
  return 'none';
}

/**
 * The faithful mode keeps the port's contract under short and empty pages and throttling (fixed
 * seeds). Ambiguous writes break it by design (a write's own retry meets its own success): that is
 * what the service must tolerate, and test/integration/ambiguity-*.test.ts hold it to that.
 */
const FAITHFUL_SEEDS = [1, 2, 3];
const faithful = (seed: number) => parseFaults(`seed=${seed} pages=0.5 throttle=0.05 backoff-ms=0`)!;

const adapters: [string, () => Storage][] = [
  ['azure', () => createStorage(process.env.TEST_STORAGE_CONNECTION!, prefix())],
  ['memory', () => new MemoryStorage(prefix())],
  ...FAITHFUL_SEEDS.map((seed): [string, () => Storage] => [
    `faithful memory (seed ${seed})`,
    () => new FaultyStorage(new MemoryStorage(prefix()), faithful(seed)),
  ]),
];

describe.each(adapters)('%s adapter', (_kind, make) => {
  let storage: Storage;
  beforeAll(async () => {
    storage = make();
    await storage.ensureAll();
  });

  const row = (pk: string, rk: string, props: Record<string, unknown> = {}): Entity => ({ partitionKey: pk, rowKey: rk, ...props });

  describe('tables', () => {
    test('insert, get, and a second insert of the same key is a conflict', async () => {
      const t = storage.table('Tasks');
      const etag = await t.insert(row('a', 'x', { n: 1, s: 'one', b: true }));
      const got = await t.get('a', 'x');
      expect(got).toMatchObject({ partitionKey: 'a', rowKey: 'x', n: 1, s: 'one', b: true, etag });
      expect(await t.get('a', 'nope')).toBeUndefined();
      expect(await conflictOf(t.insert(row('a', 'x')))).toBe('exists');
    });

    test('update and merge are If-Match writes: stale ETag, missing row', async () => {
      const t = storage.table('Tasks');
      const e1 = await t.insert(row('u', '1', { keep: 'k', v: 1 }));
      const e2 = await t.merge(row('u', '1', { v: 2 }), e1);
      expect(e2).not.toBe(e1);
      expect(await t.get('u', '1')).toMatchObject({ keep: 'k', v: 2 });
      expect(await conflictOf(t.update(row('u', '1', { v: 3 }), e1))).toBe('etag');
      const e3 = await t.update(row('u', '1', { v: 3 }), e2);
      const replaced = await t.get('u', '1');
      expect(replaced).toMatchObject({ v: 3, etag: e3 });
      expect(replaced!.keep).toBeUndefined();
      expect(await conflictOf(t.update(row('u', 'missing', { v: 1 }), e3))).toBe('missing');
      expect(await conflictOf(t.merge(row('u', 'missing', { v: 1 }), '*'))).toBe('missing');
      await t.merge(row('u', '1', { w: 'x' }), '*');
      expect(await t.get('u', '1')).toMatchObject({ v: 3, w: 'x' });
    });

    test('upsert replaces; delete is ETag-guarded and tolerates a missing row', async () => {
      const t = storage.table('Tasks');
      await t.upsert(row('d', '1', { a: 1, b: 2 }));
      const etag = await t.upsert(row('d', '1', { a: 5 }));
      const got = await t.get('d', '1');
      expect(got).toMatchObject({ a: 5, etag });
      expect(got!.b).toBeUndefined();
      expect(await t.delete('d', 'missing')).toBe(false);
      await t.merge(row('d', '1', { c: 1 }), etag);
      expect(await conflictOf(t.delete('d', '1', etag))).toBe('etag');
      expect(await t.delete('d', '1')).toBe(true);
      expect(await t.get('d', '1')).toBeUndefined();
    });

    test('an entity-group transaction applies all its actions or none', async () => {
      const t = storage.table('TaskDeps');
      const etags = await t.transact([
        { op: 'create', entity: row('g', 'meta', { v: 1 }) },
        { op: 'upsert', entity: row('g', 'm1', { x: 1 }) },
        { op: 'upsert', entity: row('g', 'm2', { x: 2 }) },
      ]);
      expect(etags).toHaveLength(3);
      const meta = (await t.get('g', 'meta'))!;
      expect(etags[0]).toBe(meta.etag);
      // The returned ETag guards the next write.
      await t.update(row('g', 'meta', { v: 2 }), etags[0]!);

      // A create of an existing row fails the whole batch: the new row is not written either.
      expect(
        await conflictOf(
          t.transact([
            { op: 'create', entity: row('g', 'new') },
            { op: 'create', entity: row('g', 'm1') },
          ]),
        ),
      ).toBe('exists');
      expect(await t.get('g', 'new')).toBeUndefined();

      // A stale ETag fails it too, and so does a delete of a missing row.
      expect(
        await conflictOf(
          t.transact([
            { op: 'update', entity: row('g', 'meta', { v: 3 }), etag: meta.etag, mode: 'Merge' },
            { op: 'delete', partitionKey: 'g', rowKey: 'm2' },
          ]),
        ),
      ).toBe('etag');
      expect(await t.get('g', 'm2')).toBeDefined();
      expect(
        await conflictOf(
          t.transact([
            { op: 'delete', partitionKey: 'g', rowKey: 'm2' },
            { op: 'delete', partitionKey: 'g', rowKey: 'gone' },
          ]),
        ),
      ).toBe('missing');
      expect(await t.get('g', 'm2')).toBeDefined();

      // Merge mode keeps the other properties; deletes go through.
      const now = (await t.get('g', 'meta'))!;
      await t.transact([
        { op: 'update', entity: row('g', 'meta', { w: 'x' }), etag: now.etag, mode: 'Merge' },
        { op: 'delete', partitionKey: 'g', rowKey: 'm2' },
      ]);
      expect(await t.get('g', 'meta')).toMatchObject({ v: 2, w: 'x' });
      expect(await t.get('g', 'm2')).toBeUndefined();
    });

    test("Azure's limits refuse a transaction as a whole: 100 actions, one partition, each row once, 4 MiB", async () => {
      const t = storage.table('TaskDeps');
      const many = Array.from({ length: 101 }, (_, i) => ({ op: 'upsert' as const, entity: row('l', String(i)) }));
      await expect(t.transact(many)).rejects.toMatchObject({ statusCode: 400 });
      await expect(
        t.transact([
          { op: 'upsert', entity: row('l', '1') },
          { op: 'upsert', entity: row('m', '1') },
        ]),
      ).rejects.toMatchObject({ statusCode: 400 });
      await expect(
        t.transact([
          { op: 'upsert', entity: row('l', '1') },
          { op: 'delete', partitionKey: 'l', rowKey: '1' },
        ]),
      ).rejects.toMatchObject({ statusCode: 400 });
      // 100 entities of 60,000 characters each: about 6 MB as JSON.
      const big = 'x'.repeat(30_000);
      const large = Array.from({ length: 100 }, (_, i) => ({ op: 'upsert' as const, entity: row('l', `b${i}`, { a: big, b: big }) }));
      await expect(t.transact(large)).rejects.toBeInstanceOf(StorageLimit);
      // Nothing of any of them was written (read through short and empty pages).
      expect(await allRows(t, { partitionKey: { ge: 'l', lt: 'n' } })).toEqual([]);
    });

    test('queries: key equality and ranges, property conditions, projection, order and paging', async () => {
      const t = storage.table('Indexes');
      const rows = [
        row('q2', 'b', { state: 'running', live: true, at: '2026-01-02' }),
        row('q1', 'c', { state: 'pending', live: false, at: '2026-01-03' }),
        row('q1', 'a', { state: 'pending', live: true, at: '2026-01-01' }),
        row('q3', 'a', { state: 'failed', live: true, at: '2026-01-05' }),
        row('q1', 'b', { state: 'running', live: true, at: '2026-01-04' }),
        row('q2', 'a', { state: 'pending', live: true }),
      ];
      // Written in a scrambled order; queries return PartitionKey, then RowKey order.
      for (const r of rows) await t.insert(r);
      // Every page to the end: an empty or short page with a continuation is not the end.
      const keys = async (q: Parameters<typeof t.page>[0], limit = 1000) => {
        const out: string[] = [];
        let continuation: string | undefined;
        do {
          const page = await t.page(q, limit, continuation);
          out.push(...page.items.map((r) => `${r.partitionKey}/${r.rowKey}`));
          continuation = page.continuation;
        } while (continuation);
        return out;
      };

      expect(await keys({ partitionKey: 'q1' })).toEqual(['q1/a', 'q1/b', 'q1/c']);
      expect(await keys({ partitionKey: 'q1', rowKey: { ge: 'b', lt: 'c' } })).toEqual(['q1/b']);
      expect(await keys({ partitionKey: { gt: 'q1', le: 'q3' }, rowKey: 'a' })).toEqual(['q2/a', 'q3/a']);
      expect(
        await keys({
          where: [
            { prop: 'live', op: 'eq', value: true },
            { prop: 'state', op: 'eq', value: 'pending' },
          ],
        }),
      ).toEqual(['q1/a', 'q2/a']);
      // A row without the property never matches a comparison on it.
      expect(await keys({ where: [{ prop: 'at', op: 'lt', value: '2026-01-03' }] })).toEqual(['q1/a', 'q2/b']);
      expect(
        await keys({
          partitionKey: { ge: 'q1', lt: 'q3' },
          where: [
            {
              or: [
                { prop: 'state', op: 'eq', value: 'running' },
                { prop: 'at', op: 'gt', value: '2026-01-02' },
              ],
            },
          ],
        }),
      ).toEqual(['q1/b', 'q1/c', 'q2/b']);
      // Quotes in values are data, not syntax.
      await t.insert(row("q'4", "it's", { s: "o'clock" }));
      expect(await keys({ partitionKey: "q'4", where: [{ prop: 's', op: 'eq', value: "o'clock" }] })).toEqual(["q'4/it's"]);

      const projected: Record<string, unknown>[] = [];
      let from: string | undefined;
      do {
        const page = await t.page({ partitionKey: 'q1', select: ['RowKey', 'state'] }, 1000, from);
        projected.push(...page.items);
        from = page.continuation;
      } while (from);
      expect(projected.map((r) => [r.rowKey, r.state])).toEqual([
        ['a', 'pending'],
        ['b', 'running'],
        ['c', 'pending'],
      ]);
      expect(projected[0].at).toBeUndefined();
      expect(projected[0].etag).toBeTruthy();

      // Paging: pages of two, resumed by the continuation token, cover everything once, in order.
      const seen: string[] = [];
      let continuation: string | undefined;
      let pages = 0;
      do {
        const page = await t.page({ partitionKey: { ge: 'q1', lt: 'q4' } }, 2, continuation);
        expect(page.items.length).toBeLessThanOrEqual(2);
        seen.push(...page.items.map((r) => `${r.partitionKey}/${r.rowKey}`));
        continuation = page.continuation;
        pages++;
      } while (continuation);
      expect(seen).toEqual(['q1/a', 'q1/b', 'q1/c', 'q2/a', 'q2/b', 'q3/a']);
      expect(pages).toBeGreaterThanOrEqual(3);
    });

    test('every call is counted under the same op names', async () => {
      const before = storage.meter.snapshot().byOp;
      const t = storage.table('Workers');
      const etag = await t.insert(row('c', '1'));
      await t.get('c', '1');
      await t.merge(row('c', '1', { x: 1 }), etag);
      await t.page({ partitionKey: 'c' }, 10);
      await t.transact([{ op: 'upsert', entity: row('c', '2') }]);
      await t.delete('c', '2');
      const after = storage.meter.snapshot().byOp;
      const diff = Object.fromEntries(
        Object.keys(after)
          .filter((k) => after[k] !== (before[k] ?? 0))
          .map((k) => [k, after[k] - (before[k] ?? 0)]),
      );
      expect(diff).toEqual({ 'Workers.insert': 1, 'Workers.get': 1, 'Workers.merge': 1, 'Workers.query': 1, 'Workers.transaction': 1, 'Workers.delete': 1 });
    });
  });

  describe('queues', () => {
    test('receive leases messages; an expired lease returns them with a new pop receipt and a higher dequeue count', async () => {
      const q = storage.queueNamed(`${storage.prefix}-lease`, 'lease');
      await q.create();
      const before = Date.now();
      await q.put({ n: 1 });
      await q.put({ n: 2 });
      expect(await q.approximateCount()).toBe(2);
      const first = await q.receive(32, 1);
      expect(first.map((m) => JSON.parse(Buffer.from(m.messageText, 'base64').toString()).n).sort()).toEqual([1, 2]);
      expect(first.every((m) => m.dequeueCount === 1)).toBe(true);
      expect(first[0].insertedOn!.getTime()).toBeGreaterThanOrEqual(before - 2000);
      expect(await q.receive(32, 1)).toEqual([]);
      await sleep(1500);
      const again = await q.receive(32, 30);
      expect(again).toHaveLength(2);
      expect(again.every((m) => m.dequeueCount === 2)).toBe(true);
      const m = again[0];
      expect(m.popReceipt).not.toBe(first.find((f) => f.messageId === m.messageId)!.popReceipt);
      // A stale pop receipt deletes nothing; the current one does.
      await q.delete(m.messageId, first.find((f) => f.messageId === m.messageId)!.popReceipt);
      expect(await q.approximateCount()).toBe(2);
      await q.delete(m.messageId, m.popReceipt);
      await q.delete(m.messageId, m.popReceipt); // already gone: fine
      expect(await q.approximateCount()).toBe(1);
      // Release makes the other one visible again at once.
      await q.release(again[1].messageId, again[1].popReceipt, 0);
      const released = await q.receive(1, 30);
      expect(released.map((x) => x.messageId)).toEqual([again[1].messageId]);
    });

    test('a release or receive past 7 days is held to 7 days: it applies, and the old receipt stops working', async () => {
      const q = storage.queueNamed(`${storage.prefix}-week`, 'week');
      await q.create();
      await q.put({ n: 1 });
      const [m] = await q.receive(1, 8 * 24 * 3600);
      await q.release(m.messageId, m.popReceipt, 8 * 24 * 3600);
      // The release applied (Azure refuses more than 7 days; the adapter asks for 7): the receipt
      // the receive gave is stale, so this delete removes nothing.
      await q.delete(m.messageId, m.popReceipt);
      expect(await q.approximateCount()).toBe(1);
      expect(await q.receive(1, 30)).toEqual([]);
    });

    test('initial visibility delays a message; a time to live ends it', async () => {
      const q = storage.queueNamed(`${storage.prefix}-delay`, 'delay');
      await q.create();
      await q.put({ late: true }, { visibilityS: 1 });
      await q.put({ short: true }, { ttlS: 1 });
      expect((await q.receive(32, 1)).map((m) => JSON.parse(Buffer.from(m.messageText, 'base64').toString()))).toEqual([{ short: true }]);
      await sleep(2200);
      const later = await q.receive(32, 30);
      expect(later.map((m) => JSON.parse(Buffer.from(m.messageText, 'base64').toString()))).toEqual([{ late: true }]);
      expect(await q.approximateCount()).toBe(1);
    });

    test('deleteQueue removes the queue with its messages; deleting a missing queue is fine', async () => {
      const q = storage.queueNamed(`${storage.prefix}-dropped`, 'dropped');
      await q.create();
      await q.put({ doomed: true });
      await q.deleteQueue();
      expect(await q.approximateCount()).toBe(0);
      await expect(q.put({ after: true })).rejects.toThrow();
      await q.deleteQueue();
      expect(storage.meter.snapshot().byOp['dropped.deleteQueue']).toBe(2);
    });

    test('a queue that was never created counts zero', async () => {
      expect(await storage.queueNamed(`${storage.prefix}-never`, 'never').approximateCount()).toBe(0);
    });

    test('poll SAS: dequeue and delete on its own queue only', async () => {
      const name = `${storage.prefix}-polled`;
      const other = storage.queueNamed(`${storage.prefix}-other`, 'other');
      const q = storage.queueNamed(name, 'polled');
      await Promise.all([q.create(), other.create()]);
      await q.put({ hello: 1 });
      const now = Date.now();
      const sas = storage.pollSas(name, { startsOn: new Date(now - 60_000), expiresOn: new Date(now + 600_000), protocol: 'https,http' });
      expect(new URLSearchParams(sas).get('sp')).toBe('p');
      const base = `${storage.queueEndpoint}/${name}/messages`;
      expect((await sasFetch(storage, 'GET', `${base}?peekonly=true&${sas}`)).status).toBe(403);
      expect((await sasFetch(storage, 'POST', `${base}?${sas}`, Buffer.from('<QueueMessage><MessageText>eA==</MessageText></QueueMessage>'))).status).toBe(403);
      expect((await sasFetch(storage, 'GET', `${storage.queueEndpoint}/${other.name}/messages?${sas}`)).status).toBe(403);
      const polled = await sasFetch(storage, 'GET', `${base}?visibilitytimeout=300&${sas}`);
      expect(polled.status).toBe(200);
      const id = /<MessageId>([^<]+)<\/MessageId>/.exec(polled.text)![1];
      const receipt = /<PopReceipt>([^<]+)<\/PopReceipt>/.exec(polled.text)![1];
      expect(await q.approximateCount()).toBe(1);
      const del = await sasFetch(storage, 'DELETE', `${base}/${encodeURIComponent(id)}?popreceipt=${encodeURIComponent(receipt)}&${sas}`);
      expect(del.status).toBe(204);
      expect(await q.approximateCount()).toBe(0);
      const expired = storage.pollSas(name, { startsOn: new Date(now - 600_000), expiresOn: new Date(now - 60_000), protocol: 'https,http' });
      expect((await sasFetch(storage, 'GET', `${base}?visibilitytimeout=300&${expired}`)).status).toBe(403);
    });
  });

  describe('artifact blobs', () => {
    const block = Buffer.from('block-1').toString('base64');

    test('blocks are invisible until committed; commit, sniff, headers, delete', async () => {
      const a = storage.artifacts;
      expect(await a.commitBlocks('t/0/never', [block], 'text/plain')).toBe(false);
      await a.putBlock('t/0/file', block, Buffer.from('hello world'));
      expect(await a.exists('t/0/file')).toBe(false);
      expect(await a.commitBlocks('t/0/file', [block], 'text/plain')).toBe(true);
      expect(await a.exists('t/0/file')).toBe(true);
      expect(await a.readHead('t/0/file', 2)).toEqual({ head: Buffer.from('he'), size: 11 });
      await a.setHeaders('t/0/file', { contentType: 'text/plain', contentEncoding: 'gzip' });
      expect(await a.download('t/0/file')).toEqual({ body: Buffer.from('hello world'), contentType: 'text/plain', contentEncoding: 'gzip' });
      // A re-upload replaces the content at the next commit.
      await a.putBlock('t/0/file', block, Buffer.from('again'));
      expect(await a.commitBlocks('t/0/file', [block], 'application/json')).toBe(true);
      expect((await a.download('t/0/file'))!.body.toString()).toBe('again');
      await a.putBlock('t/0/empty', block, Buffer.alloc(0));
      expect(await a.commitBlocks('t/0/empty', [block], 'text/plain')).toBe(true);
      expect(await a.readHead('t/0/empty', 2)).toBeUndefined();
      await a.delete('t/0/file');
      await a.delete('t/0/file');
      expect(await a.exists('t/0/file')).toBe(false);
      expect(await a.download('t/0/file')).toBeUndefined();
    });

    test('copyIfAbsent copies bytes and content type once; an existing target is kept; a missing source copies nothing', async () => {
      const a = storage.artifacts;
      expect(await a.copyIfAbsent('o.up/x/never', 'o/never')).toBeUndefined();
      await a.upload('o.up/x/u1', Buffer.from('hello'), 'text/plain');
      expect(await a.copyIfAbsent('o.up/x/u1', 'o/copied')).toEqual({ size: 5, copied: true });
      expect(await a.download('o/copied')).toEqual(expect.objectContaining({ body: Buffer.from('hello'), contentType: 'text/plain' }));
      // The source changes afterwards: the target does not, and a second copy keeps it.
      await a.upload('o.up/x/u1', Buffer.from('changed bytes'), 'text/plain');
      expect(await a.copyIfAbsent('o.up/x/u1', 'o/copied')).toEqual({ size: 5, copied: false });
      expect((await a.download('o/copied'))!.body.toString()).toBe('hello');
      await a.upload('o.up/x/empty', Buffer.alloc(0), 'text/plain');
      expect(await a.copyIfAbsent('o.up/x/empty', 'o/empty')).toEqual({ size: 0, copied: true });
    });

    test('upload SAS writes one block and cannot read; read SAS reads and cannot write; expired SAS do nothing', async () => {
      const a = storage.artifacts;
      const soon = new Date(Date.now() + 600_000);
      const put = a.blockUploadUrl('t/1/x y.txt', block, soon);
      expect(new URL(put).searchParams.get('sp')).toBe('w');
      expect((await sasFetch(storage, 'PUT', put, Buffer.from('via sas'))).status).toBe(201);
      expect((await sasFetch(storage, 'GET', put)).status).toBe(403);
      expect(await a.commitBlocks('t/1/x y.txt', [block], 'text/plain')).toBe(true);
      const get = a.readUrl('t/1/x y.txt', soon);
      const read = await sasFetch(storage, 'GET', get);
      expect(read).toEqual({ status: 200, text: 'via sas' });
      expect((await sasFetch(storage, 'PUT', get.replace('?', `?comp=block&blockid=${encodeURIComponent(block)}&`), Buffer.from('no'))).status).toBe(403);
      // A SAS signed for one blob does not open another.
      expect((await sasFetch(storage, 'GET', get.replace('x%20y.txt', 'other.txt'))).status).toBe(403);
      const past = new Date(Date.now() - 60_000);
      expect((await sasFetch(storage, 'GET', a.readUrl('t/1/x y.txt', past))).status).toBe(403);
    });

    test('append SAS appends to the blob createAppend made, cannot create, overwrite or read it; readRange reads from an offset', async () => {
      const a = storage.artifacts;
      const soon = new Date(Date.now() + 600_000);
      const url = a.appendUrl('t/2.live/log', soon);
      expect((await sasFetch(storage, 'PUT', url, undefined, { 'x-ms-blob-type': 'AppendBlob', 'content-type': 'text/plain' })).status).toBe(403);
      await a.createAppend('t/2.live/log', 'text/plain');
      expect(await a.readRange('t/2.live/log', 0, 100)).toEqual({ body: Buffer.alloc(0), size: 0 });
      const append = url.replace('?', '?comp=appendblock&');
      expect((await sasFetch(storage, 'PUT', append, Buffer.from('line one\n'))).status).toBe(201);
      expect((await sasFetch(storage, 'PUT', append, Buffer.from('line two\n'))).status).toBe(201);
      expect((await sasFetch(storage, 'GET', url)).status).toBe(403);
      expect(await a.readRange('t/2.live/log', 0, 100)).toEqual({ body: Buffer.from('line one\nline two\n'), size: 18 });
      expect(await a.readRange('t/2.live/log', 9, 4)).toEqual({ body: Buffer.from('line'), size: 18 });
      expect(await a.readRange('t/2.live/log', 18, 100)).toEqual({ body: Buffer.alloc(0), size: 18 });
      expect(await a.readRange('t/2.live/missing', 0, 100)).toBeUndefined();
      // createAppend again (a retried createLiveLog) keeps what is there.
      await a.createAppend('t/2.live/log', 'text/plain');
      expect((await a.readRange('t/2.live/log', 0, 100))?.size).toBe(18);
      expect((await sasFetch(storage, 'PUT', url, undefined, { 'x-ms-blob-type': 'AppendBlob' })).status).toBe(403);
    });

    test('seal: appends refused, reads and delete still work; a missing or sealed blob is fine', async () => {
      const a = storage.artifacts;
      const url = a.appendUrl('t/3.live/log', new Date(Date.now() + 600_000));
      await a.createAppend('t/3.live/log', 'text/plain');
      const append = url.replace('?', '?comp=appendblock&');
      expect((await sasFetch(storage, 'PUT', append, Buffer.from('before\n'))).status).toBe(201);
      await a.seal('t/3.live/log');
      await a.seal('t/3.live/log');
      await a.seal('t/3.live/missing');
      expect((await sasFetch(storage, 'PUT', append, Buffer.from('after\n'))).status).toBe(412);
      expect(await a.readRange('t/3.live/log', 0, 100)).toEqual({ body: Buffer.from('before\n'), size: 7 });
      await a.delete('t/3.live/log');
      expect(await a.readRange('t/3.live/log', 0, 100)).toBeUndefined();
    });
  });
});

describe('memory adapter only', () => {
  test('its clock drives leases and time to live', async () => {
    let now = Date.parse('2026-01-01T00:00:00Z');
    const s = new MemoryStorage(prefix(), { now: () => now });
    await s.ensureAll();
    const q = s.trigger('claim');
    await q.put({ a: 1 }, { visibilityS: 600, ttlS: 3600 });
    expect(await q.receive(1, 30)).toEqual([]);
    now += 600_000;
    const [m] = await q.receive(1, 30);
    expect(m.insertedOn!.toJSON()).toBe('2026-01-01T00:00:00.000Z');
    now += 3600_000;
    expect(await q.approximateCount()).toBe(0);
  });
});
