/**
 * Trigger queues spread over TRIGGER_SHARDS storage queues (shared/storage/trigger-shards.ts): a
 * message goes to its task's shard, one put is one storage call, a receive reads every shard, and
 * a ref's delete or rearm reaches the shard the message is in.
 */
import { MemoryStorage } from '../../shared/storage/memory';
import { decodeMessage, TRIGGER_SHARDS } from '../../shared/storage/port';
import { triggerShardNames, triggerShardOf } from '../../shared/storage/trigger-shards';

test('claim triggers of many tasks land in every shard, one storage call each, and the reaper reads them all', async () => {
  const storage = new MemoryStorage('shardtest');
  await storage.ensureAll();
  const q = storage.trigger('claim');
  const names = triggerShardNames('shardtest', 'claim');
  expect(names).toHaveLength(TRIGGER_SHARDS);
  const before = storage.meter.total;
  const refs = [];
  for (let i = 0; i < 64; i++) refs.push(await q.put({ taskId: `task${i}`, runId: 0 }));
  expect(storage.meter.total - before).toBe(64);
  // Every shard took some: no one storage queue carries a trigger queue's whole rate.
  const perShard = await Promise.all(names.map((n) => storage.queueNamed(n, 'claim').approximateCount()));
  expect(perShard.every((c) => c > 0 && c < 64)).toBe(true);
  expect(perShard[triggerShardOf({ taskId: 'task0' })]).toBeGreaterThan(0);

  // A ref from put deletes from its own shard; the rest are all received, from every shard.
  await q.delete(refs[5].messageId, refs[5].popReceipt);
  const got = [];
  for (let pass = 0; pass < 4; pass++) got.push(...(await q.receive(32, 30)));
  expect(new Set(got.map((m) => decodeMessage<{ taskId: string }>(m)!.taskId))).toEqual(new Set(refs.map((_, i) => `task${i}`).filter((t) => t !== 'task5')));
  // A received message's id finds its shard for delete and rearm.
  const rearmed = await q.rearm(got[0].messageId, got[0].popReceipt, { taskId: 'moved' }, 0);
  expect(rearmed).toBeDefined();
  for (const m of got.slice(1)) await q.delete(m.messageId, m.popReceipt);
  expect(await q.approximateCount()).toBe(1);
  expect((await q.receive(32, 30)).map((m) => decodeMessage<{ taskId: string }>(m)!.taskId)).toEqual(['moved']);
});

test('a resolution net of several tasks goes to its first member shard', () => {
  expect(triggerShardOf({ batch: [{ taskId: 'a' }, { taskId: 'b' }] })).toBe(triggerShardOf({ taskId: 'a' }));
});
