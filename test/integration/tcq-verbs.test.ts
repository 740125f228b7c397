/**
 * The verbs tcq shares with Taskcluster's own CLI (`taskcluster task retrigger`, `task complete`,
 * `task def`, `group list`, `signin`, `from-now`, `slugid`, `api`), run in-process against the
 * service on the in-memory store, as an operator types them (issue 37).
 */
import { main as tcq } from '../../bin/tcq/main';
import { startTestService, TestService, taskDef, slugid } from '../helpers/service';
import { uniqueQueue, claim, runningTask, sleep } from '../helpers/work';
import { liveLogReaderUrl } from '../../worker/live-log-artifact';

let svc: TestService;
let env: NodeJS.ProcessEnv;
/** A client of the worker's createLiveLog (this queue's extension, unknown to taskcluster-client). */
let LiveLogExt: any;
beforeAll(async () => {
  svc = await startTestService();
  const ref = await (await fetch(`${svc.rootUrl}/api/references/queue/v1/api.json`)).json();
  LiveLogExt = svc.tc.createClient({ ...ref, entries: ref.entries.filter((e: any) => e.name === 'createLiveLog') }, 'queue');
  env = { TASKCLUSTER_ROOT_URL: svc.rootUrl, TASKCLUSTER_CLIENT_ID: svc.root.clientId, TASKCLUSTER_ACCESS_TOKEN: svc.root.accessToken };
});
afterAll(async () => svc?.close());

