/**
 * Crash safety of the index consumer: indexing a completed task fails after each of its storage
 * calls, then is delivered again; the entry, its namespaces and their expiry rows must all exist,
 * and an older completion delivered late must not replace it.
 */
import { startTestService, TestService } from '../helpers/service';
import { runningTask } from '../helpers/work';
import { sweeperFor } from '../helpers/crash';
import { indexCompletedTask, EXPIRY_KIND_NAMESPACE, EXPIRY_KIND_TASK } from '../../shared/index/index';
import { IndexStore } from '../../shared/index/store';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => svc?.close());

async function completed(routes: string[]) {
  const { taskId, wq } = await runningTask(svc, { routes, extra: { index: { rank: 1 } } });
  await wq.reportCompleted(taskId, 0);
  return (await svc.services.tasks.load(taskId))!;
}

test('indexCompletedTask crashed after any storage call converges on redelivery', async () => {
  const store = new IndexStore(svc.services.storage);
  const ops = await sweeperFor(svc)(async (faulty) => {
    const ns = `crash${Math.random().toString(36).slice(2, 8)}.builds.linux`;
    const older = await completed([`index.${ns}`]);
    const task = await completed([`index.${ns}`]);
    await faulty(() => indexCompletedTask(svc.services, task));
    await indexCompletedTask(svc.services, task); // redelivery
    await indexCompletedTask(svc.services, older); // an older completion, late
    expect((await store.getTask(ns))?.taskId).toBe(task.taskId);
    const [top, mid] = ns.split('.');
    expect(await store.getNamespace(top)).toBeDefined();
    expect(await store.getNamespace(`${top}.${mid}`)).toBeDefined();
    // Every row written has its expiry row, so the reaper will find it.
    const far = new Date(new Date(task.definition.expires).getTime() + 3 * 24 * 3600_000);
    const due = await svc.services.expiry.due(far, 1000);
    expect(due.some((r) => r.kind === EXPIRY_KIND_TASK && r.data.path === ns)).toBe(true);
    expect(due.some((r) => r.kind === EXPIRY_KIND_NAMESPACE && (r.data.paths as string[]).includes(`${top}.${mid}`))).toBe(true);
  });
  expect(ops).toEqual(expect.arrayContaining(['Expiry.upsert', 'IndexNamespaces.get', 'IndexNamespaces.insert', 'IndexTasks.insert']));
});
