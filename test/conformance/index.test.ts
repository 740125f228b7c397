/**
 * The Index service through taskcluster-client's `Index` class: insert, find, list (paged),
 * delete, rank rules, scopes, expiry by the reaper, completed tasks indexed from their routes and
 * findArtifactFromTask's redirect.
 */
import { startTestService, TestService, slugid, expectError } from '../helpers/service';
import { passTime, runningTask } from '../helpers/work';
import { indexCompletedTask } from '../../shared/index/index';
import { IndexStore } from '../../shared/index/store';

let svc: TestService;
let index: any;
beforeAll(async () => {
  svc = await startTestService();
  index = new svc.tc.Index({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
});
afterAll(async () => svc?.close());

const inAnHour = () => new Date(Date.now() + 3600_000).toJSON();
const uniqueNs = () => `proj${Math.random().toString(36).slice(2, 8)}`;

async function clientWith(scopes: string[]): Promise<any> {
  const clientId = `test/${Math.random().toString(36).slice(2, 8)}`;
  const c = await svc.auth().createClient(clientId, { expires: inAnHour(), description: 'index test', scopes });
  return new svc.tc.Index({ rootUrl: svc.rootUrl, credentials: { clientId, accessToken: c.accessToken }, retries: 0 });
}

/** A task that ran and completed, read back as the consumer receives it. */
async function completedTask(overrides: Record<string, unknown>) {
  const { taskId, wq } = await runningTask(svc, overrides);
  await wq.reportCompleted(taskId, 0);
  return { taskId, wq, record: (await svc.services.tasks.load(taskId))! };
}

test('insertTask, findTask, listTasks and listNamespaces level by level', async () => {
  const ns = uniqueNs();
  const taskId = slugid();
  const expires = inAnHour();
  const r = await index.insertTask(`${ns}.branch.main.latest`, { taskId, rank: 3, data: { rev: 'abc' }, expires });
  expect(r).toEqual({ namespace: `${ns}.branch.main.latest`, taskId, rank: 3, data: { rev: 'abc' }, expires });
  expect(await index.findTask(`${ns}.branch.main.latest`)).toEqual(r);

  const top = await index.listNamespaces(ns);
  expect(top.namespaces.map((n: any) => [n.namespace, n.name])).toEqual([[`${ns}.branch`, 'branch']]);
  expect((await index.listNamespaces(`${ns}.branch`)).namespaces.map((n: any) => n.namespace)).toEqual([`${ns}.branch.main`]);
  expect((await index.listNamespaces('')).namespaces.map((n: any) => n.name)).toContain(ns);
  expect((await index.listTasks(`${ns}.branch.main`)).tasks).toEqual([r]);
  expect((await index.listTasks(ns)).tasks).toEqual([]);

  await expectError(index.findTask(`${ns}.branch.main.nothing`), 404, 'ResourceNotFound');
  await expectError(index.findTask('bad..path'), 400);
});

test('a higher or equal rank replaces an entry; a lower rank does not', async () => {
  const ns = `${uniqueNs()}.latest`;
  const [a, b, c] = [slugid(), slugid(), slugid()];
  await index.insertTask(ns, { taskId: a, rank: 5, data: {}, expires: inAnHour() });
  expect((await index.insertTask(ns, { taskId: b, rank: 4, data: {}, expires: inAnHour() })).taskId).toBe(a);
  expect((await index.findTask(ns)).taskId).toBe(a);
  expect((await index.insertTask(ns, { taskId: c, rank: 5, data: { x: 1 }, expires: inAnHour() })).taskId).toBe(c);
  expect(await index.findTask(ns)).toMatchObject({ taskId: c, data: { x: 1 } });
});

test('listTasks and listNamespaces page with continuation tokens; findTasksAtIndex returns only what exists', async () => {
  const ns = uniqueNs();
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    ids.push(slugid());
    await index.insertTask(`${ns}.t${i}`, { taskId: ids[i], rank: 0, data: {}, expires: inAnHour() });
    await index.insertTask(`${ns}.t${i}.sub`, { taskId: ids[i], rank: 0, data: {}, expires: inAnHour() });
  }
  const seen: string[] = [];
  let token: string | undefined;
  do {
    const page: any = await index.listTasks(ns, { limit: 2, ...(token ? { continuationToken: token } : {}) });
    expect(page.tasks.length).toBeLessThanOrEqual(2);
    seen.push(...page.tasks.map((t: any) => t.taskId));
    token = page.continuationToken;
  } while (token);
  expect(seen.sort()).toEqual([...ids].sort());

  const names: string[] = [];
  token = undefined;
  do {
    const page: any = await index.listNamespaces(ns, { limit: 3, ...(token ? { continuationToken: token } : {}) });
    names.push(...page.namespaces.map((n: any) => n.name));
    token = page.continuationToken;
  } while (token);
  expect(names.sort()).toEqual(['t0', 't1', 't2', 't3', 't4']);

  const found = await index.findTasksAtIndex({ indexes: [`${ns}.t1`, `${ns}.missing`, `${ns}.t3`] });
  expect(found.tasks.map((t: any) => t.taskId)).toEqual([ids[1], ids[3]]);
});

test('deleteTask removes the entry; scopes are Taskcluster-s', async () => {
  const ns = uniqueNs();
  await index.insertTask(`${ns}.x`, { taskId: slugid(), rank: 0, data: {}, expires: inAnHour() });
  const reader = await clientWith([`index:find-task:${ns}.*`]);
  await reader.findTask(`${ns}.x`);
  await expectError(reader.insertTask(`${ns}.y`, { taskId: slugid(), rank: 0, data: {}, expires: inAnHour() }), 403, 'InsufficientScopes');
  await expectError(reader.deleteTask(`${ns}.x`), 403, 'InsufficientScopes');
  await expectError(reader.findTask(`other.${ns}`), 403, 'InsufficientScopes');
  await index.deleteTask(`${ns}.x`);
  await expectError(index.findTask(`${ns}.x`), 404);
});

test('expired entries are not found and the reaper removes them and their namespaces', async () => {
  const ns = uniqueNs();
  const soon = new Date(svc.clock.ms() + 1500).toJSON();
  await index.insertTask(`${ns}.old.entry`, { taskId: slugid(), rank: 0, data: {}, expires: soon });
  expect((await index.findTask(`${ns}.old.entry`)).expires).toBe(soon);
  await passTime(1600);
  await expectError(index.findTask(`${ns}.old.entry`), 404);
  await svc.runReaper();
  const store = new IndexStore(svc.services.storage);
  expect(await store.getTask(`${ns}.old.entry`)).toBeUndefined();
  // Namespaces live to the end of the day after their entries: still listed until then.
  expect(await store.getNamespace(`${ns}.old`)).toBeDefined();
});

describe('completed tasks indexed from their routes', () => {
  test('a completed task is found at each index route with rank, data and expiry from extra.index', async () => {
    const ns = uniqueNs();
    const expires = inAnHour();
    const { taskId, record } = await completedTask({
      routes: [`index.${ns}.build.linux`, `index.${ns}.revs.abc`, 'notify.email.x'],
      extra: { index: { rank: 7, data: { rev: 'abc' }, expires } },
    });
    expect(await indexCompletedTask(svc.services, record)).toEqual([`${ns}.build.linux`, `${ns}.revs.abc`]);
    // Delivered again (at least once): the same entries.
    await indexCompletedTask(svc.services, record);
    expect(await index.findTask(`${ns}.build.linux`)).toEqual({ namespace: `${ns}.build.linux`, taskId, rank: 7, data: { rev: 'abc' }, expires });
    expect((await index.findTask(`${ns}.revs.abc`)).taskId).toBe(taskId);
  });

  test('a redelivered older completion never replaces a newer one of the same rank', async () => {
    const ns = uniqueNs();
    const older = await completedTask({ routes: [`index.${ns}.latest`] });
    const newer = await completedTask({ routes: [`index.${ns}.latest`] });
    await indexCompletedTask(svc.services, newer.record);
    await indexCompletedTask(svc.services, older.record); // late redelivery
    expect((await index.findTask(`${ns}.latest`)).taskId).toBe(newer.taskId);
    expect((await index.findTask(`${ns}.latest`)).expires).toBe(newer.record.definition.expires);
  });

  test('failed tasks and invalid index routes are not indexed', async () => {
    const ns = uniqueNs();
    const { taskId, wq } = await runningTask(svc, { routes: [`index.${ns}.failed`] });
    await wq.reportFailed(taskId, 0);
    expect(await indexCompletedTask(svc.services, (await svc.services.tasks.load(taskId))!)).toEqual([]);
    const bad = await completedTask({ routes: [`index.${ns}..bad`, `index.${ns}.good`] });
    expect(await indexCompletedTask(svc.services, bad.record)).toEqual([`${ns}.good`]);
  });

  test("findArtifactFromTask redirects to the artifact of the indexed task's latest run", async () => {
    const ns = uniqueNs();
    const { taskId, wq } = await runningTask(svc, { routes: [`index.${ns}.build`] });
    const url = 'https://example.com/build.tar.gz';
    await wq.createArtifact(taskId, 0, 'public/build.tar.gz', { storageType: 'reference', url, expires: inAnHour(), contentType: 'application/gzip' });
    await wq.createArtifact(taskId, 0, 'private/key', {
      storageType: 'reference',
      url: 'https://example.com/key',
      expires: inAnHour(),
      contentType: 'text/plain',
    });
    await wq.reportCompleted(taskId, 0);
    await indexCompletedTask(svc.services, (await svc.services.tasks.load(taskId))!);

    const signed = index.buildSignedUrl(index.findArtifactFromTask, `${ns}.build`, 'public/build.tar.gz');
    const r = await fetch(signed, { redirect: 'manual' });
    expect(r.status).toBe(303);
    expect(r.headers.get('location')).toBe(url);

    const reader = await clientWith([`queue:get-artifact:public/*`]);
    const denied = await fetch(reader.buildSignedUrl(reader.findArtifactFromTask, `${ns}.build`, 'private/key'), { redirect: 'manual' });
    expect(denied.status).toBe(403);
    const missing = await fetch(index.buildSignedUrl(index.findArtifactFromTask, `${ns}.nothing`, 'public/build.tar.gz'), { redirect: 'manual' });
    expect(missing.status).toBe(404);
  });
});

test('ping and heartbeat answer under /api/index/v1', async () => {
  expect((await index.ping()).alive).toBe(true);
  const r = await fetch(`${svc.rootUrl}/api/index/v1/__lbheartbeat__`);
  expect(r.status).toBe(200);
});
