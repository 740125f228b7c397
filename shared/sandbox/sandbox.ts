/**
 * Runs what hook authors and trigger callers control — JSON-e templates and `triggerSchema`
 * validation — in worker threads with a time and a memory budget, so that no template or schema
 * can stop the process (V8 out of memory ends only the worker) or stall other requests (the main
 * event loop never runs them; a worker over time is terminated and replaced).
 *
 * A small pool of workers is reused (starting one costs tens of milliseconds); jobs beyond the
 * pool wait their turn. Over budget is a 400 naming the budget.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { ApiError } from '../errors';

/** Wall-clock time one render or validation may take (the slowest legitimate templates render in milliseconds). */
export const SANDBOX_TIME_MS = 2_000;
/** V8 old-generation heap of one worker: far above any real hook task, far below the process's. */
export const SANDBOX_HEAP_MB = 64;
/** A rendered task larger than this is no task createTask would accept; refused before it reaches the main thread. */
export const SANDBOX_RESULT_CHARS = 1_000_000;
/** The folder beside the bundled app that holds the workers' libraries, each bundled whole (bin/package.js). */
export const SANDBOX_LIBS_DIR = 'sandbox-libs';
/**
 * How long a fresh worker may take to load its libraries. Not the template's budget: a cold start on
 * a busy host took over 2 s, and counting it refused legitimate hooks as over budget.
 */
export const SANDBOX_BOOT_MS = 30_000;
/** Workers kept; two cores are the smallest host, and jobs take milliseconds. */
const POOL_SIZE = 2;
/** Compiled schemas a worker keeps, keyed by the schema's JSON (hooks are few; this bounds churn). */
const SCHEMA_CACHE = 200;

export type SandboxJob =
  | { kind: 'render'; template: unknown; context: Record<string, unknown> }
  | { kind: 'compile'; schema: unknown }
  | { kind: 'validate'; schema: unknown; data: unknown };

export type SandboxResult =
  { ok: true; json?: string; valid?: boolean; errors?: { instancePath: string; message?: string }[] } | { ok: false; name: string; message: string };

