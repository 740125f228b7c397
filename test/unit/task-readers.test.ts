/**
 * Readers of the task tables that must not take one page as the whole answer: Azure may answer a
 * page of one row with no rows and a continuation (a query out of its time slice).
 */
import { MemoryStorage } from '../../shared/storage/memory';
import { encodeKey } from '../../shared/storage/keys';
import { isBlocked, reqKey } from '../../shared/lifecycle/dependencies';
import { waitersOf } from '../../shared/tasks/concurrency-keys';
import type { TaskDeps } from '../../shared/tasks/ports';
import { emptyPagesStorage } from '../helpers/empty-pages';

async function deps(): Promise<{ storage: MemoryStorage; d: TaskDeps }> {
  const storage = new MemoryStorage('rd');
  await storage.ensureAll();
  return { storage, d: { storage: emptyPagesStorage(storage) } as unknown as TaskDeps };
}

test('a task with a requirement left is blocked, though the first page of its requirements is empty', async () => {
  const { storage, d } = await deps();
  expect(await isBlocked(d, 'dependent')).toBe(false);
  await storage.table('TaskDeps').insert({ partitionKey: 'dependent', rowKey: reqKey('required', 'dependent') });
  expect(await isBlocked(d, 'dependent')).toBe(true);
});

test("a concurrency key's waiters are read through empty pages", async () => {
  const { storage, d } = await deps();
  for (const taskId of ['a', 'b', 'c'])
    await storage
      .table('ConcurrencyKeys')
      .insert({ partitionKey: encodeKey('k'), rowKey: `w~2~2026-01-01~${taskId}`, taskId, runId: 0, priority: 'low', created: '2026-01-01' });
  expect((await waitersOf(d, 'k', 10)).map((w) => w.taskId)).toEqual(['a', 'b', 'c']);
  expect((await waitersOf(d, 'k', 2)).map((w) => w.taskId)).toEqual(['a', 'b']);
});
