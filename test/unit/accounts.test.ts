/**
 * Placement over several data accounts (shared/storage/accounts.ts), on in-memory accounts:
 * jump hashing moves nothing between old accounts, the recorded generations only grow, and data
 * written before an account was added is still found.
 */
import { AccountsStorage, AccountRoots, jumpHash, placements, recordGenerations } from '../../shared/storage/accounts';
import { MemoryStorage } from '../../shared/storage/memory';
import { decodeMessage } from '../../shared/storage/port';

const roots: AccountRoots = {
  task: (taskId) => ({ table: 'Tasks', pk: taskId, rk: `task~${taskId}` }),
};
const keys = Array.from({ length: 20_000 }, (_, i) => `key-${i}`);
/** A key whose placement with `n` accounts is `account`. */
const keyOn = (account: number, n: number, not: string[] = []) => keys.find((k) => jumpHash(k, n) === account && !not.includes(k))!;

describe('jump hash', () => {
  test('adding an account only moves keys to it, about 1/n of them', () => {
    for (const n of [1, 2, 3, 7]) {
      let moved = 0;
      for (const k of keys) {
        const before = jumpHash(k, n);
        const after = jumpHash(k, n + 1);
        if (after !== before) {
          expect(after).toBe(n);
          moved++;
        }
      }
      expect(moved / keys.length).toBeGreaterThan(0.9 / (n + 1));
      expect(moved / keys.length).toBeLessThan(1.1 / (n + 1));
    }
  });

  test('spreads keys evenly', () => {
    const counts = [0, 0, 0, 0];
    for (const k of keys) counts[jumpHash(k, 4)]++;
    for (const c of counts) expect(Math.abs(c - keys.length / 4)).toBeLessThan(keys.length * 0.03);
  });

  test('a key has one placement per generation that moved it, newest first', () => {
    const k = keyOn(2, 3);
    expect(placements(k, [3])).toEqual([2]);
    expect(placements(k, [2, 3])).toEqual([2, jumpHash(k, 2)]);
    const stay = keyOn(0, 3);
    expect(placements(stay, [1, 2, 3])).toEqual([0]);
  });
});

describe('recorded generations', () => {
  const mem = () => Array.from({ length: 3 }, () => new MemoryStorage('acc'));

  test('a fresh deployment starts with every account; appending adds a generation; dropping or reordering stops start-up', async () => {
    const [a] = mem();
    await a.ensureAll();
    const t0 = new Date('2026-01-01T00:00:00Z');
    const t1 = new Date('2026-02-01T00:00:00Z');
    expect(await recordGenerations(a, ['A', 'B'], t0)).toEqual({ counts: [2], added: [t0.toJSON()] });
    expect(await recordGenerations(a, ['A', 'B'], t1)).toEqual({ counts: [2], added: [t0.toJSON()] });
    expect(await recordGenerations(a, ['A', 'B', 'C'], t1)).toEqual({ counts: [2, 3], added: [t0.toJSON(), t1.toJSON()] });
    await expect(recordGenerations(a, ['A', 'C', 'B'])).rejects.toThrow(/only be appended/);
    await expect(recordGenerations(a, ['A', 'B'])).rejects.toThrow(/only be appended/);
    expect((await recordGenerations(a, ['A', 'B', 'C'])).counts).toEqual([2, 3]);
  });

  test('a deployment with data and no record began with one account', async () => {
    const [a] = mem();
    await a.ensureAll();
    await a.table('Tasks').insert({ partitionKey: 'x', rowKey: 'task~x' });
    expect((await recordGenerations(a, ['A', 'B'])).counts).toEqual([1, 2]);
  });
});

