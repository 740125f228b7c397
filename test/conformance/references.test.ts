/**
 * The API references the service serves, generated from its route table: taskcluster-client's
 * `createClient` builds a working client from each, the schemas they name are served under their
 * `$id`s, and the queue, auth, object, index and hooks entries agree with Taskcluster's own references.
 */
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { startTestService, TestService, taskDef, slugid } from '../helpers/service';
import { claim, uniqueQueue, W1 } from '../helpers/work';
import { routes } from '../../shared/api/route-table';

let svc: TestService;
const refs: Record<string, any> = {};
beforeAll(async () => {
  svc = await startTestService();
  for (const name of ['queue', 'auth', 'object', 'index', 'hooks', 'secrets', 'queue-ops', 'queue-events']) {
    const res = await fetch(`${svc.rootUrl}/api/references/${name}/v1/api.json`);
    expect(res.status).toBe(200);
    refs[name] = await res.json();
  }
});
afterAll(async () => svc?.close());

const client = (name: string) => new (svc.tc.createClient(refs[name], name))({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });

test('a Queue client built from the served queue reference creates, claims, reports and lists', async () => {
  const queue = client('queue');
  const taskId = slugid();
  const tq = uniqueQueue();
  const created = await queue.createTask(taskId, taskDef(tq));
  expect(created.status.state).toBe('pending');
  expect((await queue.task(taskId)).taskQueueId).toBe(tq);
  const [c] = await claim(svc, tq, W1, 1);
  expect(c.status.taskId).toBe(taskId);
  expect((await queue.reportCompleted(taskId, 0)).status.state).toBe('completed');
  const page = await queue.listTaskGroup(taskId, { limit: 1 });
  expect(page.tasks.map((t: any) => t.status.taskId)).toEqual([taskId]);
  expect((await queue.getTaskQueue(tq)).taskQueueId).toBe(tq);
  expect(await queue.pendingTasks(tq)).toMatchObject({ taskQueueId: tq, pendingTasks: 0 });
});

test('an Auth client built from the served auth reference manages clients', async () => {
  const auth = client('auth');
  const clientId = `ref/${slugid()}`;
  const made = await auth.createClient(clientId, { expires: new Date(Date.now() + 3600_000).toJSON(), description: 'by reference', scopes: ['queue:ping'] });
  expect(made.accessToken).toEqual(expect.any(String));
  expect((await auth.client(clientId)).scopes).toEqual(['queue:ping']);
  const listed = await auth.listClients({ prefix: clientId });
  expect(listed.clients.map((c: any) => c.clientId)).toEqual([clientId]);
  expect((await auth.expandScopes({ scopes: ['queue:ping'] })).scopes).toEqual(['queue:ping']);
  await auth.deleteClient(clientId);
  await expect(auth.client(clientId)).rejects.toMatchObject({ statusCode: 404 });
});

test('a client built from the served operator reference queries history and counts; /ops/reference is the same reference', async () => {
  const ops = client('queue-ops');
  const taskId = slugid();
  const tq = uniqueQueue();
  await svc.queue().createTask(taskId, taskDef(tq));
  const h = await ops.taskHistory(taskId, { limit: 5 });
  expect(h.history.map((e: any) => e.event)).toEqual(['scheduled', 'created']);
  expect((await ops.taskQueueStateCounts(tq)).counts).toMatchObject({ pending: 1 });
  expect(await (await fetch(`${svc.rootUrl}/api/queue/v1/ops/reference`)).json()).toEqual(refs['queue-ops']);
});

