/**
 * Runs what hook authors and trigger callers control — JSON-e templates and `triggerSchema`
 * validation — in child processes with a time and a memory budget, so that no template or schema
 * can stop the host or stall other requests. The memory budget is the child's V8 heap limit: V8
 * aborts the process that reaches it, which a worker thread's limit does not reliably confine to the
 * thread (for some allocation shapes it aborts the whole process), so each child is a process of
 * its own and its abort is the 400. The main event loop never runs a job; a child over time is
 * killed and replaced.
 *
 * A small pool of children is reused (starting one costs ~0.2 s, twice a worker thread's); jobs
 * beyond the pool wait their turn. Idle children keep neither the host alive nor themselves for
 * long, and end with the host. Over budget is a 400 naming the budget.
 *
 * Turns are fair between owners (a hook): one owner's flood of jobs that each use their whole
 * budget must not stall every other hook's triggers and schedules. So
 *   - an owner runs at most `max(1, size - 1)` jobs at once: another owner finds a free child;
 *   - a freed child takes the next owner in turn (round robin), not the oldest job (FIFO);
 *   - schedule-class jobs (paced by the service or asked for by a hook's writer) go before
 *     trigger-class ones (paced by callers);
 *   - an owner's trigger-class jobs wait at most SANDBOX_OWNER_WAITING deep, fewer once one of its
 *     jobs went over a budget; more are refused at once (SandboxBusy).
 */
import { ChildProcess, fork } from 'node:child_process';
import type { Socket } from 'node:net';
import path from 'node:path';
import { ApiError } from '../errors';
import { Logger, jsonLogger } from '../log';

/** Wall-clock time one render or validation may take (the slowest legitimate templates render in milliseconds). */
export const SANDBOX_TIME_MS = 2_000;
/** V8 old-generation heap of one child: far above any real hook task, far below the host's. */
export const SANDBOX_HEAP_MB = 64;
/** A rendered task larger than this is no task createTask would accept; the child refuses it before sending it. */
export const SANDBOX_RESULT_CHARS = 1_000_000;
/**
 * The children's program, plain CommonJS, relative to this module in the source tree and in dist/
 * (bin/copy-assets.js) and to the bundled app in the deployment package (bin/package.js bundles it
 * with its libraries, as the package has no node_modules). In a folder of its own: the Functions
 * host loads every .js file beside the app.
 */
export const SANDBOX_CHILD_SCRIPT = 'sandbox-child/main.js';
/**
 * How long a fresh child may take to load its libraries. Not the template's budget: a cold start on
 * a busy host took over 2 s, and counting it refused legitimate hooks as over budget.
 */
export const SANDBOX_BOOT_MS = 30_000;
/**
 * A child idle this long exits: an instance that fires no hooks does not carry extra node processes
 * (~60 MB resident each), while a burst of fires reuses warm ones instead of paying a fork per job.
 */
export const SANDBOX_IDLE_MS = 60_000;
/** Children kept; two cores are the smallest host, and jobs take milliseconds. */
const POOL_SIZE = 2;
/**
 * Trigger-class jobs one owner may have waiting; more are refused at once. A legitimate burst of
 * triggers takes milliseconds each, so this is far above it; a flood's backlog beyond it would only
 * make its own callers wait (each waiting job may take a whole time budget).
 */
export const SANDBOX_OWNER_WAITING = 16;
/**
 * The same once one of the owner's jobs went over a budget, until one ends within it (or the owner
 * has nothing in the pool): a flood of such jobs is refused at once instead of after seconds.
 */
export const SANDBOX_PENALIZED_WAITING = 1;
/** Schedule-class jobs are taken before trigger-class ones. */
const PRIORITIES = ['schedule', 'trigger'] as const;
/** Compiled schemas a child keeps, keyed by the schema's JSON (hooks are few; this bounds churn). */
const SCHEMA_CACHE = 200;
/** The start of a dead child's stderr kept for its log event (V8's heap-limit report comes first). */
const STDERR_KEEP_CHARS = 4_000;
/** What V8 writes when a heap reaches its limit, just before it aborts the process. */
const HEAP_LIMIT_REPORT = /Reached heap limit|JavaScript heap out of memory/;
/** Exit code of a process ended by SIGABRT (128 + 6), as V8's out-of-memory abort ends it. */
const ABORT_EXIT_CODE = 134;

