/**
 * The faithful storage mode (shared/storage/faults.ts) and the in-memory adapter's Azure limits:
 * what Azure does and Azurite does not, deterministically from a seed.
 */
import { FaultSettings, parseFaults, loadConfig } from '../../shared/config';
import { FaultyStorage, clockSkewMs } from '../../shared/storage/faults';
import { MemoryStorage } from '../../shared/storage/memory';
import { Entity, StorageConflict, StorageLimit, Table } from '../../shared/storage/port';
import { Sweep } from '../../shared/storage/counter';

const settings = (s: string): FaultSettings => parseFaults(s)!;
const row = (pk: string, rk: string, props: Record<string, unknown> = {}): Entity => ({ partitionKey: pk, rowKey: rk, ...props });

async function faulty(s: string, sleep?: (ms: number) => Promise<void>): Promise<FaultyStorage> {
  const f = new FaultyStorage(new MemoryStorage('faults'), settings(s), { sleep });
  await f.ensureAll();
  return f;
}

async function failure(p: Promise<unknown>): Promise<any> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected the call to fail');
}

describe('QUEUE_STORAGE_FAULTS', () => {
  test('accepts the documented example as written', () => {
    expect(parseFaults('seed=7 pages=0.3 ambiguous=0.05 throttle=0.02 skew-ms=2000')).toEqual({
      seed: 7,
      pages: 0.3,
      ambiguous: 0.05,
      throttle: 0.02,
      lostReceive: 0,
      skewMs: 2000,
      instance: 0,
      retries: 3,
      backoffMs: 800,
    });
    expect(parseFaults('')).toBeUndefined();
    expect(parseFaults(undefined)).toBeUndefined();
  });

  test.each([['pages=1.5'], ['ambiguous=x'], ['seed=-1'], ['skew-ms=2.5'], ['typo=1'], ['pages']])(
    'a bad value (%s) stops start-up naming the setting',
    (bad) => {
      const env = {
        QUEUE_STORAGE_CONNECTION: 'memory:',
        QUEUE_PUBLIC_URL: 'http://localhost:1',
        QUEUE_ROOT_ACCESS_TOKEN: 'x'.repeat(22),
        QUEUE_TOKEN_ENCRYPTION_KEY: Buffer.alloc(32).toString('base64'),
        QUEUE_STORAGE_FAULTS: `seed=7 ${bad}`,
      };
      expect(() => loadConfig(env)).toThrow(/setting QUEUE_STORAGE_FAULTS: /);
    },
  );

  test('two instances of one seed get different clock offsets within skew-ms', () => {
    const a = clockSkewMs(settings('seed=7 skew-ms=2000 instance=0'));
    const b = clockSkewMs(settings('seed=7 skew-ms=2000 instance=1'));
    expect(a).not.toBe(b);
    expect(Math.abs(a)).toBeLessThanOrEqual(2000);
    expect(Math.abs(b)).toBeLessThanOrEqual(2000);
    expect(clockSkewMs(settings('seed=7 skew-ms=2000 instance=0'))).toBe(a);
  });
});

/** Every row of a query, page by page, and how many pages were empty but continued. */
async function readAll(t: Table, q: Parameters<Table['page']>[0], limit: number) {
  const keys: string[] = [];
  let empty = 0;
  let pages = 0;
  let continuation: string | undefined;
  do {
    const page = await t.page(q, limit, continuation);
    if (page.items.length === 0 && page.continuation) empty++;
    keys.push(...page.items.map((r) => `${r.partitionKey}/${r.rowKey}`));
    continuation = page.continuation;
    pages++;
  } while (continuation);
  return { keys, empty, pages };
}