describe('routing', () => {
  async function deployment(accounts: MemoryStorage[]): Promise<AccountsStorage> {
    const s = new AccountsStorage(accounts, roots, { ids: accounts.map((_, i) => `acc${i}`) });
    await s.ensureAll();
    return s;
  }

  test('a task written with one account is found after a second is added; new tasks go to both', async () => {
    const [a, b] = [new MemoryStorage('acc'), new MemoryStorage('acc')];
    await a.ensureAll();
    // Written when the deployment had one account, by a key that two accounts place on the second.
    const old = keyOn(1, 2);
    await a.table('Tasks').insert({ partitionKey: old, rowKey: `task~${old}`, v: 'old' });
    await a.table('Artifacts').insert({ partitionKey: `${old}-0`, rowKey: 'public!2flog', v: 'art' });
    const s = await deployment([a, b]);
    expect(s.generations).toEqual([1, 2]);

    expect((await s.table('Tasks').get(old, `task~${old}`))?.v).toBe('old');
    expect((await s.table('Artifacts').get(`${old}-0`, 'public!2flog'))?.v).toBe('art');
    // Later writes of the old task stay with it.
    await s.table('Tasks').insert({ partitionKey: old, rowKey: 'h~1', v: 'history' });
    expect(await a.table('Tasks').get(old, 'h~1')).toBeDefined();
    expect(await b.table('Tasks').get(old, 'h~1')).toBeUndefined();

    // A new task the second account's placement takes lands there, as does everything keyed by it.
    const fresh = keyOn(1, 2, [old]);
    await s.table('Tasks').insert({ partitionKey: fresh, rowKey: `task~${fresh}` });
    await s.table('TaskDeps').insert({ partitionKey: fresh, rowKey: 'd-x' });
    expect(await b.table('Tasks').get(fresh, `task~${fresh}`)).toBeDefined();
    expect(await b.table('TaskDeps').get(fresh, 'd-x')).toBeDefined();
    expect(await a.table('Tasks').get(fresh, `task~${fresh}`)).toBeUndefined();
    const first = keyOn(0, 2);
    await s.table('Tasks').insert({ partitionKey: first, rowKey: `task~${first}` });
    expect(await a.table('Tasks').get(first, `task~${first}`)).toBeDefined();
  });

  test('global tables stay on the first account; a query across task partitions is refused', async () => {
    const [a, b] = [new MemoryStorage('acc'), new MemoryStorage('acc')];
    const s = await deployment([a, b]);
    for (let i = 0; i < 20; i++) await s.table('Clients').insert({ partitionKey: `c${i}`, rowKey: 'client' });
    expect((await a.table('Clients').page({}, 100)).items).toHaveLength(20);
    expect((await b.table('Clients').page({}, 100)).items).toHaveLength(0);
    expect((await s.table('Expiry').page({ partitionKey: { le: '9999' } }, 100)).items).toHaveLength(0);
    await expect(s.table('Tasks').page({ partitionKey: { ge: 'a' } }, 10)).rejects.toThrow(/span accounts/);
    // Artifacts' own `~expires~` index partitions are global.
    await s.table('Artifacts').upsert({ partitionKey: '~expires~2030-01-01~0', rowKey: 'r' });
    expect((await s.table('Artifacts').page({ partitionKey: { ge: '~expires~' } }, 10)).items).toHaveLength(1);
  });

  test('trigger messages go to their task account and come back from all of them with the account in the id', async () => {
    const [a, b] = [new MemoryStorage('acc'), new MemoryStorage('acc')];
    const s = await deployment([a, b]);
    const t0 = keyOn(0, 2);
    const t1 = keyOn(1, 2);
    const p0 = await s.trigger('claim').put({ taskId: t0 });
    const p1 = await s.trigger('claim').put({ taskId: t1 });
    expect(p0.messageId).not.toMatch(/@/);
    expect(p1.messageId).toMatch(/@1$/);
    expect(await a.trigger('claim').approximateCount()).toBe(1);
    expect(await b.trigger('claim').approximateCount()).toBe(1);
    // A message put and deleted by its ref (how claim triggers are dropped).
    await s.trigger('claim').delete(p1.messageId, p1.popReceipt);
    expect(await b.trigger('claim').approximateCount()).toBe(0);
    await s.trigger('claim').put({ taskId: t1 });
    const got = await s.trigger('claim').receive(32, 30);
    expect(got.map((m) => decodeMessage<{ taskId: string }>(m)!.taskId).sort()).toEqual([t0, t1].sort());
    for (const m of got) await s.trigger('claim').delete(m.messageId, m.popReceipt);
    expect(await s.trigger('claim').approximateCount()).toBe(0);
  });

  test('after an account is added, a task queue it took over is still drained at its old account until old hints expire', async () => {
    const [a, b] = [new MemoryStorage('acc'), new MemoryStorage('acc')];
    await a.ensureAll();
    await a.table('Tasks').insert({ partitionKey: 'x', rowKey: 'task~x' }); // an existing one-account deployment
    const base = Array.from(
      { length: 500 },
      (_, i) =>
        `acc-${String(i)
          .padStart(26, 'a')
          .replace(/\d/g, (d) => 'bcdefghijk'[Number(d)])}`,
    ).find((k) => jumpHash(k, 2) === 1)!;
    const name = `${base}-1`;
    await a.queueNamed(name, 'pending').create();
    await a.queueNamed(name, 'pending').put({ taskId: 'old' });
    let now = new Date();
    const s = new AccountsStorage([a, b], roots, { ids: ['acc0', 'acc1'], hintLifetimeMs: 3600_000, now: () => now });
    await s.ensureAll();
    const q = s.queueNamed(name, 'pending');
    await q.create();
    await q.put({ taskId: 'new' });
    expect(await b.queueNamed(name, 'pending').approximateCount()).toBe(1);
    const got = await q.receive(32, 30);
    expect(got.map((m) => decodeMessage<{ taskId: string }>(m)!.taskId).sort()).toEqual(['new', 'old']);
    for (const m of got) await q.delete(m.messageId, m.popReceipt);
    expect(await a.queueNamed(name, 'pending').approximateCount()).toBe(0);
    expect(await b.queueNamed(name, 'pending').approximateCount()).toBe(0);
    // Once every hint put before the change has expired, only the new account is read.
    now = new Date(Date.now() + 2 * 3600_000);
    expect(s.queueNamed(name, 'pending')).toBe(b.queueNamed(name, 'pending'));
  });

  test('pending queues of one task queue sit on one account, with their endpoint and SAS from it', async () => {
    const [a, b] = [new MemoryStorage('acc'), new MemoryStorage('acc')];
    const s = await deployment([a, b]);
    const base = 'acc-' + 'a'.repeat(26);
    const levels = [1, 2, 7].map((l) => s.queueNamed(`${base}-${l}`, 'pending'));
    const on = jumpHash(base, 2);
    for (const q of levels) expect(q).toBe([a, b][on].queueNamed(q.name, 'pending'));
    expect(s.queueNamed('acc-sub-0123', 'subscription')).toBe(a.queueNamed('acc-sub-0123', 'subscription'));
  });
});
