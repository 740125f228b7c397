/**
 * Pending shards without storage: the QUEUE_PENDING_SHARDS setting, placement of a task's hints,
 * queue names, and which account a shard's queue lives on.
 */
import { loadConfig, MAX_PENDING_SHARDS } from '../../shared/config';
import { PendingQueues } from '../../shared/tasks/pending';
import { MemoryStorage } from '../../shared/storage/memory';
import { jumpHash, queueHome } from '../../shared/storage/accounts';
import { emptyPagesStorage } from '../helpers/empty-pages';

const ENV = {
  QUEUE_STORAGE_CONNECTION: 'UseDevelopmentStorage=true',
  QUEUE_PUBLIC_URL: 'http://localhost:1',
  QUEUE_ROOT_ACCESS_TOKEN: 'x'.repeat(22),
  QUEUE_TOKEN_ENCRYPTION_KEY: Buffer.alloc(32).toString('base64'),
};

test('QUEUE_PENDING_SHARDS: a default, then <taskQueueId>=<n> overrides; anything else stops start-up', () => {
  expect(loadConfig(ENV).pendingShards).toEqual({ default: 1, byQueue: {} });
  expect(loadConfig({ ...ENV, QUEUE_PENDING_SHARDS: '4' }).pendingShards).toEqual({ default: 4, byQueue: {} });
  expect(loadConfig({ ...ENV, QUEUE_PENDING_SHARDS: ' 2  proj/busy=8\nproj/b-2=1 ' }).pendingShards).toEqual({
    default: 2,
    byQueue: { 'proj/busy': 8, 'proj/b-2': 1 },
  });
  for (const bad of ['0', '1.5', 'x', `${MAX_PENDING_SHARDS + 1}`, 'proj/busy=0', 'proj/busy=']) {
    expect(() => loadConfig({ ...ENV, QUEUE_PENDING_SHARDS: bad })).toThrow(/^setting QUEUE_PENDING_SHARDS: /);
  }
});

test('a task goes to the shard its id hashes to; shard 0 keeps the unsharded queue name', () => {
  const p = new PendingQueues(new MemoryStorage('acc'), 'key', { default: 3, byQueue: { 'p/one': 1 } });
  expect(p.shardCount('p/any')).toBe(3);
  expect(p.shardCount('p/one')).toBe(1);
  const ids = Array.from({ length: 300 }, (_, i) => `task${i}`);
  const shards = ids.map((id) => p.shardOf('p/any', id));
  expect(shards).toEqual(ids.map((id) => jumpHash(id, 3)));
  // Roughly even: each of three shards holds 100 +- 40 of 300.
  for (let s = 0; s < 3; s++) expect(Math.abs(shards.filter((x) => x === s).length - 100)).toBeLessThan(40);
  expect(ids.every((id) => p.shardOf('p/one', id) === 0)).toBe(true);

  const base = p.baseName('p/any');
  expect(p.queueName('p/any', 'highest')).toBe(`${base}-7`);
  expect(p.queueName('p/any', 'highest', 0)).toBe(`${base}-7`);
  expect(p.queueName('p/any', 'lowest', 2)).toBe(`${base}-1-2`);
  // Valid Azure queue names: 3-63 of [a-z0-9-], no double hyphen.
  expect(p.queueName('p/any', 'lowest', 15)).toMatch(/^(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/);
});

test('with several accounts, the shards of a task queue are placed apart; its levels stay with their shard', () => {
  const base = `acc-${'a'.repeat(26)}`;
  expect(queueHome(`${base}-3`)).toEqual({ kind: 'queue', key: base });
  expect(queueHome(`${base}-3-2`)).toEqual({ kind: 'queue', key: `${base}-2` });
  expect(queueHome(`${base}-7-2`)).toEqual(queueHome(`${base}-1-2`));
  expect(queueHome(`${base}-3-0`)).toEqual({ kind: 'global' });
  expect(queueHome('acc-claim')).toEqual({ kind: 'global' });
});

test('the used queues of a task queue are read to the end through empty pages', async () => {
  const storage = new MemoryStorage('acc');
  await storage.ensureAll();
  await new PendingQueues(storage, 'key').ensure('p/any', 'high', 0);
  await new PendingQueues(storage, 'key').ensure('p/any', 'low', 0);
  const p = new PendingQueues(emptyPagesStorage(storage), 'key');
  expect(await p.usedQueues('p/any')).toEqual([
    { priority: 'high', shard: 0 },
    { priority: 'low', shard: 0 },
  ]);
});
