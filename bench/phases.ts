/**
 * The benchmark phases that drive the service over HTTP with taskcluster-client v87, as workers
 * and task creators would.
 */
import { Instance, newTaskId, sleep, taskDef } from './harness';
import { MeterDelta, addDeltas, latencySummary, meterWindow, round, runLoops } from './stats';
import { pollersOf } from '../shared/work/poller';
import { runReaper, ReaperStats } from '../shared/reaper/reaper';
import { EXCHANGES, EXCHANGE_PREFIX } from '../shared/events/exchanges';
import { signedSubscriptionUrls } from '../shared/storage/subscription-queues';
import { queueIdOf } from '../shared/events/subscriptions';
import { deleteUrlFor, parseQueueMessages, pollUrlFor } from '../worker/protocols/azure-queue';

const WORKER = { workerGroup: 'bench', workerId: 'w' };
/** Give up on a phase step that should take milliseconds but hangs (e.g. a lost hint). */
const STEP_TIMEOUT_MS = 30_000;
/** Lifecycles (e) runs at most to put a hint in every pending shard (16 shards: all used with p > 0.99). */
const IDLE_WARMUP_MAX = 200;
/** After an unexpected error, pause briefly so a failing loop does not spin. */
const ERROR_PAUSE_MS = 50;

export interface Errors {
  count: number;
  first: string[];
}

function noteError(errors: Errors, err: unknown): void {
  errors.count++;
  if (errors.first.length < 3) errors.first.push(String((err as Error)?.message ?? err).split('\n')[0]);
}

const newErrors = (): Errors => ({ count: 0, first: [] });

async function waitFor(cond: () => boolean, timeoutMs = STEP_TIMEOUT_MS): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > until) throw new Error('timed out waiting for a condition');
    await sleep(2);
  }
}

/**
 * createTask → claimWork (tasks: 1, until it gets one) → reportCompleted with the claim's
 * credentials. Each closed loop is its own worker, as real workers claim one after another.
 * With `creator`, the task is created through that instance (another instance of the app).
 */
async function lifecycle(inst: Instance, root: any, taskQueueId: string, deadlineInMs?: number, workerId = WORKER.workerId, creator = root): Promise<void> {
  await creator.createTask(newTaskId(), taskDef(taskQueueId, deadlineInMs));
  // Bounded, so a phase ends even when hints go missing (e.g. a create that failed half-way).
  const until = Date.now() + STEP_TIMEOUT_MS;
  for (;;) {
    if (Date.now() > until) throw new Error(`no task to claim from ${taskQueueId} within ${STEP_TIMEOUT_MS / 1000} s`);
    const { tasks } = await root.claimWork(taskQueueId, { ...WORKER, workerId, tasks: 1 });
    if (!tasks.length) continue;
    const c = tasks[0];
    await inst.queue(c.credentials).reportCompleted(c.status.taskId, c.runId);
    return;
  }
}

// ---- (a) pickup latency ----

export interface PickupResult {
  samples: number;
  p50Ms: number;
  p95Ms: number;
  maxMs: number;
  errors: Errors;
}

/**
 * A worker waits in claimWork on `claimer`; after a random pause, a task is created through
 * `creator` (the same instance, or another one that shares the storage but cannot wake this
 * instance's poller). Latency: from just before createTask is sent until the claim arrives.
 */
export async function pickupLatency(claimer: Instance, creator: Instance, taskQueueId: string, samples: number, maxPauseMs: number): Promise<PickupResult> {
  const root = claimer.queue();
  const creatorRoot = creator.queue();
  const poller = pollersOf(claimer.services).get(taskQueueId);
  // Warm up: a first task created on the claiming instance records the priority there.
  await lifecycle(claimer, root, taskQueueId);
  const latencies: number[] = [];
  const errors = newErrors();
  for (let i = 0; i < samples; i++) {
    try {
      const claimed = root.claimWork(taskQueueId, { ...WORKER, tasks: 1 });
      await waitFor(() => poller.waiting > 0);
      await sleep(Math.random() * maxPauseMs);
      const t0 = performance.now();
      await creatorRoot.createTask(newTaskId(), taskDef(taskQueueId));
      const { tasks } = await claimed;
      const t1 = performance.now();
      if (tasks.length !== 1) throw new Error(`claimWork returned ${tasks.length} tasks`);
      latencies.push(t1 - t0);
      await claimer.queue(tasks[0].credentials).reportCompleted(tasks[0].status.taskId, tasks[0].runId);
    } catch (err) {
      noteError(errors, err);
    }
  }
  return {
    ...latencySummary(latencies),
    errors,
  };
}

