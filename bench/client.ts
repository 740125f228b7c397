/**
 * The bench's load, as workers and task creators make it: lifecycles (createTask → claimWork →
 * reportCompleted), task creation and backlog claims over HTTP with taskcluster-client v87. It
 * needs only a root URL and credentials, so it runs in a process of its own (bench/load.ts) and
 * the service's process counts only the service's CPU.
 */
import * as slugid from 'slugid';

/** The taskcluster-client default agent allows 50 sockets; 50 idle workers plus traffic need more. */
const CLIENT_MAX_SOCKETS = 256;
/** Give up on a lifecycle whose claim finds nothing for this long (e.g. a lost hint). */
export const STEP_TIMEOUT_MS = 30_000;
/** After an unexpected error, pause briefly so a failing loop does not spin. */
export const ERROR_PAUSE_MS = 50;

export const WORKER = { workerGroup: 'bench', workerId: 'w' };

export interface Credentials {
  clientId: string;
  accessToken: string;
  certificate?: string;
}

export interface Errors {
  count: number;
  first: string[];
}

export const newErrors = (): Errors => ({ count: 0, first: [] });

export function noteError(errors: Errors, err: unknown): void {
  errors.count++;
  if (errors.first.length < 3) errors.first.push(String((err as Error)?.message ?? err).split('\n')[0]);
}

let tcModule: any;

/** taskcluster-client v87 is ESM; a dynamic import works from this CommonJS output. */
export async function taskcluster(): Promise<any> {
  if (!tcModule) {
    tcModule = (await import('taskcluster-client')).default;
    tcModule.agents.http.maxSockets = CLIENT_MAX_SOCKETS;
  }
  return tcModule;
}

/** Queue clients of one service: root credentials unless others are given. */
export type QueueFactory = (credentials?: Credentials) => any;

export async function queueFactory(rootUrl: string, root: Credentials): Promise<QueueFactory> {
  const tc = await taskcluster();
  return (credentials = root) => new tc.Queue({ rootUrl, credentials, retries: 0 });
}

/** A minimal valid task definition. */
export function taskDef(taskQueueId: string, deadlineInMs = 3600_000): Record<string, unknown> {
  const now = Date.now();
  return {
    taskQueueId,
    created: new Date(now).toJSON(),
    deadline: new Date(now + deadlineInMs).toJSON(),
    payload: { command: ['echo', 'hello'] },
    metadata: { name: 'bench task', description: 'a benchmark task', owner: 'bench@example.com', source: 'https://example.com/bench' },
  };
}

export const newTaskId = (): string => slugid.nice();

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Runs `body(loop)` on `concurrency` parallel loops, each until its body returns false. */
export async function runLoops(concurrency: number, body: (loop: number) => Promise<boolean>): Promise<void> {
  await Promise.all(
    Array.from({ length: concurrency }, async (_, loop) => {
      while (await body(loop));
    }),
  );
}

/**
 * createTask → claimWork (tasks: 1, until it gets one) → reportCompleted with the claim's
 * credentials. `creator` creates the task (another instance of the app, or the same one).
 */
export async function lifecycle(queue: QueueFactory, taskQueueId: string, deadlineInMs?: number, workerId = WORKER.workerId, creator = queue()): Promise<void> {
  const root = queue();
  await creator.createTask(newTaskId(), taskDef(taskQueueId, deadlineInMs));
  // Bounded, so a phase ends even when hints go missing (e.g. a create that failed half-way).
  const until = Date.now() + STEP_TIMEOUT_MS;
  for (;;) {
    if (Date.now() > until) throw new Error(`no task to claim from ${taskQueueId} within ${STEP_TIMEOUT_MS / 1000} s`);
    const { tasks } = await root.claimWork(taskQueueId, { ...WORKER, workerId, tasks: 1 });
    if (!tasks.length) continue;
    const c = tasks[0];
    await queue(c.credentials).reportCompleted(c.status.taskId, c.runId);
    return;
  }
}