describe('pages', () => {
  test('short and empty pages with a continuation; read to the end they hold every row once, in order', async () => {
    const s = await faulty('seed=3 pages=0.6');
    const t = s.table('Indexes');
    const all: string[] = [];
    for (let i = 0; i < 40; i++) {
      const rk = String(i).padStart(3, '0');
      await t.insert(row('p', rk));
      all.push(`p/${rk}`);
    }
    const got = await readAll(t, { partitionKey: 'p' }, 10);
    expect(got.keys).toEqual(all);
    expect(got.empty).toBeGreaterThan(0);
    expect(got.pages).toBeGreaterThan(4);
    // A projection without the keys still continues at the right row.
    const projected: unknown[] = [];
    let continuation: string | undefined;
    do {
      const page = await t.page({ partitionKey: 'p', select: ['RowKey'] }, 7, continuation);
      projected.push(...page.items.map((r) => r.rowKey));
      expect(page.items.every((r) => r.partitionKey === undefined)).toBe(true);
      continuation = page.continuation;
    } while (continuation);
    expect(projected).toEqual(all.map((k) => k.slice(2)));
  });

  test('a cross-partition query continues at every partition boundary', async () => {
    const s = await faulty('seed=1 pages=0.000001');
    const t = s.table('Indexes');
    for (const pk of ['a', 'b', 'c']) for (const rk of ['1', '2']) await t.insert(row(pk, rk));
    const first = await t.page({}, 1000);
    expect(first.items.map((r) => r.partitionKey)).toEqual(['a', 'a']);
    expect(first.continuation).toBeDefined();
    expect((await readAll(t, {}, 1000)).keys).toEqual(['a/1', 'a/2', 'b/1', 'b/2', 'c/1', 'c/2']);
  });

  test('the same seed and calls give the same pages', async () => {
    const runs = await Promise.all(
      [1, 2].map(async () => {
        const s = await faulty('seed=11 pages=0.5');
        const t = s.table('Indexes');
        for (let i = 0; i < 30; i++) await t.insert(row('p', String(i).padStart(2, '0')));
        const sizes: number[] = [];
        let continuation: string | undefined;
        do {
          const page = await t.page({ partitionKey: 'p' }, 8, continuation);
          sizes.push(page.items.length);
          continuation = page.continuation;
        } while (continuation);
        return sizes;
      }),
    );
    expect(runs[0]).toEqual(runs[1]);
  });
});

describe('re-seeding: the draws a crash sweep holds still', () => {
  const SETTINGS = 'seed=5 pages=0.5 ambiguous=0.3 throttle=0.2 retries=6 backoff-ms=0';

  /** A sweep attempt: writes to Tasks and a paged read of Indexes, with `between` run before each call. */
  async function attempt(s: FaultyStorage, between: () => Promise<unknown>) {
    const before = { ...s.plan.taken };
    const sizes: number[] = [];
    for (let i = 0; i < 6; i++) {
      await between();
      await s.table('Tasks').upsert(row('t', String(i), { n: i }));
    }
    let continuation: string | undefined;
    do {
      await between();
      const page = await s.table('Indexes').page({ partitionKey: 'p' }, 3, continuation);
      sizes.push(page.items.length);
      continuation = page.continuation;
    } while (continuation);
    const taken = Object.fromEntries(Object.entries(s.plan.taken).map(([k, v]) => [k, v - before[k as keyof typeof before]]));
    return { sizes, taken };
  }

  async function store(): Promise<FaultyStorage> {
    const s = await faulty(SETTINGS);
    for (let i = 0; i < 30; i++) await s.inner.table('Indexes').insert(row('p', String(i).padStart(2, '0')));
    return s;
  }
  const nothing = async () => undefined;
  /** Background work under other labels: reads of Workers, puts to a queue. */
  const background = (s: FaultyStorage) => async () => {
    await s.table('Workers').get('w', 'x');
    await s.queueNamed(`${s.prefix}-bg`, 'bg').put({ hello: 1 });
  };

  test('after each re-seed the same calls meet the same faults', async () => {
    const s = await store();
    await s.queueNamed(`${s.prefix}-bg`, 'bg').create();
    s.plan.reseed();
    const first = await attempt(s, nothing);
    // Other calls in between (a recovery) move nothing once the plan is re-seeded.
    await attempt(s, background(s));
    s.plan.reseed();
    const again = await attempt(s, nothing);
    expect(again).toEqual(first);
    // The attempt meets faults of each kind, so holding them still is not vacuous.
    expect(first.taken.pages).toBeGreaterThan(0);
    expect(first.taken.ambiguous + first.taken.throttled).toBeGreaterThan(0);
    expect(first.sizes.some((n) => n < 3)).toBe(true);
  });

  test("calls under other labels during an attempt do not shift the attempt's draws", async () => {
    const s = await store();
    await s.queueNamed(`${s.prefix}-bg`, 'bg').create();
    s.plan.reseed();
    const quiet = await attempt(s, nothing);
    s.plan.reseed();
    const busy = await attempt(s, background(s));
    expect(busy.sizes).toEqual(quiet.sizes);
    expect(busy.taken.pages).toBe(quiet.taken.pages);
  });

  test('without a re-seed, one stream: the same calls with background work between meet other faults', async () => {
    const [a, b] = [await store(), await store()];
    for (const s of [a, b]) await s.queueNamed(`${s.prefix}-bg`, 'bg').create();
    const quiet = await attempt(a, nothing);
    const busy = await attempt(b, background(b));
    expect(busy.sizes).not.toEqual(quiet.sizes);
  });
});

/** A sweep counts the calls of the invocation that armed it (shared/storage/counter.ts Sweep): the test is one. */
const armedHere = (fn: () => Promise<void>) => () => Sweep.run(fn);