// ---- (b) closed-loop lifecycle throughput ----

export interface ThroughputResult {
  concurrency: number;
  completed: number;
  seconds: number;
  perSecond: number;
  storage: MeterDelta;
  errors: Errors;
}

/**
 * `concurrency` loops run whole lifecycles until `count` are started or `durationMs` passes. With
 * `creator`, tasks are created through that instance and claimed and reported through `inst`
 * (no task row is cached where it is claimed; the wake cannot reach the claiming poller); the
 * storage figures then cover both instances.
 */
export async function closedLoop(
  inst: Instance,
  taskQueueId: string,
  opts: { concurrency: number; durationMs?: number; count?: number; deadlineInMs?: number; creator?: Instance },
): Promise<ThroughputResult> {
  const root = inst.queue();
  const creatorRoot = opts.creator?.queue() ?? root;
  const creatorMeter = opts.creator && meterWindow(opts.creator.services.storage.meter);
  const errors = newErrors();
  let started = 0;
  let completed = 0;
  const stopAt = opts.durationMs === undefined ? Infinity : Date.now() + opts.durationMs;
  const meter = meterWindow(inst.services.storage.meter);
  const t0 = performance.now();
  await runLoops(opts.concurrency, async (loop) => {
    if (Date.now() >= stopAt || (opts.count !== undefined && started >= opts.count)) return false;
    started++;
    try {
      await lifecycle(inst, root, taskQueueId, opts.deadlineInMs, `w${loop}`, creatorRoot);
      completed++;
    } catch (err) {
      noteError(errors, err);
      await sleep(ERROR_PAUSE_MS);
    }
    return true;
  });
  const seconds = (performance.now() - t0) / 1000;
  // The lifecycles' index writes, queued off their requests' path, belong in this window.
  await Promise.all([inst.services.indexes.settled(), opts.creator?.services.indexes.settled()]);
  const storage = creatorMeter ? addDeltas(meter.stop(), creatorMeter.stop()) : meter.stop();
  return { concurrency: opts.concurrency, completed, seconds: round(seconds), perSecond: round(completed / seconds, 1), storage, errors };
}

// ---- (c) backlog drain ----

export interface BacklogResult {
  tasks: number;
  createPerSecond: number;
  drainLoops: number;
  claimBatch: number;
  claimed: number;
  drainSeconds: number;
  claimedPerSecond: number;
  meanBatch: number;
  drainStorage: MeterDelta;
  errors: Errors;
}

/** Creates `tasks` tasks, then `loops` workers drain them with claimWork(tasks: `batch`). */
export async function backlogDrain(
  inst: Instance,
  taskQueueId: string,
  opts: { tasks: number; createConcurrency: number; loops: number; batch: number },
): Promise<BacklogResult> {
  const root = inst.queue();
  const errors = newErrors();
  let created = 0;
  const c0 = performance.now();
  await runLoops(opts.createConcurrency, async () => {
    if (created >= opts.tasks) return false;
    created++;
    try {
      await root.createTask(newTaskId(), taskDef(taskQueueId));
    } catch (err) {
      created--;
      noteError(errors, err);
      await sleep(ERROR_PAUSE_MS);
    }
    return true;
  });
  const createSeconds = (performance.now() - c0) / 1000;

  let claimed = 0;
  let batches = 0;
  let drainedAt = 0;
  const meter = meterWindow(inst.services.storage.meter);
  const d0 = performance.now();
  await runLoops(opts.loops, async () => {
    if (claimed >= opts.tasks) return false;
    try {
      const { tasks } = await root.claimWork(taskQueueId, { ...WORKER, tasks: opts.batch });
      if (!tasks.length) return false; // the poll window passed without work: the backlog is gone
      claimed += tasks.length;
      batches++;
      if (claimed >= opts.tasks && !drainedAt) drainedAt = performance.now();
    } catch (err) {
      noteError(errors, err);
      await sleep(ERROR_PAUSE_MS);
    }
    return true;
  });
  const drainSeconds = ((drainedAt || performance.now()) - d0) / 1000;
  return {
    tasks: opts.tasks,
    createPerSecond: round(opts.tasks / createSeconds, 1),
    drainLoops: opts.loops,
    claimBatch: opts.batch,
    claimed,
    drainSeconds: round(drainSeconds),
    claimedPerSecond: round(claimed / drainSeconds, 1),
    meanBatch: round(claimed / Math.max(1, batches), 1),
    drainStorage: meter.stop(),
    errors,
  };
}

// ---- (d) storage transactions per lifecycle, background included ----

