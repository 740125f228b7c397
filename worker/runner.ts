/**
 * Runs the task command in its own process group, streams its output into the task log, and stops
 * it on maxRunTime or when asked (claim lost, worker shutdown): SIGTERM to the whole group, then
 * SIGKILL after a grace period.
 */
import { spawn } from 'node:child_process';
import type { Writable } from 'node:stream';

/** Time a stopped command gets to exit after SIGTERM before SIGKILL. */
export const KILL_GRACE_MS = 5_000;
/** After the command exits, how long to wait for grandchildren still holding its output pipes. */
const OUTPUT_DRAIN_MS = 1_000;

export type RunResult =
  | { kind: 'exited'; exitCode: number | null; signal: NodeJS.Signals | null; durationMs: number }
  | { kind: 'timed-out'; durationMs: number }
  | { kind: 'stopped'; reason: unknown; durationMs: number }
  /** The program could not be started at all (ENOENT, EACCES, ...). */
  | { kind: 'spawn-error'; error: NodeJS.ErrnoException };

export interface RunOptions {
  command: string[];
  env: Record<string, string>;
  cwd: string;
  maxRunTimeS: number;
  output: Writable;
  /** Aborting stops the command; the abort reason is returned in the result. */
  signal?: AbortSignal;
  killGraceMs?: number;
}

function killGroup(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig);
  } catch {
    // The group is gone already.
  }
}

export function runCommand(opts: RunOptions): Promise<RunResult> {
  const started = Date.now();
  const grace = opts.killGraceMs ?? KILL_GRACE_MS;
  return new Promise((resolve) => {
    if (opts.signal?.aborted) return resolve({ kind: 'stopped', reason: opts.signal.reason, durationMs: 0 });
    const child = spawn(opts.command[0], opts.command.slice(1), {
      cwd: opts.cwd,
      env: opts.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // own process group, so a stop reaches grandchildren too
    });
    let stopped: { kind: 'timed-out' } | { kind: 'stopped'; reason: unknown } | undefined;
    let killTimer: NodeJS.Timeout | undefined;
    let spawnError: NodeJS.ErrnoException | undefined;
    const stop = (why: NonNullable<typeof stopped>) => {
      if (stopped || child.exitCode !== null || child.signalCode !== null || !child.pid) return;
      stopped = why;
      killGroup(child.pid, 'SIGTERM');
      killTimer = setTimeout(() => killGroup(child.pid!, 'SIGKILL'), grace);
    };
    const runTimer = setTimeout(() => stop({ kind: 'timed-out' }), opts.maxRunTimeS * 1000);
    const onAbort = () => stop({ kind: 'stopped', reason: opts.signal!.reason });
    opts.signal?.addEventListener('abort', onAbort, { once: true });

    // pipe (not 'data' + write) so a chatty command is slowed down by the log file, not buffered in memory.
    for (const s of [child.stdout!, child.stderr!]) s.pipe(opts.output, { end: false });

    child.on('error', (err: NodeJS.ErrnoException) => {
      // Only start-up failures matter; a failed kill is handled by the exit path.
      if (!child.pid) spawnError = err;
    });
    child.once('close', () => finish());
    child.once('exit', () => {
      // Wait briefly for the pipes; a daemonized grandchild may hold them open forever.
      setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
        finish();
      }, OUTPUT_DRAIN_MS).unref();
    });

    let done = false;
    function finish() {
      if (done) return;
      done = true;
      clearTimeout(runTimer);
      opts.signal?.removeEventListener('abort', onAbort);
      if (child.pid) killGroup(child.pid, 'SIGKILL'); // leftovers of the group never outlive the run
      if (killTimer) clearTimeout(killTimer);
      const durationMs = Date.now() - started;
      if (spawnError) resolve({ kind: 'spawn-error', error: spawnError });
      else if (stopped?.kind === 'timed-out') resolve({ kind: 'timed-out', durationMs });
      else if (stopped) resolve({ kind: 'stopped', reason: stopped.reason, durationMs });
      else resolve({ kind: 'exited', exitCode: child.exitCode, signal: child.signalCode, durationMs });
    }
  });
}