describe('ambiguous writes: applied, then the retry meets its own success', () => {
  /** The next write applies and its first answer is lost; the retry goes through (what the ambiguity sweep arms). */
  async function onceAmbiguous(): Promise<FaultyStorage> {
    const s = await faulty('seed=1 backoff-ms=0');
    s.plan.ambiguousAt(1);
    return s;
  }

  test(
    'an insert retried gets 409 though the row is stored',
    armedHere(async () => {
      const s = await onceAmbiguous();
      const err = await failure(s.table('Tasks').insert(row('a', 'x', { v: 1 })));
      expect(err).toBeInstanceOf(StorageConflict);
      expect(err.reason).toBe('exists');
      expect(await s.inner.table('Tasks').get('a', 'x')).toMatchObject({ v: 1 });
    }),
  );

  test(
    'an If-Match update retried gets 412 though it applied; a delete retried answers missing',
    armedHere(async () => {
      const s = await onceAmbiguous();
      const etag = await s.inner.table('Tasks').insert(row('a', 'x', { v: 1 }));
      const err = await failure(s.table('Tasks').update(row('a', 'x', { v: 2 }), etag));
      expect(err.reason).toBe('etag');
      expect(await s.inner.table('Tasks').get('a', 'x')).toMatchObject({ v: 2 });
      s.plan.ambiguousAt(1);
      expect(await s.table('Tasks').delete('a', 'x')).toBe(false);
      expect(await s.inner.table('Tasks').get('a', 'x')).toBeUndefined();
    }),
  );

  test(
    'an entity-group transaction retried meets its own success as a conflict',
    armedHere(async () => {
      const s = await onceAmbiguous();
      const err = await failure(
        s.table('Tasks').transact([
          { op: 'create', entity: row('t', '1') },
          { op: 'upsert', entity: row('t', '2') },
        ]),
      );
      expect(err.reason).toBe('exists');
      expect(await s.inner.table('Tasks').get('t', '2')).toBeDefined();
    }),
  );

  test(
    'a queue put retried leaves the message twice; an update retried holds a stale receipt',
    armedHere(async () => {
      const s = await onceAmbiguous();
      const q = s.trigger('deadline');
      await q.put({ n: 1 });
      expect(await s.inner.trigger('deadline').approximateCount()).toBe(2);
      expect(s.plan.duplicated).toEqual([{ queue: expect.stringMatching(/deadline/), body: { n: 1 } }]);
      const [m] = await s.inner.trigger('deadline').receive(1, 30);
      s.plan.ambiguousAt(1);
      expect(await q.rearm(m.messageId, m.popReceipt, { n: 2 }, 0)).toBeUndefined();
    }),
  );

  test(
    'when every retry is ambiguous the caller gets the transient error, and the write applied',
    armedHere(async () => {
      const s = await faulty('seed=1 ambiguous=1 retries=0');
      const err = await failure(s.table('Tasks').upsert(row('a', 'y')));
      expect([408, 500, 503]).toContain(err.statusCode);
      expect(await s.inner.table('Tasks').get('a', 'y')).toBeDefined();
    }),
  );
});

describe('lost receives: the lease took effect, the answer did not arrive', () => {
  test('the retry gets other messages; the lost ones reappear when their lease runs out, dequeued once more, and none is lost', async () => {
    const s = await faulty('seed=1 backoff-ms=0');
    const q = s.queueNamed('fpending1', 'pending');
    await q.create();
    for (const n of [1, 2, 3]) await q.put({ n });
    s.plan.loseReceives('pending');
    const got = await q.receive(2, 60);
    // The first two were leased by the lost attempt; the retry got the third.
    expect(got.map((m) => JSON.parse(Buffer.from(m.messageText, 'base64').toString()).n)).toEqual([3]);
    expect(s.plan.taken.lostReceives).toBe(1);
    expect(await q.receive(32, 60)).toEqual([]);
    // Their lease runs out (without waiting for it here): back, with the lost dequeue counted.
    expect(await s.plan.expireLostLeases()).toBe(2);
    const back = await q.receive(32, 60);
    expect(back.map((m) => [JSON.parse(Buffer.from(m.messageText, 'base64').toString()).n, m.dequeueCount])).toEqual([
      [1, 2],
      [2, 2],
    ]);
    expect(s.plan.extra.get('pending.get')).toBe(1);
  });

  test('lost-receive=p loses receives that leased something, from the seed; empty receives are never lost', async () => {
    const s = await faulty('seed=3 lost-receive=1 retries=0');
    const q = s.queueNamed('fpending2', 'pending');
    await q.create();
    expect(await q.receive(1, 60)).toEqual([]);
    await q.put({ n: 1 });
    const err = await failure(q.receive(1, 60));
    expect([408, 500, 503]).toContain(err.statusCode);
    expect(await s.inner.queueNamed('fpending2', 'pending').receive(1, 60)).toEqual([]);
  });
});