export type SandboxJob =
  | { kind: 'render'; template: unknown; context: Record<string, unknown> }
  | { kind: 'compile'; schema: unknown }
  | { kind: 'validate'; schema: unknown; data: unknown };

export type SandboxResult =
  { ok: true; json?: string; valid?: boolean; errors?: { instancePath: string; message?: string }[] } | { ok: false; name: string; message: string };

/**
 * Whose job it is. `owner` is the unit of fairness (a hook, `hookGroupId/hookId`, so one trigger
 * token too). `schedule`: work the service paces itself (scheduled and event-bound fires, run by
 * the reaper one hook at a time) or that a hook's authenticated writer asks for (definition
 * checks); never refused. `trigger`: work callers pace (triggerHook, triggerHookWithToken);
 * refused past the owner's waiting bound.
 */
export interface SandboxOwner {
  owner: string;
  priority: (typeof PRIORITIES)[number];
}

interface Pending {
  job: SandboxJob;
  resolve: (r: SandboxResult) => void;
  reject: (e: Error) => void;
}

export interface SandboxBudget {
  timeMs: number;
  heapMb: number;
}

/** A 400 saying which budget a template or schema went over. */
export function overBudget(what: string, budget: 'time' | 'memory' | 'size', b: SandboxBudget): ApiError {
  const limit =
    budget === 'time' ? `${b.timeMs} ms of time` : budget === 'memory' ? `${b.heapMb} MB of memory` : `${SANDBOX_RESULT_CHARS} characters of output`;
  return new ApiError('InputError', `${what} went over its budget of ${limit}`);
}

/** The over-budget errors the pool rejects with; callers turn them into overBudget(...). */
export class BudgetExceeded extends Error {
  constructor(readonly budget: 'time' | 'memory') {
    super(`sandbox ${budget} budget exceeded`);
  }
}

/** A trigger-class job refused because its owner has `waiting` jobs waiting already; callers turn it into an ApiError. */
export class SandboxBusy extends Error {
  constructor(
    readonly owner: string,
    readonly waiting: number,
    readonly penalized: boolean,
  ) {
    super(`sandbox owner ${owner} has ${waiting} jobs waiting${penalized ? ' after a job over its budget' : ''}`);
  }
}

/** One owner's state in the pool; dropped when it has nothing running or waiting. */
interface Owner {
  running: number;
  waiting: Record<SandboxOwner['priority'], Pending[]>;
  /** Set when one of its jobs went over a budget; cleared when one ends within it. */
  penalized: boolean;
}

/** How a child ended, read once its stderr is closed too. */
interface Death {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
}

interface Child {
  proc: ChildProcess;
  /** Settles when the child has said it is ready (its libraries loaded). */
  ready: Promise<void>;
  /** Settles when the child has ended, however it ended. */
  gone: Promise<Death>;
  /** Set when the pool ended the child itself (idle, over time, closing): its end is no news. */
  retired: boolean;
  /** Set while the child runs a job. */
  running: boolean;
}

const exitOf = (d: Death) => (d.signal ? `signal ${d.signal}` : `code ${d.code}`);
/** A child that reached its heap limit: V8 reports it and aborts (SIGABRT, or 134 through a shell); any signal is the same to the job. */
const outOfMemory = (d: Death) => HEAP_LIMIT_REPORT.test(d.stderr);
const diedOfMemory = (d: Death) => outOfMemory(d) || d.signal !== null || d.code === ABORT_EXIT_CODE;
/** Young generation is three semi-spaces in V8: about an eighth of the old-generation budget, as a worker thread's was. */
const semiSpaceMb = (heapMb: number) => Math.max(1, Math.round(heapMb / 24));

