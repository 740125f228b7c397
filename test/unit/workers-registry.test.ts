/**
 * The worker registry on Azure's paging: listWorkers answers the workers there are on its first
 * page, although a page of the Workers table may come back empty with a continuation; and a
 * worker's recentTasks writes, at most one per interval.
 */
import { WorkerRegistry } from '../../shared/ops/workers';
import { MemoryStorage } from '../../shared/storage/memory';
import { emptyPagesStorage } from '../helpers/empty-pages';

test('listWorkers reads through short and empty pages: the first answer lists every worker, limit 1 pages through both', async () => {
  const storage = new MemoryStorage('wr');
  await storage.ensureAll();
  const now = () => new Date();
  const writer = new WorkerRegistry(storage, now);
  await writer.seen('prov/wt', 'wg', 'a');
  await writer.seen('prov/wt', 'wg', 'b');
  const registry = new WorkerRegistry(emptyPagesStorage(storage, { pageSize: 1 }), now);
  // Storage answers one row a page, after an empty one: the first answer still holds both.
  const all = await registry.list('prov/wt', undefined, 10);
  expect(all.workers.map((w) => w.workerId)).toEqual(['a', 'b']);
  const first = await registry.list('prov/wt', false, 1);
  expect(first.workers.map((w) => w.workerId)).toEqual(['a']);
  const rest = await registry.list('prov/wt', false, 1, first.continuation);
  expect(rest.workers.map((w) => w.workerId)).toEqual(['b']);
});

test("a worker's claims within the recentTasks interval wait in memory and go out together when it ends, with no further claim", async () => {
  jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
  try {
    const storage = new MemoryStorage('wr');
    await storage.ensureAll();
    const INTERVAL_MS = 5_000;
    const registry = new WorkerRegistry(storage, () => new Date(), INTERVAL_MS);
    await registry.seen('prov/wt', 'wg', 'w');
    const stored = async () => JSON.parse((await registry.getRow('prov/wt', 'wg', 'w'))?.recentTasks ?? 'null');
    const run = (taskId: string) => ({ taskId, runId: 0 });
    await registry.claimed('prov/wt', 'wg', 'w', [run('A')]);
    expect(await stored()).toEqual([run('A')]);
    await jest.advanceTimersByTimeAsync(1_000);
    await registry.claimed('prov/wt', 'wg', 'w', [run('B')]);
    await registry.claimed('prov/wt', 'wg', 'w', [run('C')]);
    await jest.advanceTimersByTimeAsync(INTERVAL_MS - 1_000 - 1);
    expect(await stored()).toEqual([run('A')]);
    await jest.advanceTimersByTimeAsync(1);
    expect(await stored()).toEqual([run('A'), run('B'), run('C')]);
  } finally {
    jest.useRealTimers();
  }
});
