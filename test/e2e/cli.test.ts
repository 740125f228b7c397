/**
 * `tcq` end to end: every command against the service as `npm start` runs it (shared/local/main,
 * embedded Azurite), with a task run by the reference worker, checked as an operator reads it.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { start, LocalService } from '../../shared/local/main';
import { freePort } from '../../shared/local/azurite';
import { main as tcq } from '../../bin/tcq/main';
import { parseConfig } from '../../worker/config';
import { startWorker } from '../../worker/main';
import { memoryLog } from '../../worker/logger';
import { slugid } from '../helpers/service';

let root: string;
let svc: LocalService;
let env: NodeJS.ProcessEnv;
let tc: any;
/** Each test has its own task queue, so tasks of one are not run by another's worker. */
let TQ = 'cli/e2e';
let queues = 0;
beforeEach(() => {
  TQ = `cli/e2e${++queues}`;
});

beforeAll(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'tcq-e2e-'));
  svc = await start({ env: { PORT: String(await freePort()), QUEUE_CLAIM_WORK_POLL_S: '1' }, root });
  env = { TASKCLUSTER_ROOT_URL: svc.config.publicUrl, TASKCLUSTER_CLIENT_ID: svc.config.rootClientId, TASKCLUSTER_ACCESS_TOKEN: svc.config.rootAccessToken };
  tc = (await import('taskcluster-client')).default;
}, 120_000);

afterAll(async () => {
  await svc?.stop();
  fs.rmSync(root, { recursive: true, force: true });
});

/** Runs tcq in-process; returns its exit code, stdout and stderr. */
async function run(argv: string[], e: NodeJS.ProcessEnv = env, stop?: AbortSignal, onLine?: (l: string) => void) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await tcq(argv, e, {
    out: (s) => {
      out.push(s);
      onLine?.(s);
    },
    err: (s) => void err.push(s),
    stop,
  });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

const queue = () =>
  new tc.Queue({ rootUrl: env.TASKCLUSTER_ROOT_URL, credentials: { clientId: env.TASKCLUSTER_CLIENT_ID, accessToken: env.TASKCLUSTER_ACCESS_TOKEN } });

async function createTask(payload: Record<string, unknown>, taskGroupId?: string): Promise<string> {
  const taskId = slugid();
  const now = Date.now();
  await queue().createTask(taskId, {
    taskQueueId: TQ,
    taskGroupId: taskGroupId ?? taskId,
    created: new Date(now).toJSON(),
    deadline: new Date(now + 3600_000).toJSON(),
    payload,
    metadata: { name: 'tcq e2e', description: 'a task', owner: 'tester@example.com', source: 'https://example.com/tcq' },
  });
  return taskId;
}

/** Runs `n` tasks with the reference worker, as `npm run worker` would. */
async function work(n: number): Promise<void> {
  const config = parseConfig(['--task-queue', TQ, '--worker-group', 'g', '--worker-id', 'w1', '--max-tasks', String(n)], env)!;
  const worker = await startWorker(config, memoryLog(), env);
  await worker.run();
}

test('call: any method by name, JSON out; close names for a typo; argument and payload checks', async () => {
  const taskId = await createTask({ command: ['true'] });
  const r = await run(['call', 'queue', 'status', taskId]);
  expect(r.code).toBe(0);
  expect(JSON.parse(r.out).status).toMatchObject({ taskId, state: 'pending', taskQueueId: TQ });

  const typo = await run(['call', 'queue', 'statsu', taskId]);
  expect(typo.code).toBe(2);
  expect(typo.err).toMatch(/^error: queue has no method 'statsu'; did you mean status\b/);
  expect((await run(['call', 'queu', 'status', taskId])).err).toContain("no service 'queu'; did you mean queue?");
  expect((await run(['call', 'queue', 'status'])).err).toBe('error: queue.status takes <taskId>, got none');
  expect((await run(['call', 'index', 'insertTask', 'a.b'])).err).toContain('index.insertTask needs a payload');

  const methods = await run(['call', 'hooks']);
  expect(methods.out).toMatch(/^METHOD\s+ARGS\s+HTTP\s+STABILITY/);
  expect(methods.out).toContain('triggerHook');
});

