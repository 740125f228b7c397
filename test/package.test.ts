/**
 * `npm run package` builds a zip the Functions host can load: compiled JS, production dependencies
 * and host.json only, and its entry points register exactly the route table and the timers.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { extractZip } from './helpers/unzip';
import { routes } from '../shared/api/route-table';
import { azureRegistrations } from '../shared/api/router';

const root = path.resolve(__dirname, '..');
let dir: string;
let entries: string[];

beforeAll(() => {
  const r = spawnSync('npm', ['run', 'package'], { cwd: root, encoding: 'utf8', timeout: 8 * 60_000 });
  if (r.status !== 0) throw new Error(`npm run package failed:\n${r.stdout}\n${r.stderr}`);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tcq-package-'));
  entries = extractZip(path.join(root, '.package', 'app.zip'), dir);
}, 10 * 60_000);

afterAll(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('the zip holds compiled code, host.json and production dependencies only', () => {
  expect(entries).toEqual(expect.arrayContaining(['host.json', 'package.json', 'dist/functions/http.js', 'dist/functions/timers.js']));
  // The dashboard's static files, which tsc does not emit (bin/copy-assets.js).
  expect(entries).toEqual(expect.arrayContaining(['index.html', 'dashboard.js', 'dashboard.css'].map((f) => `dist/shared/ops/dashboard/${f}`)));
  expect(entries.some((e) => e.startsWith('node_modules/@azure/functions/'))).toBe(true);
  expect(entries.some((e) => e.startsWith('node_modules/@azure/data-tables/'))).toBe(true);
  expect(entries.filter((e) => e.endsWith('.ts') && !e.startsWith('node_modules/'))).toEqual([]);
  expect(entries.filter((e) => /^(test|infra|functions|shared)\//.test(e))).toEqual([]);
  expect(entries.filter((e) => /^dist\/(shared\/local|bench|bin|worker)\//.test(e))).toEqual([]);
  for (const dev of ['azurite', 'jest', 'typescript', 'taskcluster-client']) {
    expect(entries.some((e) => e.startsWith(`node_modules/${dev}/`))).toBe(false);
  }
  expect(JSON.parse(fs.readFileSync(path.join(dir, 'host.json'), 'utf8')).extensions.http.routePrefix).toBe('api');
});

test('its entry points load in a clean directory and register the route table and the reaper', () => {
  const main = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).main as string;
  expect(main).toBe('dist/functions/*.js');
  const files = fs.readdirSync(path.join(dir, 'dist', 'functions')).filter((f) => f.endsWith('.js'));
  const script = files.map((f) => `require(${JSON.stringify(path.join(dir, 'dist', 'functions', f))});`).join('');
  const r = spawnSync(process.execPath, ['--require', path.join(__dirname, 'helpers', 'fake-functions-core.js'), '-e', script], {
    cwd: dir,
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '' },
  });
  expect(r.stderr).not.toMatch(/Error/);
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
});

test('the packaged app serves the dashboard files from its own directory', () => {
  const script = `const d = require(${JSON.stringify(path.join(dir, 'dist', 'shared', 'ops', 'dashboard.js'))});
    console.log(JSON.stringify(['index.html', 'dashboard.js', 'dashboard.css'].map((f) => [d.dashboardFile(f).contentType, d.dashboardFile(f).body.length > 0])));`;
  const r = spawnSync(process.execPath, ['-e', script], { cwd: dir, encoding: 'utf8', env: { PATH: process.env.PATH ?? '' } });
  expect(r.stderr).toBe('');
  expect(JSON.parse(r.stdout)).toEqual([
    ['text/html; charset=utf-8', true],
    ['text/javascript; charset=utf-8', true],
    ['text/css; charset=utf-8', true],
  ]);
});