async function run(argv: string[], e: NodeJS.ProcessEnv = env) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await tcq(argv, e, { out: (s) => void out.push(s), err: (s) => void err.push(s) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

const HOUR = 3600_000;

async function createTask(overrides: Record<string, unknown> = {}): Promise<string> {
  const taskId = slugid();
  await svc.queue().createTask(taskId, taskDef(uniqueQueue(), overrides));
  return taskId;
}

test('task def prints the definition; api is call under taskcluster’s name', async () => {
  const taskId = await createTask({ metadata: { name: 'def me', description: 'd', owner: 'o@example.com', source: 'https://example.com' } });
  const def = await run(['task', 'def', taskId]);
  expect(def.code).toBe(0);
  expect(JSON.parse(def.out)).toEqual(await svc.queue().task(taskId));
  const api = await run(['api', 'queue', 'status', taskId]);
  expect(api.code).toBe(0);
  expect(JSON.parse(api.out).status.taskId).toBe(taskId);
});

test('task retrigger: a new task, dates shifted to now, retries 0, no dependencies or routes; --exact keeps them', async () => {
  const dep = await createTask();
  // As far in the past as the queue takes: the retrigger's dates move by as much.
  const created = new Date(Date.now() - 10 * 60_000);
  const original = await createTask({
    created: created.toJSON(),
    deadline: new Date(created.getTime() + 3 * HOUR).toJSON(),
    expires: new Date(created.getTime() + 48 * HOUR).toJSON(),
    dependencies: [dep],
    routes: ['index.tcq.retrigger'],
    retries: 3,
    payload: { command: ['true'] },
  });
  const before = Date.now();
  const r = await run(['task', 'retrigger', original]);
  expect(r.code).toBe(0);
  const newId = /^Task (\S+) created$/m.exec(r.out)?.[1];
  expect(newId).toBeDefined();
  expect(newId).not.toBe(original);
  const t = await svc.queue().task(newId);
  const at = Date.parse(t.created);
  expect(at).toBeGreaterThanOrEqual(before - 1000);
  expect(Date.parse(t.deadline) - at).toBe(3 * HOUR);
  expect(Date.parse(t.expires) - at).toBe(48 * HOUR);
  expect(t).toMatchObject({ dependencies: [], routes: [], retries: 0, payload: { command: ['true'] }, taskGroupId: original });
  // Without its dependency, the retrigger is pending at once.
  expect((await svc.queue().status(newId)).status.state).toBe('pending');

  const exact = await run(['task', 'retrigger', original, '--exact', '--json']);
  expect(exact.code).toBe(0);
  const e = await svc.queue().task(JSON.parse(exact.out).taskId);
  expect(e).toMatchObject({ dependencies: [dep], routes: ['index.tcq.retrigger'], retries: 0 });
});

test('task complete claims the pending run as worker tcq and reports it completed; a resolved task is refused', async () => {
  const taskId = await createTask();
  const r = await run(['task', 'complete', taskId]);
  expect(r.code).toBe(0);
  const { status } = await svc.queue().status(taskId);
  expect(status.state).toBe('completed');
  expect(status.runs[0]).toMatchObject({ workerId: 'tcq', state: 'completed' });
  expect(r.out).toMatch(/state:\s+completed/);
  const again = await run(['task', 'complete', taskId]);
  expect(again.code).toBe(2);
  expect(again.err).toContain('is completed: only a pending run can be claimed and completed');
});

test('group list: every task by default, --failed/--running/--complete select by state', async () => {
  const tq = uniqueQueue();
  const group = slugid();
  const ids = [slugid(), slugid(), slugid()];
  for (const [i, id] of ids.entries())
    await svc
      .queue()
      .createTask(
        id,
        taskDef(tq, { taskGroupId: group, metadata: { name: `job ${i}`, description: 'd', owner: 'o@example.com', source: 'https://example.com' } }),
      );
  const [c] = await claim(svc, tq);
  await svc.queue(c.credentials).reportFailed(c.status.taskId, c.runId);

  const all = await run(['group', 'list', group]);
  expect(all.code).toBe(0);
  expect(all.out.split('\n')).toHaveLength(4); // header and three rows
  for (const id of ids) expect(all.out).toContain(id);
  const failed = await run(['group', 'list', group, '--failed']);
  expect(failed.out.split('\n').slice(1)).toEqual([expect.stringMatching(new RegExp(`^${c.status.taskId}\\s+job \\d\\s+failed$`))]);
  const pending = await run(['group', 'list', group, '--pending', '--complete', '--json']);
  expect(JSON.parse(pending.out).tasks.map((t: any) => t.status.state)).toEqual(['pending', 'pending']);
});

test('signin: a client under yours with the named scopes and a bounded expiry; its export lines sign calls', async () => {
  const r = await run(['signin', '--scope', 'queue:get-artifact:public/*', '--scope', 'auth:current-scopes', '--expires', '2h']);
  expect(r.code).toBe(0);
  const vars = Object.fromEntries([...r.out.matchAll(/^export (\w+)='([^']*)'$/gm)].map((m) => [m[1], m[2]]));
  expect(vars.TASKCLUSTER_CLIENT_ID).toMatch(/^root\/tcq-[0-9a-f]{12}$/);
  expect(vars.TASKCLUSTER_ROOT_URL).toBe(svc.rootUrl);
  expect(r.out).toContain('unset TASKCLUSTER_CERTIFICATE');
  const client = await svc.auth().client(vars.TASKCLUSTER_CLIENT_ID);
  expect(client.scopes).toEqual(['auth:current-scopes', 'queue:get-artifact:public/*']);
  expect(Date.parse(client.expires) - Date.now()).toBeLessThanOrEqual(2 * HOUR);
  expect(Date.parse(client.expires) - Date.now()).toBeGreaterThan(HOUR);

  const check = await run(['signin', '--check'], { ...env, ...vars });
  expect(check.code).toBe(0);
  expect(check.out).toContain('queue:get-artifact:public/*');

  const noScope = await run(['signin']);
  expect(noScope).toMatchObject({ code: 2, err: expect.stringContaining('--scope <scope>') });
  const tooLong = await run(['signin', '--scope', 'x', '--expires', '400d']);
  expect(tooLong).toMatchObject({ code: 2, err: expect.stringContaining('--expires may be at most 31 days ahead') });
  const anonymous = await run(['signin', '--scope', 'x'], { TASKCLUSTER_ROOT_URL: svc.rootUrl });
  expect(anonymous).toMatchObject({ code: 2, err: expect.stringContaining('signin needs your credentials') });
});

test('from-now and slugid need no deployment', async () => {
  const none = {};
  const before = Date.now();
  const r = await run(['from-now', '2', 'days', '3', 'hours'], none);
  expect(r.code).toBe(0);
  expect(Date.parse(r.out) - before).toBeGreaterThanOrEqual(51 * HOUR - 1000);
  expect(Date.parse(r.out) - before).toBeLessThan(51 * HOUR + 5000);
  expect((await run(['from-now', '1 year'], none)).code).toBe(0);
  expect(await run(['from-now', 'soon'], none)).toMatchObject({ code: 2, err: expect.stringContaining("got 'soon'") });

  const nice = (await run(['slugid', 'generate', '--nice'], none)).out;
  expect(nice).toMatch(/^[A-Za-f][A-Za-z0-9_-]{21}$/);
  const uuid = (await run(['slugid', 'decode', nice], none)).out;
  expect(uuid).toMatch(/^[0-7][0-9a-f]{7}-[0-9a-f]{4}-4/);
  expect((await run(['slugid', 'encode', uuid], none)).out).toBe(nice);
  expect((await run(['slugid'], none)).out).toMatch(/^[A-Za-z0-9_-]{22}$/);
  expect((await run(['slugid', 'v4'], none)).out).toMatch(/^[A-Za-z0-9_-]{22}$/);
  expect(await run(['slugid', 'decode', 'nope'], none)).toMatchObject({ code: 2, err: "error: invalid slug format 'nope'" });

  const help = (await run(['--help'], none)).out;
  for (const verb of [
    'task retrigger <taskId>',
    'task complete <taskId>',
    'task def <taskId>',
    'group list <taskGroupId>',
    'signin',
    'from-now <duration>',
    'slugid decode <slug>',
    'api <service>',
  ])
    expect(help).toContain(`  ${verb}`);
});

describe('task log follows a running run', () => {
  /** Appends to the run's live log as a worker does (worker/log-stream.ts). */
  const append = (url: string, text: string) => fetch(url.replace('?', '?comp=appendblock&'), { method: 'PUT', body: text });

  test('prints each line as it comes and exits 0 when the run resolves, with the whole log', async () => {
    const { taskId, wq, c } = await runningTask(svc);
    const { url } = await new LiveLogExt({ rootUrl: svc.rootUrl, credentials: c.credentials, retries: 0 }).createLiveLog(taskId, 0);
    expect((await append(url, 'step 1\n')).status).toBe(201);
    // As the reference worker names it while the run runs (worker/live-log-artifact.ts).
    const expires = (await svc.queue().task(taskId)).expires;
    await wq.createArtifact(taskId, 0, 'public/logs/live.log', {
      storageType: 'reference',
      url: liveLogReaderUrl(svc.rootUrl, taskId, 0),
      contentType: 'text/plain',
      expires,
    });
    const lines: string[] = [];
    const err: string[] = [];
    const following = tcq(['task', 'log', taskId], env, { out: (s) => void lines.push(s), err: (s) => void err.push(s) });
    for (let i = 0; i < 100 && !lines.length; i++) await sleep(50);
    expect(lines).toEqual(['step 1']); // printed while the run still runs
    expect((await append(url, 'step 2\nno newline yet')).status).toBe(201);
    await wq.reportCompleted(taskId, 0);
    expect(await following).toBe(0);
    expect(err).toEqual([]);
    expect(lines.join('\n')).toBe('step 1\nstep 2\nno newline yet');

    // Resolved with live.log still the reference (a worker that died): the streamed log, at once; --json has it whole.
    const json = await run(['task', 'log', taskId, '--json']);
    expect(JSON.parse(json.out)).toMatchObject({ taskId, runId: 0, name: 'public/logs/live.log', text: 'step 1\nstep 2\nno newline yet' });
  });

  test('a pending task has no log yet (exit 2), and says why', async () => {
    const taskId = await createTask();
    const r = await run(['task', 'log', taskId]);
    expect(r).toMatchObject({ code: 2, err: expect.stringContaining('is pending: its log starts when a worker claims it') });
  });
});
