/**
 * `npm run package` builds a zip the Functions host can load: the app bundled into one file with its
 * production dependencies, the dashboard's files, host.json and package.json. Unzipped in a clean
 * folder, its `main` glob registers exactly the route table and the timers, and a stand-in for the
 * Functions host (test/helpers/package-host.js) serves a whole task lifecycle from it.
 */
import { spawn, spawnSync, ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { extractZip } from './helpers/unzip';
import { routes } from '../shared/api/route-table';
import { azureRegistrations } from '../shared/api/router';
import { taskDef, slugid } from './helpers/service';
// eslint-disable-next-line @typescript-eslint/no-require-imports -- a CommonJS build script
const { VENDOR_FILES } = require('../bin/copy-assets');

const root = path.resolve(__dirname, '..');
const FAKE_CORE = path.join(__dirname, 'helpers', 'fake-functions-core.js');
/** The deployment package's budget, unpacked (Flex Consumption copies and loads it at every cold start). */
const MAX_UNPACKED_BYTES = 15_000_000;
let dir: string;
let entries: string[];

beforeAll(() => {
  const r = spawnSync('npm', ['run', 'package'], { cwd: root, encoding: 'utf8', timeout: 8 * 60_000 });
  if (r.status !== 0) throw new Error(`npm run package failed:\n${r.stdout}\n${r.stderr}`);
  // A folder with no node_modules above it: the package must carry everything it loads.
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tcq-package-'));
  entries = extractZip(path.join(root, '.package', 'app.zip'), dir);
}, 10 * 60_000);

afterAll(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/** Runs node in the unzipped package with the stand-in for `@azure/functions-core` and no settings. */
function nodeInPackage(args: string[]) {
  return spawnSync(process.execPath, ['--require', FAKE_CORE, ...args], { cwd: dir, encoding: 'utf8', env: { PATH: process.env.PATH ?? '' } });
}

test('the zip holds the bundled app, its notices, the dashboard files, host.json and package.json, and nothing else', () => {
  const dashboard = fs.readdirSync(path.join(root, 'shared', 'ops', 'dashboard')).map((f) => `dist/functions/dashboard/${f}`);
  const vendor = VENDOR_FILES.map((f: { name: string }) => `dist/functions/dashboard/vendor/${f.name}`);
  expect(entries.sort()).toEqual(
    [
      'dist/THIRD-PARTY-NOTICES.txt',
      'dist/functions/app.js',
      'dist/functions/sandbox-child/main.js',
      ...dashboard,
      ...vendor,
      'host.json',
      'package.json',
    ].sort(),
  );
  expect(JSON.parse(fs.readFileSync(path.join(dir, 'host.json'), 'utf8')).extensions.http.routePrefix).toBe('api');
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  expect(pkg).not.toHaveProperty('dependencies');
  expect(pkg.main).toBe(JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).main);
  const notices = fs.readFileSync(path.join(dir, 'dist', 'THIRD-PARTY-NOTICES.txt'), 'utf8');
  for (const dep of ['@azure/functions', '@azure/data-tables', 'hawk', 'json-e', 'taskcluster-lib-scopes', 'uplot'])
    expect(notices).toMatch(new RegExp(`^${dep} \\d`, 'm'));
  // Local-only code and devDependencies are not reached from the entry points.
  const app = fs.readFileSync(path.join(dir, 'dist', 'functions', 'app.js'), 'utf8');
  for (const devOnly of ['node_modules/azurite/', 'node_modules/jest', 'node_modules/typescript/', 'shared/local/', 'worker/'])
    expect(app).not.toContain(devOnly);
});

test(`unpacked it stays within ${MAX_UNPACKED_BYTES / 1e6} MB`, () => {
  const bytes = entries.reduce((sum, e) => sum + fs.statSync(path.join(dir, e)).size, 0);
  expect(bytes).toBeLessThanOrEqual(MAX_UNPACKED_BYTES);
});

test('loaded through its main glob in a clean folder, it registers the route table and the reaper, needing nothing outside the package', () => {
  const r = nodeInPackage([path.join(__dirname, 'helpers', 'load-time.js')]);
  expect(r.stderr).toBe('');
  const line = r.stdout.split('\n').find((l) => l.startsWith('REGISTERED '));
  const registered: any[] = JSON.parse(line!.slice('REGISTERED '.length));
  const http = registered.filter((m) => Object.values(m.bindings).some((b: any) => b.type === 'httpTrigger'));
  const got = http.map((m) => {
    const trigger: any = Object.values(m.bindings).find((b: any) => b.type === 'httpTrigger');
    return { name: m.name, route: trigger.route, methods: trigger.methods, authLevel: trigger.authLevel };
  });
  const want = azureRegistrations(routes).map((r) => ({ name: r.name, route: r.route, methods: r.methods, authLevel: 'anonymous' }));
  expect(got.sort((a, b) => a.name.localeCompare(b.name))).toEqual(want.sort((a, b) => a.name.localeCompare(b.name)));
  const timers = registered.filter((m) => Object.values(m.bindings).some((b: any) => b.type === 'timerTrigger'));
  expect(timers.map((m) => m.name)).toEqual(['reaper']);
  const timer: any = Object.values(timers[0].bindings).find((b: any) => b.type === 'timerTrigger');
  expect(timer.schedule).toBe('%QUEUE_REAPER_SCHEDULE%');
  const loaded = r.stdout.match(/^LOADED [\d.]+ (\d+) /m);
  expect(Number(loaded?.[1])).toBe(registered.length);
});

describe('started by a stand-in for the Functions host', () => {
  const accessToken = 'package-test-root-access-token';
  let host: ChildProcess;
  let url: string;
  let stderr = '';

  beforeAll(async () => {
    host = spawn(process.execPath, ['--require', FAKE_CORE, path.join(__dirname, 'helpers', 'package-host.js')], {
      cwd: dir,
      env: {
        PATH: process.env.PATH ?? '',
        PACKAGE_HOST_FUNCTIONS: require.resolve('@azure/functions'),
        QUEUE_STORAGE_CONNECTION: 'memory:',
        QUEUE_ROOT_ACCESS_TOKEN: accessToken,
        QUEUE_TOKEN_ENCRYPTION_KEY: Buffer.alloc(32, 3).toString('base64'),
        QUEUE_CLAIM_WORK_POLL_S: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    host.stderr!.on('data', (d) => (stderr += d));
    url = await new Promise<string>((resolve, reject) => {
      let out = '';
      host.stdout!.on('data', (d) => {
        out += d;
        const m = out.match(/^LISTENING (\S+)$/m);
        if (m) resolve(m[1]);
      });
      host.on('exit', (code) => reject(new Error(`the package host exited (${code}) before listening:\n${out}\n${stderr}`)));
    });
  }, 60_000);

  afterAll(async () => {
    if (host && host.exitCode === null) {
      const exited = new Promise((resolve) => host.on('exit', resolve));
      host.kill('SIGTERM');
      await exited;
    }
  });

  test('it serves a whole task lifecycle, the reaper, a hook (rendered in a sandbox process) and the dashboard', async () => {
    const taskcluster = (await import('taskcluster-client')).default;
    const queue = new taskcluster.Queue({ rootUrl: url, credentials: { clientId: 'static/root', accessToken } });
    const taskQueueId = 'package/lifecycle';
    const taskId = slugid();
    await queue.createTask(taskId, taskDef(taskQueueId));
    const { tasks } = await queue.claimWork(taskQueueId, { workerGroup: 'wg', workerId: 'w1', tasks: 1 });
    expect(tasks.map((t: any) => t.status.taskId)).toEqual([taskId]);
    const { status } = await new taskcluster.Queue({ rootUrl: url, credentials: tasks[0].credentials }).reportCompleted(taskId, 0);
    expect(status).toMatchObject({ state: 'completed', runs: [{ runId: 0, state: 'completed', workerId: 'w1' }] });
    expect((await queue.status(taskId)).status.state).toBe('completed');

    expect((await fetch(`${url}/admin/functions/reaper`, { method: 'POST' })).status).toBe(202);
    const health = await (await fetch(`${url}/api/queue/v1/__heartbeat__`)).json();
    expect(health).toMatchObject({ healthy: true, reaper: { staleAfterS: 300 } });
    // A hook's template renders in a child process that the package's own sandbox-child/main.js runs.
    const hooks = new taskcluster.Hooks({ rootUrl: url, credentials: { clientId: 'static/root', accessToken } });
    const hook = {
      metadata: { name: 'h', description: 'package test', owner: 'me@example.com' },
      schedule: [],
      triggerSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
      task: {
        $merge: [
          taskDef(taskQueueId),
          { metadata: { name: { $eval: 'payload.name' }, description: 'd', owner: 'me@example.com', source: 'https://example.com' } },
        ],
      },
    };
    const auth = new taskcluster.Auth({ rootUrl: url, credentials: { clientId: 'static/root', accessToken } });
    await auth.createRole('hook-id:package/*', { description: 'package test hooks', scopes: ['queue:*'] });
    await hooks.createHook('package', 'render', hook);
    const fired = await hooks.triggerHook('package', 'render', { name: 'from-a-hook' });
    expect((await queue.task(fired.status.taskId)).metadata.name).toBe('from-a-hook');
    const page = await fetch(`${url}/api/dashboard`);
    expect([page.status, page.headers.get('content-type')]).toEqual([200, 'text/html; charset=utf-8']);
    expect(stderr).toBe('');
  });
});