export interface LifecycleCostResult {
  lifecycles: number;
  foreground: MeterDelta;
  background: MeterDelta;
  reaper: ReaperStats & { passes: number };
  errors: Errors;
  /** The first lifecycle of each worker, before the measured ones (first-sight rows included). */
  warmup: { lifecycles: number; storage: MeterDelta };
}

/**
 * Runs `count` lifecycles whose deadlines are `deadlineInMs` out on an instance with a short claim
 * timeout, waits until every claim-expiry and deadline trigger would be due, then runs the reaper
 * until a pass finds none. Foreground = the API calls; background = the reaper's work for them.
 */
export async function lifecycleCost(
  inst: Instance,
  taskQueueId: string,
  opts: { count: number; concurrency: number; deadlineInMs: number },
): Promise<LifecycleCostResult> {
  // One lifecycle per worker first: a worker's and a task queue's first-sight rows (Workers,
  // TaskQueues, the pending queue) are paid once per worker or queue, not per lifecycle; counted apart.
  const warm = await closedLoop(inst, taskQueueId, { concurrency: opts.concurrency, count: opts.concurrency, deadlineInMs: opts.deadlineInMs });
  const fg = await closedLoop(inst, taskQueueId, { concurrency: opts.concurrency, count: opts.count, deadlineInMs: opts.deadlineInMs });
  const claimTimeoutMs = inst.services.config.claimTimeoutS * 1000;
  const deadlineDelayMs = inst.services.config.deadlineDelayS * 1000;
  // Every trigger is visible by then: the last deadline (+ delay) and the last claim expiry.
  const dueAt = Math.max(Date.now() + opts.deadlineInMs + deadlineDelayMs, Date.now() + claimTimeoutMs) + 1000;
  await sleep(dueAt - Date.now());
  const meter = meterWindow(inst.services.storage.meter);
  const reaper = { deadline: 0, claim: 0, resolved: 0, events: 0, expired: 0, rehinted: 0, deferred: 0, failed: 0, passes: 0 };
  const until = Date.now() + STEP_TIMEOUT_MS;
  // Resolution deletes a run's claim-expiry and deadline triggers, so usually nothing fires: run
  // passes until one finds no trigger (the idle passes' fixed cost is included, spread over the lifecycles).
  while (Date.now() < until) {
    const s = await runReaper(inst.services);
    reaper.passes++;
    for (const k of ['deadline', 'claim', 'resolved', 'failed'] as const) reaper[k] += s[k];
    if (s.claim + s.deadline + s.resolved === 0) break;
  }
  return {
    lifecycles: fg.completed,
    foreground: fg.storage,
    background: meter.stop(),
    reaper,
    errors: fg.errors,
    warmup: { lifecycles: warm.completed, storage: warm.storage },
  };
}

// ---- (e) idle polling cost ----

export interface IdleResult {
  workers: number;
  seconds: number;
  transactionsPerSecond: number;
  byOp: Record<string, number>;
}

/**
 * Workers wait in claimWork on one task queue with no work; storage transactions are counted over
 * a window after a warm-up. Returns one figure per entry of `workerCounts` (workers are added,
 * their first requests spread over one poll window).
 */
export async function idlePolling(
  inst: Instance,
  taskQueueId: string,
  workerCounts: number[],
  opts: { warmupMs: number; windowMs: number },
): Promise<{ results: IdleResult[]; errors: Errors }> {
  const root = inst.queue();
  // The task queue must have been used, or there is no pending queue to poll; with pending shards,
  // every shard (a poller polls the shards hints were put in), so the idle cost is the busy queue's.
  const shards = inst.services.pending.shardCount(taskQueueId);
  for (let i = 0; i < IDLE_WARMUP_MAX; i++) {
    await lifecycle(inst, root, taskQueueId);
    if ((await inst.services.pending.usedQueues(taskQueueId, true)).length >= shards) break;
  }
  const errors = newErrors();
  let stop = false;
  const loops: Promise<void>[] = [];
  // Real workers are not synchronized: spread the new ones' first requests over one poll window.
  const spreadMs = inst.services.config.claimWorkPollS * 1000;
  const addWorkers = (n: number) => {
    for (let i = 0; i < n; i++) {
      const delayMs = loops.length === 0 ? 0 : Math.random() * spreadMs;
      loops.push(
        (async () => {
          await sleep(delayMs);
          while (!stop) {
            try {
              const { tasks } = await root.claimWork(taskQueueId, { ...WORKER, tasks: 1 });
              if (tasks.length) noteError(errors, new Error('an idle worker got a task'));
            } catch (err) {
              noteError(errors, err);
              await sleep(ERROR_PAUSE_MS);
            }
          }
        })(),
      );
    }
  };
  const results: IdleResult[] = [];
  for (const n of workerCounts) {
    addWorkers(n - loops.length);
    await sleep(opts.warmupMs);
    const meter = meterWindow(inst.services.storage.meter);
    const w0 = performance.now();
    await sleep(opts.windowMs);
    const d = meter.stop();
    const seconds = (performance.now() - w0) / 1000;
    const byOp: Record<string, number> = {};
    for (const [op, count] of Object.entries(d.byOp)) byOp[op] = round(count / seconds);
    results.push({ workers: n, seconds: round(seconds), transactionsPerSecond: round(d.total / seconds), byOp });
  }
  stop = true;
  await Promise.all(loops);
  return { results, errors };
}