/** What a worker runs: plain CommonJS, as the worker evaluates it from this string (no build step, same in tests). */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const jsone = require(workerData.jsone);
const Ajv = require(workerData.ajv).default;
const addFormats = require(workerData.ajvFormats).default;
const ajv = new Ajv({ allErrors: true, strict: false });
addFormats(ajv);
const compiled = new Map();
parentPort.postMessage({ ready: true });
function compile(schema) {
  const key = JSON.stringify(schema);
  let fn = compiled.get(key);
  if (!fn) {
    fn = ajv.compile(schema);
    ajv.removeSchema(schema);
    if (compiled.size >= workerData.schemaCache) compiled.delete(compiled.keys().next().value);
    compiled.set(key, fn);
  }
  return fn;
}
function run(job) {
  if (job.kind === 'render') {
    const json = JSON.stringify(jsone(job.template, job.context));
    if (json !== undefined && json.length > workerData.resultChars)
      return { ok: false, name: 'ResultTooLarge', message: 'the rendered result is ' + json.length + ' characters of JSON, more than ' + workerData.resultChars };
    return { ok: true, json: json === undefined ? 'null' : json };
  }
  const fn = compile(job.schema);
  if (job.kind === 'compile') return { ok: true };
  const valid = fn(job.data);
  return { ok: true, valid, errors: valid ? [] : (fn.errors || []).slice(0, 20).map((e) => ({ instancePath: e.instancePath, message: e.message })) };
}
parentPort.on('message', (job) => {
  let out;
  try {
    out = run(job);
  } catch (e) {
    out = { ok: false, name: (e && e.name) || 'Error', message: String((e && e.message) || e) };
  }
  parentPort.postMessage(out);
});
`;

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

/**
 * Where a worker loads a library from. The deployment package has no node_modules: bin/package.js
 * bundles each library the workers load into `sandbox-libs/` beside the bundled app (whose
 * __dirname this then is); from the source tree or dist/, node resolves the package as usual.
 */
export function libraryPath(name: 'json-e' | 'ajv' | 'ajv-formats'): string {
  const bundled = path.join(__dirname, SANDBOX_LIBS_DIR, `${name}.js`);
  return fs.existsSync(bundled) ? bundled : require.resolve(name);
}

class Slot {
  private worker?: { w: Worker; ready: Promise<void> };
  busy = false;

  constructor(private readonly budget: SandboxBudget) {}

  private spawn(): { w: Worker; ready: Promise<void> } {
    const w = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: {
        jsone: libraryPath('json-e'),
        ajv: libraryPath('ajv'),
        ajvFormats: libraryPath('ajv-formats'),
        schemaCache: SCHEMA_CACHE,
        resultChars: SANDBOX_RESULT_CHARS,
      },
      resourceLimits: { maxOldGenerationSizeMb: this.budget.heapMb, maxYoungGenerationSizeMb: Math.max(4, this.budget.heapMb / 8) },
    });
    // An idle pool must not keep the process alive; a late error of a discarded worker is not news.
    w.unref();
    w.on('error', () => undefined);
    const ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => fail(new Error(`a sandbox worker did not start within ${SANDBOX_BOOT_MS} ms`)), SANDBOX_BOOT_MS);
      const settle = () => {
        clearTimeout(timer);
        w.off('message', onReady);
        w.off('error', fail);
        w.off('exit', onExit);
      };
      const onReady = () => {
        settle();
        resolve();
      };
      const fail = (e: Error) => {
        settle();
        void w.terminate();
        reject(e);
      };
      const onExit = (code: number) => fail(new Error(`a sandbox worker exited with code ${code} while starting`));
      w.once('message', onReady);
      w.on('error', fail);
      w.on('exit', onExit);
    });
    return { w, ready };
  }

  /**
   * Runs one job; its time budget starts once the worker is ready (a worker's start is not the
   * template's cost). A worker that went over a budget, or failed to start, is gone and the next
   * job starts a fresh one.
   */
  async run(job: SandboxJob): Promise<SandboxResult> {
    const worker = (this.worker ??= this.spawn());
    const { w } = worker;
    this.busy = true;
    const discard = () => {
      if (this.worker === worker) this.worker = undefined;
    };
    try {
      await worker.ready;
    } catch (e) {
      discard();
      this.busy = false;
      throw e;
    }
    return new Promise<SandboxResult>((resolve, reject) => {
      const done = (fn: () => void) => {
        clearTimeout(timer);
        w.off('message', onMessage);
        w.off('error', onError);
        w.off('exit', onExit);
        this.busy = false;
        fn();
      };
      const onMessage = (r: SandboxResult) => done(() => resolve(r));
      const onError = (e: Error & { code?: string }) => {
        discard();
        done(() => reject(e.code === 'ERR_WORKER_OUT_OF_MEMORY' ? new BudgetExceeded('memory') : e));
      };
      const onExit = () => {
        discard();
        done(() => reject(new BudgetExceeded('memory')));
      };
      const timer = setTimeout(() => {
        discard();
        void w.terminate();
        done(() => reject(new BudgetExceeded('time')));
      }, this.budget.timeMs);
      w.on('message', onMessage);
      w.on('error', onError);
      w.on('exit', onExit);
      w.postMessage(job);
    });
  }

  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    if (worker) await worker.w.terminate();
  }
}

export class Sandbox {
  private readonly slots: Slot[];
  private readonly waiting: Pending[] = [];

  constructor(
    readonly budget: SandboxBudget = { timeMs: SANDBOX_TIME_MS, heapMb: SANDBOX_HEAP_MB },
    size = POOL_SIZE,
  ) {
    this.slots = Array.from({ length: size }, () => new Slot(budget));
  }

  run(job: SandboxJob): Promise<SandboxResult> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ job, resolve, reject });
      this.next();
    });
  }

  private next(): void {
    for (const slot of this.slots) {
      if (slot.busy) continue;
      const p = this.waiting.shift();
      if (!p) return;
      slot
        .run(p.job)
        .then(p.resolve, p.reject)
        .finally(() => this.next());
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.slots.map((s) => s.close()));
  }
}

/** The process's pool: every render and trigger-schema check of the service goes through it. */
export const sandbox = new Sandbox();
