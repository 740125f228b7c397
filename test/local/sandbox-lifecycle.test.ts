/**
 * The sandbox's child processes cost the host nothing while idle: they do not keep it running,
 * they exit after SANDBOX_IDLE_MS without a job, and they end with their host however it ends,
 * idle or in the middle of a job (no orphans left on the instance).
 */
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { SANDBOX_IDLE_MS, Sandbox, SandboxOwner } from '../../shared/sandbox/sandbox';

/** Every job of this file is one owner's. */
const TEST_OWNER: SandboxOwner = { owner: 'test', priority: 'trigger' };

const HOST = path.join(__dirname, '..', 'helpers', 'sandbox-host.js');
/** How long a process may take to end after it was told to (generous: a loaded CI machine). */
const END_WITHIN_MS = 10_000;

/** Whether `pid` is still a process (a zombie no one reaped has ended). */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** Resolves once `pid` has ended; rejects if it is still running after END_WITHIN_MS. */
async function ended(pid: number): Promise<void> {
  const until = Date.now() + END_WITHIN_MS;
  while (alive(pid)) {
    if (Date.now() > until) throw new Error(`process ${pid} is still running`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Starts the host helper; resolves with its render and its sandbox children once it printed them. */
function startHost(mode: 'exit' | 'stay' | 'busy'): {
  host: ChildProcess;
  rendered: Promise<{ json: string; children: number[] }>;
  exit: Promise<number | null>;
} {
  const host = spawn(process.execPath, [HOST, mode], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exit = new Promise<number | null>((resolve) => host.on('exit', (code) => resolve(code)));
  const rendered = new Promise<{ json: string; children: number[] }>((resolve, reject) => {
    let out = '';
    host.stdout!.on('data', (b) => {
      out += b;
      const m = /RENDERED (\S+) (\S*)\n/.exec(out);
      if (m) resolve({ json: m[1], children: m[2].split(',').filter(Boolean).map(Number) });
    });
    host.on('exit', (code, signal) => reject(new Error(`the host ended (${code ?? signal}) before rendering: ${out}`)));
  });
  return { host, rendered, exit };
}

test('a host whose sandbox is idle ends on its own, and its sandbox child ends with it', async () => {
  const { rendered, exit } = startHost('exit');
  const { json, children } = await rendered;
  expect(json).toBe('2');
  expect(children).toHaveLength(1);
  expect(await exit).toBe(0);
  await ended(children[0]);
});

test.each(['stay', 'busy'] as const)('a sandbox child ends when its host is killed (host %s)', async (mode) => {
  const { host, rendered, exit } = startHost(mode);
  const { children } = await rendered;
  expect(children).toHaveLength(1);
  expect(alive(children[0])).toBe(true);
  host.kill('SIGKILL');
  await exit;
  // A busy child's event loop is held by its job: it must not run on for the job's days.
  await ended(children[0]);
});

test(`a sandbox child idle for ${SANDBOX_IDLE_MS / 1000} s exits, and the next job starts a fresh one`, async () => {
  const sandboxChildren = () =>
    execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(process.pid)], { encoding: 'utf8' })
      .split('\n')
      .filter((l) => l.includes('sandbox-child/main.js'))
      .map((l) => Number(l.trim().split(/\s+/)[0]));
  jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
  const sandbox = new Sandbox(undefined, 1);
  try {
    const render = () => sandbox.run({ kind: 'render', template: { $eval: '"ok"' }, context: {} }, TEST_OWNER);
    // This jest worker may still hold idle children of the process-wide pool from an earlier file.
    const others = new Set(sandboxChildren());
    const ours = () => sandboxChildren().filter((pid) => !others.has(pid));
    await expect(render()).resolves.toEqual({ ok: true, json: '"ok"' });
    const [first] = ours();
    expect(ours()).toHaveLength(1);
    jest.advanceTimersByTime(SANDBOX_IDLE_MS - 1);
    expect(alive(first)).toBe(true);
    jest.advanceTimersByTime(1);
    jest.useRealTimers();
    await ended(first);
    await expect(render()).resolves.toEqual({ ok: true, json: '"ok"' });
    expect(ours()).not.toContain(first);
    expect(ours()).toHaveLength(1);
  } finally {
    jest.useRealTimers();
    await sandbox.close();
  }
});