class Slot {
  private child?: Child;
  private idle?: NodeJS.Timeout;
  busy = false;

  constructor(
    private readonly budget: SandboxBudget,
    private readonly log: Logger,
  ) {}

  private spawn(): Child {
    const proc = fork(path.join(__dirname, SANDBOX_CHILD_SCRIPT), [String(SCHEMA_CACHE), String(SANDBOX_RESULT_CHARS)], {
      // Replaces the host's own flags (a test runner's, an inspector): the child gets only its limits.
      execArgv: [`--max-old-space-size=${this.budget.heapMb}`, `--max-semi-space-size=${semiSpaceMb(this.budget.heapMb)}`],
      // Nothing of the host's environment (NODE_OPTIONS could preload code or lift the limits).
      env: {},
      serialization: 'advanced',
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    // An idle pool must not keep the host alive.
    proc.unref();
    (proc.channel as { unref?: () => void } | undefined)?.unref?.();
    (proc.stderr as Socket).unref();
    let stderr = '';
    proc.stderr!.setEncoding('utf8');
    proc.stderr!.on('data', (chunk: string) => {
      if (stderr.length < STDERR_KEEP_CHARS) stderr = (stderr + chunk).slice(0, STDERR_KEEP_CHARS);
    });
    // A failed send or a late error of an ended child is told by its end ('close').
    proc.on('error', () => undefined);
    const gone = new Promise<Death>((resolve) => proc.once('close', (code, signal) => resolve({ code, signal, stderr })));
    const child: Child = { proc, gone, retired: false, running: false, ready: Promise.resolve() };
    child.ready = new Promise<void>((resolve, reject) => {
      let settled = false;
      const settle = (fn: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        proc.off('message', onReady);
        fn();
      };
      const timer = setTimeout(
        () => settle(() => (this.retire(child), reject(new Error(`a sandbox process did not start within ${SANDBOX_BOOT_MS} ms`)))),
        SANDBOX_BOOT_MS,
      );
      const onReady = () => settle(resolve);
      proc.once('message', onReady);
      void gone.then((d) => settle(() => reject(new Error(`a sandbox process ended (${exitOf(d)}) while starting`))));
    });
    void gone.then((d) => {
      if (this.child === child) this.child = undefined;
      if (child.retired) return;
      // One event instead of V8's report on the host's stderr; other output is kept for diagnosis.
      const oom = outOfMemory(d);
      this.log.warn('sandbox-process-ended', { exit: exitOf(d), outOfMemory: oom, running: child.running, ...(oom || !d.stderr ? {} : { stderr: d.stderr }) });
    });
    return child;
  }

  /** Ends a child the pool no longer wants; the next job starts a fresh one. */
  private retire(child: Child, signal: NodeJS.Signals = 'SIGKILL'): void {
    child.retired = true;
    if (this.child === child) this.child = undefined;
    child.proc.kill(signal);
  }

  /**
   * Runs one job; its time budget starts once the child is ready (a child's start is not the
   * template's cost). A child that went over a budget, or failed to start, is gone and the next job
   * starts a fresh one.
   */
  async run(job: SandboxJob): Promise<SandboxResult> {
    clearTimeout(this.idle);
    const child = (this.child ??= this.spawn());
    this.busy = child.running = true;
    try {
      await child.ready;
    } catch (e) {
      this.busy = child.running = false;
      throw e;
    }
    return new Promise<SandboxResult>((resolve, reject) => {
      let settled = false;
      const done = (fn: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        child.proc.off('message', onMessage);
        this.busy = child.running = false;
        if (this.child === child) this.idle = setTimeout(() => this.retire(child, 'SIGTERM'), SANDBOX_IDLE_MS).unref();
        fn();
      };
      const onMessage = (r: SandboxResult) => done(() => resolve(r));
      const timer = setTimeout(() => {
        this.retire(child);
        done(() => reject(new BudgetExceeded('time')));
      }, this.budget.timeMs);
      child.proc.on('message', onMessage);
      void child.gone.then((d) =>
        done(() => reject(diedOfMemory(d) ? new BudgetExceeded('memory') : new Error(`a sandbox process ended (${exitOf(d)}) while running a job`))),
      );
      child.proc.send(job);
    });
  }

  async close(): Promise<void> {
    clearTimeout(this.idle);
    const child = this.child;
    if (!child) return;
    this.retire(child);
    await child.gone;
  }
}

export class Sandbox {
  private readonly slots: Slot[];
  /** Owners with jobs running or waiting, in turn order: the one served last is moved to the back. */
  private readonly owners = new Map<string, Owner>();
  /** Children one owner may hold at once: all but one, so that another owner always finds one. */
  private readonly share: number;

  constructor(
    readonly budget: SandboxBudget = { timeMs: SANDBOX_TIME_MS, heapMb: SANDBOX_HEAP_MB },
    size = POOL_SIZE,
    log: Logger = jsonLogger(),
  ) {
    this.slots = Array.from({ length: size }, () => new Slot(budget, log));
    this.share = Math.max(1, size - 1);
  }

  /** Runs `job` on `by`'s account; rejects with SandboxBusy at once when its owner's waiting bound is reached. */
  run(job: SandboxJob, by: SandboxOwner): Promise<SandboxResult> {
    return new Promise((resolve, reject) => {
      let o = this.owners.get(by.owner);
      if (!o) this.owners.set(by.owner, (o = { running: 0, waiting: { schedule: [], trigger: [] }, penalized: false }));
      const queue = o.waiting[by.priority];
      if (by.priority === 'trigger' && queue.length >= this.waitingBound(o)) {
        reject(new SandboxBusy(by.owner, queue.length, o.penalized));
        this.forget(by.owner, o);
        return;
      }
      queue.push({ job, resolve, reject });
      this.next();
    });
  }

  private waitingBound(o: Owner): number {
    return o.penalized ? SANDBOX_PENALIZED_WAITING : SANDBOX_OWNER_WAITING;
  }

  private next(): void {
    for (const slot of this.slots) {
      if (slot.busy) continue;
      const turn = this.take();
      if (!turn) return;
      const { key, o, p } = turn;
      o.running++;
      slot
        .run(p.job)
        .then(
          (r) => {
            o.penalized = false;
            p.resolve(r);
          },
          (e) => {
            if (e instanceof BudgetExceeded) this.penalize(key, o);
            p.reject(e);
          },
        )
        .finally(() => {
          o.running--;
          this.forget(key, o);
          this.next();
        });
    }
  }

  /** The next job: schedule class first; within a class, the first owner in turn order below its share. */
  private take(): { key: string; o: Owner; p: Pending } | undefined {
    for (const priority of PRIORITIES) {
      for (const [key, o] of this.owners) {
        if (o.running >= this.share || !o.waiting[priority].length) continue;
        this.owners.delete(key);
        this.owners.set(key, o);
        return { key, o, p: o.waiting[priority].shift()! };
      }
    }
    return undefined;
  }

  /** An owner whose job went over a budget: its trigger-class jobs beyond the smaller bound are refused now. */
  private penalize(key: string, o: Owner): void {
    o.penalized = true;
    const refused = o.waiting.trigger.splice(SANDBOX_PENALIZED_WAITING);
    for (const p of refused) p.reject(new SandboxBusy(key, SANDBOX_PENALIZED_WAITING, true));
  }

  private forget(key: string, o: Owner): void {
    if (!o.running && !o.waiting.schedule.length && !o.waiting.trigger.length) this.owners.delete(key);
  }

  async close(): Promise<void> {
    await Promise.all(this.slots.map((s) => s.close()));
  }
}

/** The process's pool: every render and trigger-schema check of the service goes through it. */
export const sandbox = new Sandbox();
