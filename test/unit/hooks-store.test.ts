/**
 * The hook store's reads on a table that pages as Azure may (an empty page with a continuation
 * before every page): the scheduler's due query filters the whole table, so its pages often come
 * back empty.
 */
import { HookStore, type HookRecord } from '../../shared/hooks/store';
import { MemoryStorage } from '../../shared/storage/memory';
import { emptyPagesStorage } from '../helpers/empty-pages';

const hook = (hookGroupId: string, hookId: string, nextScheduledDate: string): HookRecord => ({
  definition: {
    hookGroupId,
    hookId,
    metadata: { name: hookId, description: '', owner: 'o@example.com', emailOnError: false },
    schedule: nextScheduledDate ? ['0 0 * * * *'] : [],
    task: {},
    triggerSchema: {},
    bindings: [],
  },
  token: 't',
  nextScheduledDate,
  lastFire: { result: 'no-fire' },
});

test('due hooks and hook groups are read through empty pages', async () => {
  const storage = new MemoryStorage('hk');
  await storage.ensureAll();
  const writer = new HookStore(storage);
  await writer.insert(hook('g1', 'later', '2026-11-25T12:00:00.000Z'));
  await writer.insert(hook('g2', 'due', '2026-11-25T09:00:00.000Z'));
  await writer.insert(hook('g3', 'unscheduled', ''));
  await writer.insert(hook('g3', 'due-too', '2026-11-25T08:00:00.000Z'));
  const store = new HookStore(emptyPagesStorage(storage, { pageSize: 1 }));
  const due = await store.due(new Date('2026-11-25T10:00:00.000Z'), 10);
  expect(due.map((h) => h.definition.hookId).sort()).toEqual(['due', 'due-too']);
  expect(await store.due(new Date('2026-11-25T10:00:00.000Z'), 1)).toHaveLength(1);
  expect(await store.groups()).toEqual(['g1', 'g2', 'g3']);
  expect((await store.list('g3')).map((h) => h.definition.hookId)).toEqual(['due-too', 'unscheduled']);
});