test('Index and Hooks clients built from the served references index a task and manage a hook', async () => {
  const index = client('index');
  const taskId = slugid();
  const ns = `ref.${slugid().replace(/[^a-zA-Z0-9]/g, '')}`;
  const expires = new Date(Date.now() + 3600_000).toJSON();
  await index.insertTask(`${ns}.latest`, { taskId, rank: 0, data: {}, expires });
  expect((await index.findTask(`${ns}.latest`)).taskId).toBe(taskId);
  expect((await index.listTasks(ns)).tasks.map((t: any) => t.taskId)).toEqual([taskId]);

  const hooks = client('hooks');
  const hookId = `ref${slugid().replace(/[^a-zA-Z0-9]/g, '')}`;
  const metadata = { name: 'ref', description: 'by reference', owner: 'tester@example.com' };
  const made = await hooks.createHook('refs', hookId, { metadata, task: { $if: 'false', then: {} } });
  expect(await hooks.hook('refs', hookId)).toEqual(made);
  expect((await hooks.listHooks('refs')).hooks.map((h: any) => h.hookId)).toContain(hookId);
  await hooks.removeHook('refs', hookId);
  await expect(hooks.hook('refs', hookId)).rejects.toMatchObject({ statusCode: 404 });
});

test('every input and output schema a reference names is served under that $id, and is a valid JSON schema', async () => {
  const ajv = new Ajv({ strict: false });
  addFormats(ajv);
  const ids = new Set<string>();
  for (const ref of Object.values(refs)) for (const e of ref.entries) for (const id of [e.input, e.output]) if (id) ids.add(id);
  expect(ids.size).toBeGreaterThan(40);
  for (const id of ids) {
    const res = await fetch(svc.rootUrl + id.replace(/#$/, ''));
    expect([id, res.status]).toEqual([id, 200]);
    const schema = await res.json();
    expect(schema.$id).toBe(id);
    expect(() => ajv.compile(schema)).not.toThrow();
  }
  expect((await fetch(`${svc.rootUrl}/api/schemas/queue/v1/no-such-schema.json`)).status).toBe(404);
  expect((await fetch(`${svc.rootUrl}/api/references/nope/v1/api.json`)).status).toBe(404);
});

test('each route is in exactly one reference (web pages aside) and says what it answers', () => {
  const names = (ref: any) => ref.entries.map((e: any) => `${ref.serviceName}_${e.name}`);
  const listed = ['queue', 'auth', 'object', 'index', 'hooks', 'secrets', 'queue-ops', 'queue-events'].flatMap((n) => names(refs[n]));
  const api = routes.filter((r) => r.service !== 'web').map((r) => `${r.service}_${r.name}`);
  expect(listed.sort()).toEqual(api.sort());
  // finishArtifact never succeeds here (no object artifacts); the dashboard is HTML.
  expect(routes.filter((r) => !r.output).map((r) => r.name)).toEqual(['finishArtifact', 'dashboard']);
  for (const r of routes) expect([r.name, r.title.length > 0, r.description.length > 0]).toEqual([r.name, true, true]);
});

const NEWER_QUERY: Record<string, string[]> = { hooks_triggerHook: ['taskId'], hooks_triggerHookWithToken: ['taskId'] };

test("queue, auth, object, index, hooks and secrets entries call the same method, route, args and query as Taskcluster's own references, and name the same response schemas", async () => {
  const apis = (await import('taskcluster-client/src/apis.js' as string)).default;
  for (const [ours, theirs] of [
    [refs.queue, apis.Queue.reference],
    [refs.auth, apis.Auth.reference],
    [refs.object, apis.Object.reference],
    [refs.index, apis.Index.reference],
    [refs.hooks, apis.Hooks.reference],
    [refs.secrets, apis.Secrets.reference],
  ]) {
    for (const e of ours.entries) {
      const tc = theirs.entries.find((t: any) => t.name === e.name);
      if (!tc) continue; // this queue's own additions
      // Query parameters Taskcluster added after v87 (v106's triggerHook `taskId`).
      const newer = NEWER_QUERY[`${ours.serviceName}_${e.name}`] ?? [];
      const shape = (x: any) => ({
        name: x.name,
        method: x.method,
        route: x.route,
        args: x.args,
        query: x.query.filter((q: string) => !newer.includes(q)).sort(),
        input: !!x.input,
      });
      expect(shape(e)).toEqual(shape(tc));
      // Where Taskcluster documents a response, ours has the same schema name.
      const schemaName = (id: string | undefined) => id?.replace(/^.*\//, '');
      if (tc.output) expect([e.name, schemaName(e.output)]).toEqual([e.name, schemaName(tc.output)]);
    }
  }
});