describe('blob writes of the artifact container', () => {
  test(
    'a commit, an upload and a copy retried after they applied meet their own success',
    armedHere(async () => {
      const s = await faulty('seed=1 backoff-ms=0');
      const a = s.artifacts;
      await a.putBlock('b/x', 'AAAA', Buffer.from('hello'));
      s.plan.ambiguousAt(1);
      expect(await a.commitBlocks('b/x', ['AAAA'], 'text/plain')).toBe(true);
      expect(s.plan.armedOps).toEqual(['artifacts.commit', 'artifacts.commit']); // applied, then sent again
      s.plan.ambiguousAt(1);
      await a.upload('b/y', Buffer.from('inline'), 'text/plain');
      s.plan.ambiguousAt(1);
      expect(await a.copyIfAbsent('b/y', 'b/z')).toEqual({ size: 6, copied: false });
      s.plan.disarm();
      expect((await a.download('b/x'))?.body.toString()).toBe('hello');
      expect((await a.download('b/z'))?.body.toString()).toBe('inline');
      expect([...s.plan.extra.keys()].sort()).toEqual(['artifacts.commit', 'artifacts.copy', 'artifacts.upload']);
    }),
  );
});

describe('throttling', () => {
  test('503 ServerBusy is retried with exponential back-off on the injected sleep, and surfaced only when retries run out', async () => {
    const slept: number[] = [];
    const s = await faulty('seed=1 throttle=1 retries=3 backoff-ms=800', async (ms) => void slept.push(ms));
    const err = await failure(s.table('Tasks').insert(row('a', 'x')));
    expect(err).toMatchObject({ statusCode: 503, code: 'ServerBusy' });
    expect(slept).toEqual([800, 1600, 3200]);
    // A throttled call never applied.
    expect(await s.inner.table('Tasks').get('a', 'x')).toBeUndefined();
    expect(s.plan.taken.throttled).toBe(4);
  });
});

describe("the in-memory adapter enforces Azure's limits with Azure's codes", () => {
  const limitOf = async (p: Promise<unknown>) => {
    const err = await failure(p);
    expect(err).toBeInstanceOf(StorageLimit);
    return err.code;
  };
  let s: MemoryStorage;
  beforeAll(async () => {
    s = new MemoryStorage('limits');
    await s.ensureAll();
  });

  test('entity size, property count, property size', async () => {
    const t = s.table('Tasks');
    const big = Buffer.alloc(60 * 1024);
    const props = Object.fromEntries(Array.from({ length: 18 }, (_, i) => [`c${i}`, big]));
    expect(await limitOf(t.insert(row('a', 'big', props)))).toBe('EntityTooLarge');
    const many = Object.fromEntries(Array.from({ length: 253 }, (_, i) => [`p${i}`, i]));
    expect(await limitOf(t.upsert(row('a', 'many', many)))).toBe('TooManyProperties');
    expect(await limitOf(t.insert(row('a', 's', { s: 'x'.repeat(32 * 1024 + 1) })))).toBe('PropertyValueTooLarge');
    expect(await limitOf(t.insert(row('a', 'b', { b: Buffer.alloc(64 * 1024 + 1) })))).toBe('PropertyValueTooLarge');
    await t.insert(row('a', 'ok', { s: 'x'.repeat(32 * 1024), b: Buffer.alloc(64 * 1024) }));
  });

  test('key characters and length', async () => {
    const t = s.table('Tasks');
    for (const bad of ['a/b', 'a\\b', 'a#b', 'a?b', 'a\u0001b', 'a\u007fb']) expect(await limitOf(t.insert(row(bad, 'x')))).toBe('OutOfRangeInput');
    expect(await limitOf(t.insert(row('a', 'k'.repeat(1025))))).toBe('KeyValueTooLarge');
    await t.insert(row('a', 'k'.repeat(1024)));
  });

  test('a transaction under 4 MiB', async () => {
    const t = s.table('Tasks');
    const chunky = (i: number) => row('tx', String(i), { a: Buffer.alloc(60 * 1024), b: Buffer.alloc(60 * 1024) });
    expect(await limitOf(t.transact(Array.from({ length: 40 }, (_, i) => ({ op: 'upsert' as const, entity: chunky(i) }))))).toBe('RequestBodyTooLarge');
    expect(await s.table('Tasks').get('tx', '0')).toBeUndefined();
  });

  test('a queue message of at most 64 KiB as sent', async () => {
    const q = s.trigger('claim');
    expect(await limitOf(q.put({ s: 'x'.repeat(49 * 1024) }))).toBe('MessageTooLarge');
    await q.put({ s: 'x'.repeat(47 * 1024) });
  });
});
