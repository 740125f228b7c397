/**
 * Builds the worker once and runs it as a separate process, collecting its log lines.
 */
import { spawn, spawnSync, ChildProcess } from 'node:child_process';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');
/** A private output directory, so a concurrent `npm run build` (package test) cannot race this one. */
export const E2E_DIST = path.join(ROOT, '.local', 'e2e-worker-dist');
export const WORKER_MAIN = path.join(E2E_DIST, 'worker', 'main.js');

/**
 * Compiles the project into `outDir` (the worker's private directory by default). Without type
 * checking (`npm test` type-checks once, in its checks): the same output in half the CPU time.
 */
export function buildWorker(outDir = E2E_DIST): void {
  const tsc = require.resolve('typescript/bin/tsc');
  const r = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json', '--noCheck', '--outDir', outDir], { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`tsc failed:\n${r.stdout}\n${r.stderr}`);
}

export async function until<T>(fn: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs: number, what: string): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < end) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ''}`);
}

export class WorkerProcess {
  readonly lines: string[] = [];
  readonly exited: Promise<number | null>;
  private readonly proc: ChildProcess;

  constructor(args: string[], env: Record<string, string> = {}) {
    this.proc = spawn(process.execPath, [WORKER_MAIN, ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let buf = '';
    const onData = (c: Buffer) => {
      buf += c.toString('utf8');
      const parts = buf.split('\n');
      buf = parts.pop()!;
      this.lines.push(...parts);
      if (process.env.E2E_WORKER_VERBOSE) parts.forEach((l) => process.stderr.write(`[worker] ${l}\n`));
    };
    this.proc.stdout!.on('data', onData);
    this.proc.stderr!.on('data', onData);
    this.exited = new Promise((resolve) => this.proc.once('exit', (code) => resolve(code)));
  }

  get running(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** Lines matching every pattern. */
  matching(...patterns: (string | RegExp)[]): string[] {
    return this.lines.filter((l) => patterns.every((p) => (typeof p === 'string' ? l.includes(p) : p.test(l))));
  }

  waitForLine(timeoutMs: number, ...patterns: (string | RegExp)[]): Promise<string> {
    return until(() => this.matching(...patterns)[0], timeoutMs, `a worker log line matching ${patterns.join(' & ')}; log so far:\n${this.lines.join('\n')}`);
  }

  signal(sig: NodeJS.Signals): void {
    this.proc.kill(sig);
  }

  /** SIGTERM and wait (SIGKILL if it hangs). */
  async stop(timeoutMs = 20_000): Promise<number | null> {
    if (!this.running) return this.exited;
    this.proc.kill('SIGTERM');
    const t = setTimeout(() => this.proc.kill('SIGKILL'), timeoutMs);
    try {
      return await this.exited;
    } finally {
      clearTimeout(t);
    }
  }
}