test('task status, log, artifacts, artifact: a run by the reference worker, as tables and as JSON', async () => {
  const taskId = await createTask({ command: ['sh', '-c', 'echo hello from tcq'] });
  await work(1);
  const status = await run(['task', 'status', taskId]);
  expect(status.code).toBe(0);
  expect(status.out).toMatch(/^task:\s+\S+ {2}tcq e2e$/m);
  expect(status.out).toMatch(/^state:\s+completed$/m);
  expect(status.out).toMatch(/^RUNID\s+STATE\s+REASONCREATED\s+REASONRESOLVED\s+WORKER/m);
  expect(status.out).toMatch(/^0\s+completed\s+scheduled\s+completed\s+g\/w1\s/m);
  expect(JSON.parse((await run(['task', 'status', taskId, '--json'])).out).status.runs[0].state).toBe('completed');

  const log = await run(['task', 'log', taskId]);
  expect(log.out).toContain('hello from tcq');
  expect((await run(['task', 'log', taskId, '--run', '0'])).out).toContain('hello from tcq');
  expect((await run(['task', 'log', taskId, '--run', '1'])).err).toContain(`task ${taskId} has no run 1`);

  const artifacts = await run(['task', 'artifacts', taskId]);
  // live.log: a reference to the live log while the run ran, then a link to the complete log.
  expect(artifacts.out).toMatch(
    /^NAME\s+STORAGETYPE\s+CONTENTTYPE\s+EXPIRES\npublic\/logs\/live\.log\s+link\s+text\/plain.*\npublic\/logs\/live_backing\.log\s+s3\s+text\/plain/,
  );
  expect((await run(['task', 'artifact', taskId, 'public/logs/live.log'])).out).toContain('hello from tcq');
});