// ---- (g) event latency and cost with one subscription ----

export interface EventLatencyResult {
  samples: number;
  p50Ms: number;
  p95Ms: number;
  maxMs: number;
  /** Storage calls of the service (not the consumer's polls) over all sampled lifecycles. */
  storage: MeterDelta;
  lifecycles: number;
  errors: Errors;
}

/** The consumer polls its subscription queue this often while waiting for an event. */
const EVENT_POLL_MS = 5;

/**
 * One subscription matching every event; lifecycles one at a time. A sample is the time from just
 * before the API call that commits a transition (createTask, reportCompleted) until a consumer
 * polling the subscription queue receives its event: an upper bound of commit-to-visible. The
 * consumer reads with its own client, so the meter counts only what the service does.
 */
export async function eventLatency(inst: Instance, taskQueueId: string, lifecycles: number): Promise<EventLatencyResult> {
  const subscriptionId = 'bench-everything';
  const sub = await inst.services.events.dispatcher.subscriptions.create({
    subscriptionId,
    bindings: EXCHANGES.map((e) => ({ exchange: EXCHANGE_PREFIX + e, routingKeyPattern: '#' })),
    expires: new Date(Date.now() + 3600_000).toJSON(),
  });
  // Through the subscription's SAS URLs, as a consumer reads: not counted by the service's meter.
  const urls = signedSubscriptionUrls(inst.services.storage, queueIdOf(sub), {
    endpoint: inst.services.storage.queueEndpoint,
    startsOn: new Date(Date.now() - 60_000),
    expiresOn: new Date(Date.now() + 3600_000),
    httpAllowed: true,
    visibilityS: 60,
  });
  const seen = new Set<string>();
  const receive = async () => {
    const res = await fetch(pollUrlFor(urls.signedPollUrl, 32));
    if (res.status !== 200) throw new Error(`subscription poll gave ${res.status}`);
    for (const m of parseQueueMessages(await res.text())) {
      const e = JSON.parse(Buffer.from(m.messageText, 'base64').toString('utf8'));
      seen.add(`${e.payload.status?.taskId}/${e.exchange.slice(EXCHANGE_PREFIX.length)}`);
      await fetch(deleteUrlFor(urls.signedDeleteUrl, m.messageId, m.popReceipt), { method: 'DELETE' });
    }
  };
  const waitForEvent = async (key: string) => {
    const until = Date.now() + STEP_TIMEOUT_MS;
    while (!seen.has(key)) {
      if (Date.now() > until) throw new Error(`event ${key} never arrived`);
      await receive();
      if (!seen.has(key)) await sleep(EVENT_POLL_MS);
    }
  };
  const root = inst.queue();
  await lifecycle(inst, root, taskQueueId); // warm-up: pending queue, caches
  await receive();
  const latencies: number[] = [];
  const errors = newErrors();
  const meter = meterWindow(inst.services.storage.meter);
  let done = 0;
  for (let i = 0; i < lifecycles; i++) {
    try {
      const taskId = newTaskId();
      let t0 = performance.now();
      await root.createTask(taskId, taskDef(taskQueueId));
      await waitForEvent(`${taskId}/task-pending`);
      latencies.push(performance.now() - t0);
      const { tasks } = await root.claimWork(taskQueueId, { ...WORKER, tasks: 1 });
      if (tasks.length !== 1) throw new Error(`claimWork returned ${tasks.length} tasks`);
      t0 = performance.now();
      await inst.queue(tasks[0].credentials).reportCompleted(taskId, tasks[0].runId);
      await waitForEvent(`${taskId}/task-completed`);
      latencies.push(performance.now() - t0);
      done++;
    } catch (err) {
      noteError(errors, err);
    }
  }
  return {
    ...latencySummary(latencies),
    storage: meter.stop(),
    lifecycles: done,
    errors,
  };
}