/** A closed loop: `concurrency` workers run whole lifecycles until `count` are started or `durationMs` passes. */
export interface LoopJob {
  kind: 'loop';
  rootUrl: string;
  credentials: Credentials;
  /** Tasks are created through this instance (default: rootUrl). */
  creatorUrl?: string;
  taskQueueId: string;
  concurrency: number;
  durationMs?: number;
  count?: number;
  deadlineInMs?: number;
}

/** `tasks` createTask calls on `concurrency` loops. */
export interface CreateJob {
  kind: 'create';
  rootUrl: string;
  credentials: Credentials;
  taskQueueId: string;
  tasks: number;
  concurrency: number;
}

/**
 * `loops` workers claim with claimWork(tasks: `batch`) and report every claimed task completed with
 * its run's credentials (a batch's reports side by side), until `tasks` are done or a poll comes
 * back empty: the side-by-side measurement against Taskcluster's drain (docs/performance.md).
 */
export interface DrainJob {
  kind: 'drain';
  rootUrl: string;
  credentials: Credentials;
  taskQueueId: string;
  tasks: number;
  loops: number;
  batch: number;
}

export type LoadJob = LoopJob | CreateJob | DrainJob;

export interface LoadResult {
  /** Lifecycles completed, tasks created, or tasks claimed and reported (drain). */
  done: number;
  /** claimWork calls that returned tasks (drain). */
  batches: number;
  /** From the first request to the last completion (drain: from the first claim to the last report). */
  seconds: number;
  errors: Errors;
}

export async function runJob(job: LoadJob): Promise<LoadResult> {
  const queue = await queueFactory(job.rootUrl, job.credentials);
  const root = queue();
  const errors = newErrors();
  let done = 0;
  let batches = 0;
  const t0 = performance.now();
  if (job.kind === 'loop') {
    const creator = job.creatorUrl ? (await queueFactory(job.creatorUrl, job.credentials))() : root;
    let started = 0;
    const stopAt = job.durationMs === undefined ? Infinity : Date.now() + job.durationMs;
    await runLoops(job.concurrency, async (loop) => {
      if (Date.now() >= stopAt || (job.count !== undefined && started >= job.count)) return false;
      started++;
      try {
        await lifecycle(queue, job.taskQueueId, job.deadlineInMs, `w${loop}`, creator);
        done++;
      } catch (err) {
        noteError(errors, err);
        await sleep(ERROR_PAUSE_MS);
      }
      return true;
    });
    return { done, batches, seconds: (performance.now() - t0) / 1000, errors };
  }
  if (job.kind === 'create') {
    await runLoops(job.concurrency, async () => {
      if (done >= job.tasks) return false;
      done++;
      try {
        await root.createTask(newTaskId(), taskDef(job.taskQueueId));
      } catch (err) {
        done--;
        noteError(errors, err);
        await sleep(ERROR_PAUSE_MS);
      }
      return true;
    });
    return { done, batches, seconds: (performance.now() - t0) / 1000, errors };
  }
  let drainedAt = 0;
  let claimed = 0;
  await runLoops(job.loops, async () => {
    if (claimed >= job.tasks) return false;
    try {
      const { tasks } = await root.claimWork(job.taskQueueId, { ...WORKER, tasks: job.batch });
      if (!tasks.length) return false; // the poll window passed without work: the backlog is gone
      claimed += tasks.length;
      batches++;
      await Promise.all(
        tasks.map(async (c: { status: { taskId: string }; runId: number; credentials: Credentials }) => {
          await queue(c.credentials).reportCompleted(c.status.taskId, c.runId);
          done++;
        }),
      );
      if (done >= job.tasks && !drainedAt) drainedAt = performance.now();
    } catch (err) {
      noteError(errors, err);
      await sleep(ERROR_PAUSE_MS);
    }
    return true;
  });
  return { done, batches, seconds: ((drainedAt || performance.now()) - t0) / 1000, errors };
}