/** Polls `check` every 100 ms until it returns true, for up to `ms`. */
async function until(check: () => Promise<boolean> | boolean, ms: number, what: string): Promise<void> {
  for (const end = Date.now() + ms; Date.now() < end;) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

test('task log follows a task the reference worker runs, line by line, and exits when it resolves', async () => {
  // The command prints its second line only once the test has seen the first (a file as the signal).
  const go = path.join(root, `go-${slugid()}`);
  const script = [
    "const fs = require('fs');",
    "console.log('first line');",
    `const t = setInterval(() => { if (fs.existsSync(${JSON.stringify(go)})) { clearInterval(t); console.log('second line'); } }, 50);`,
  ].join('\n');
  const taskId = await createTask({ command: [process.execPath, '-e', script], maxRunTime: 60 });
  const working = work(1);
  await until(async () => (await queue().status(taskId)).status.state === 'running', 20_000, `${taskId} to run`);

  const lines: string[] = [];
  const following = run(['task', 'log', taskId], env, undefined, (l) => lines.push(l));
  await until(() => lines.some((l) => /^first line$/m.test(l)), 20_000, 'the first line while the task runs');
  expect(lines.join('\n')).not.toMatch(/^second line$/m);
  // Meanwhile live.log is a reference to the queue's reader of the growing log.
  expect((await run(['task', 'artifacts', taskId])).out).toMatch(/^public\/logs\/live\.log\s+reference\s+text\/plain/m);

  fs.writeFileSync(go, '');
  const followed = await following;
  await working;
  expect(followed).toMatchObject({ code: 0, err: '' });
  expect(followed.out).toMatch(/^first line\nsecond line$/m);
  expect((await queue().status(taskId)).status.state).toBe('completed');
  // After the run: the same log, complete, through the link to live_backing.log.
  const after = await run(['task', 'log', taskId]);
  expect(after.out).toBe(followed.out);
});

test('task rerun and cancel; queue counts and pending; group status, rerun and cancel', async () => {
  const group = slugid();
  const a = await createTask({ command: ['true'] }, group);
  const b = await createTask({ command: ['false'] }, group);
  const counts = await run(['queue', 'counts', TQ]);
  expect(counts.out).toMatch(/^pending:\s+2$/m);
  const pending = await run(['queue', 'pending', TQ]);
  expect(
    pending.out
      .split('\n')
      .slice(1)
      .map((l) => l.split(/\s+/)[0]),
  ).toEqual([a, b]);
  expect((await run(['queue', 'pending', TQ, '--limit', '1'])).out.split('\n')).toHaveLength(2);

  await work(2);
  const gs = await run(['group', 'status', group]);
  expect(gs.out).toMatch(/^2 tasks: (1 completed, 1 failed|1 failed, 1 completed)$/m);

  const rerun = await run(['group', 'rerun', group]);
  expect(rerun.out).toMatch(new RegExp(`^${b}\\s+failed\\s+pending$`, 'm'));
  expect(rerun.out).not.toContain(a);

  const one = await run(['task', 'rerun', a]);
  expect(one.out).toMatch(/^1\s+pending\s+rerun/m);
  const cancel = await run(['task', 'cancel', a]);
  expect(cancel.out).toMatch(/^1\s+exception\s+rerun\s+canceled/m);

  const gc = await run(['group', 'cancel', group]);
  expect(gc.code).toBe(0);
  expect(gc.out).toMatch(/^cancelled:\s+1$/m);
  expect(JSON.parse((await run(['call', 'queue', 'status', b])).out).status.state).toBe('exception');
});

test('worker quarantine; hook trigger (with the README hook-role scopes); index find', async () => {
  await createTask({ command: ['true'] });
  await work(1);
  const q = await run(['worker', 'quarantine', TQ, 'g', 'w1', '--until', '2h', '--reason', 'disk full']);
  expect(q.code).toBe(0);
  const until = /^quarantineUntil:\s+(\S+)$/m.exec(q.out)![1];
  expect(Date.parse(until) - Date.now()).toBeGreaterThan(7_000_000);
  expect((await run(['worker', 'quarantine', TQ, 'g', 'w1'])).err).toContain('--until is required');
  expect((await run(['worker', 'quarantine', TQ, 'g', 'w1', '--until', 'now'])).code).toBe(0);

  const auth = new tc.Auth({
    rootUrl: env.TASKCLUSTER_ROOT_URL,
    credentials: { clientId: env.TASKCLUSTER_CLIENT_ID, accessToken: env.TASKCLUSTER_ACCESS_TOKEN },
  });
  // The role's scopes as the README lists them: a task without projectId needs queue:create-task:project:none.
  await auth.createRole('hook-id:cli/*', {
    description: 'cli hooks',
    scopes: ['queue:create-task:lowest:cli/*', 'queue:create-task:project:none', 'queue:scheduler-id:-'],
  });
  const hooks = new tc.Hooks({
    rootUrl: env.TASKCLUSTER_ROOT_URL,
    credentials: { clientId: env.TASKCLUSTER_CLIENT_ID, accessToken: env.TASKCLUSTER_ACCESS_TOKEN },
  });
  await hooks.createHook('cli', 'nightly', {
    metadata: { name: 'nightly', description: 'a hook', owner: 'tester@example.com' },
    triggerSchema: { type: 'object', properties: { word: { type: 'string' } }, additionalProperties: false },
    task: {
      taskQueueId: TQ,
      payload: { command: ['echo', { $eval: 'payload.word' }] },
      metadata: { name: 'hook task', description: 'made by a hook', owner: 'tester@example.com', source: 'https://example.com/hook' },
    },
  });
  const fired = await run(['hook', 'trigger', 'cli', 'nightly', '--payload', '{"word": "hi"}']);
  expect(fired.err).toBe('');
  expect(fired.code).toBe(0);
  const taskId = /^taskId:\s+(\S+)$/m.exec(fired.out)![1];
  expect(JSON.parse((await run(['call', 'queue', 'task', taskId])).out).payload).toEqual({ command: ['echo', 'hi'] });

  // Without queue:create-task:project:none (the README once left it out) the fire is refused.
  await auth.createRole('hook-id:cli-short/*', { description: 'too few scopes', scopes: [`queue:create-task:lowest:cli/*`, 'queue:scheduler-id:-'] });
  await hooks.createHook('cli-short', 'nightly', {
    metadata: { name: 'nightly', description: 'a hook', owner: 'tester@example.com' },
    task: { taskQueueId: TQ, payload: {}, metadata: { name: 'hook task', description: 'd', owner: 'tester@example.com', source: 'https://example.com/hook' } },
  });
  const refused = await run(['hook', 'trigger', 'cli-short', 'nightly']);
  expect(refused.code).toBe(1);
  expect(refused.err).toMatch(/^error: hook trigger: 403 /);
  expect(refused.err).toContain('queue:create-task:project:none');

  await run(['call', 'index', 'insertTask', 'cli.e2e.latest', '--payload', JSON.stringify({ taskId, rank: 1, data: {}, expires: '2030-01-01T00:00:00Z' })]);
  const found = await run(['index', 'find', 'cli.e2e.latest']);
  expect(found.out).toMatch(new RegExp(`^taskId:\\s+${taskId}$`, 'm'));
  const missing = await run(['index', 'find', 'cli.e2e.nothing']);
  expect(missing.code).toBe(1);
  expect(missing.err).toBe('error: index find: 404 ResourceNotFound: Indexed task not found at cli.e2e.nothing');
});

test('events tail prints events as they happen and deletes its subscription on stop', async () => {
  const stop = new AbortController();
  const group = slugid();
  let created = '';
  const lines: string[] = [];
  const tail = run(['events', 'tail', '--task-group', group], env, stop.signal, (l) => {
    lines.push(l);
    if (created && l.includes(created)) stop.abort();
  });
  // The subscription exists once the tail announced it.
  const subscriptions = async () => JSON.parse((await run(['call', 'queue', 'listSubscriptions'])).out).subscriptions as { subscriptionId: string }[];
  while (!(await subscriptions()).some((s) => s.subscriptionId.startsWith('tail-'))) await new Promise((r) => setTimeout(r, 100));
  created = await createTask({ command: ['true'] }, group);
  const r = await tail;
  expect(r.code).toBe(0);
  expect(lines.some((l) => l.includes(created) && /task-defined|task-pending/.test(l))).toBe(true);
  expect(r.err).toMatch(/\[events\] deleted subscription tail-/);
  expect((await subscriptions()).some((s) => s.subscriptionId.startsWith('tail-'))).toBe(false);
});

test('mistakes name what to fix: a missing variable, a rejected token (naming the client), an unreachable root URL', async () => {
  const noUrl = await run(['task', 'status', 'x'], {});
  expect(noUrl.code).toBe(2);
  expect(noUrl.err).toMatch(/^error: TASKCLUSTER_ROOT_URL is not set/);
  expect((await run(['task', 'status', 'x'], { ...env, TASKCLUSTER_ACCESS_TOKEN: '' })).err).toContain(
    `TASKCLUSTER_CLIENT_ID is '${env.TASKCLUSTER_CLIENT_ID}' but TASKCLUSTER_ACCESS_TOKEN is not set`,
  );
  const bad = await run(['call', 'auth', 'currentScopes'], { ...env, TASKCLUSTER_ACCESS_TOKEN: 'not-the-token' });
  expect(bad.code).toBe(1);
  expect(bad.err).toContain(`rejected client '${env.TASKCLUSTER_CLIENT_ID}' (401`);
  expect(bad.err).toContain('Check TASKCLUSTER_CLIENT_ID and TASKCLUSTER_ACCESS_TOKEN');
  const dead = await run(['queue', 'counts', TQ], { ...env, TASKCLUSTER_ROOT_URL: `http://127.0.0.1:${await freePort()}` });
  expect(dead.err).toMatch(/nothing answers at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)\. Is the service running\? Check TASKCLUSTER_ROOT_URL\./);
  expect((await run(['tsk', 'status', 'x'])).err).toContain("did you mean 'task status'");
});
