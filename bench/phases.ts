/**
 * The benchmark phases that drive the service over HTTP with taskcluster-client v87, as workers
 * and task creators would.
 */
import { Instance, sleep, taskDef, newTaskId } from './harness';
import { CpuMs, MeterDelta, addDeltas, cpuWindow, latencySummary, meterWindow, round } from './stats';
import { ERROR_PAUSE_MS, Errors, LoadJob, LoadResult, STEP_TIMEOUT_MS, WORKER, lifecycle, newErrors, noteError, runJob } from './client';
import { ProfileSummary, profileWindow } from './profile';
import { runReaper, ReaperStats } from '../shared/reaper/reaper';
import { EXCHANGES, EXCHANGE_PREFIX } from '../shared/events/exchanges';
import { signedSubscriptionUrls } from '../shared/storage/subscription-queues';
import { queueIdOf } from '../shared/events/subscriptions';
import { deleteUrlFor, parseQueueMessages, pollUrlFor } from '../worker/protocols/azure-queue';

export type { Errors } from './client';

/** Lifecycles (e) runs at most to put a hint in every pending shard (16 shards: all used with p > 0.99). */
const IDLE_WARMUP_MAX = 200;

async function waitFor(cond: () => boolean, timeoutMs = STEP_TIMEOUT_MS): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > until) throw new Error('timed out waiting for a condition');
    await sleep(2);
  }
}

/**
 * Runs a load job in the instance's load process when it has one (then this process's CPU over
 * the job is the service's), else here. Returns the job's result and the CPU spent meanwhile.
 */
async function drive(inst: Instance, job: LoadJob): Promise<LoadResult & { cpu: CpuMs }> {
  const cpu = cpuWindow(inst.azuritePid, inst.load?.pid);
  const r = inst.load ? await inst.load.run(job) : await runJob(job);
  return { ...r, cpu: cpu.stop() };
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
  const poller = claimer.services.pollers.get(taskQueueId);
  // Warm up: a first task created on the claiming instance records the priority there.
  await lifecycle(claimer.queue, taskQueueId);
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
  /** CPU over the loop: this process (the service alone when the load has its own), the load's, Azurite's. */
  cpu: CpuMs;
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
  const creatorMeter = opts.creator && meterWindow(opts.creator.services.storage.meter);
  const meter = meterWindow(inst.services.storage.meter);
  const r = await drive(inst, {
    kind: 'loop',
    rootUrl: inst.rootUrl,
    credentials: inst.root,
    creatorUrl: opts.creator?.rootUrl,
    taskQueueId,
    concurrency: opts.concurrency,
    durationMs: opts.durationMs,
    count: opts.count,
    deadlineInMs: opts.deadlineInMs,
  });
  // The lifecycles' index writes, queued off their requests' path, belong in this window.
  await Promise.all([inst.services.indexes.settled(), opts.creator?.services.indexes.settled()]);
  const storage = creatorMeter ? addDeltas(meter.stop(), creatorMeter.stop()) : meter.stop();
  return {
    concurrency: opts.concurrency,
    completed: r.done,
    seconds: round(r.seconds),
    perSecond: round(r.done / r.seconds, 1),
    storage,
    cpu: r.cpu,
    errors: r.errors,
  };
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
  /** CPU over the drain (see ThroughputResult.cpu). */
  drainCpu: CpuMs;
  drainProfile?: ProfileSummary;
  errors: Errors;
}

/** Creates `tasks` tasks, then `loops` workers drain them with claimWork(tasks: `batch`). */
export async function backlogDrain(
  inst: Instance,
  taskQueueId: string,
  opts: { tasks: number; createConcurrency: number; loops: number; batch: number; profileFile?: string },
): Promise<BacklogResult> {
  const base = { rootUrl: inst.rootUrl, credentials: inst.root, taskQueueId, tasks: opts.tasks };
  const created = await drive(inst, { ...base, kind: 'create', concurrency: opts.createConcurrency });
  await inst.services.indexes.settled();
  const meter = meterWindow(inst.services.storage.meter);
  const profile = profileWindow(opts.profileFile);
  const drained = await drive(inst, { ...base, kind: 'drain', loops: opts.loops, batch: opts.batch });
  const drainProfile = await profile.stop();
  const errors = newErrors();
  for (const e of [created.errors, drained.errors]) {
    errors.count += e.count;
    errors.first.push(...e.first.slice(0, 3 - errors.first.length));
  }
  return {
    tasks: opts.tasks,
    createPerSecond: round(created.done / created.seconds, 1),
    drainLoops: opts.loops,
    claimBatch: opts.batch,
    claimed: drained.done,
    drainSeconds: round(drained.seconds),
    claimedPerSecond: round(drained.done / drained.seconds, 1),
    meanBatch: round(drained.done / Math.max(1, drained.batches), 1),
    drainStorage: meter.stop(),
    drainCpu: drained.cpu,
    drainProfile,
    errors,
  };
}

/**
 * (c) `rounds` times, each with a task queue and tasks of its own. A drain of 400 tasks lasts
 * about two seconds, and this machine's speed drifts: one round's rate moved by +-20 % between runs
 * of the same code. The rate is the rounds' median (`roundRates` lists them); calls and CPU are
 * summed over the rounds, so per claimed task they are means.
 */
export async function repeatedDrain(
  inst: Instance,
  taskQueueId: string,
  opts: Parameters<typeof backlogDrain>[2] & { rounds: number },
): Promise<BacklogResult & { roundRates: number[] }> {
  const results: BacklogResult[] = [];
  for (let i = 0; i < opts.rounds; i++) {
    // No forced collection between rounds: on 2026-11-28 one cost the service 1.0-1.3 ms CPU per
    // drained task in the rounds after it (its pauses only 40-70 ms a round: what it threw away had to be rebuilt).
    // A CPU profile of the first round only (each round would overwrite the last).
    results.push(await backlogDrain(inst, `${taskQueueId}-${i + 1}`, { ...opts, profileFile: i === 0 ? opts.profileFile : undefined }));
  }
  const sum = (f: (r: BacklogResult) => number) => results.reduce((n, r) => n + f(r), 0);
  const cpu = (k: 'loadMs' | 'childMs') => (results.every((r) => r.drainCpu[k] !== undefined) ? sum((r) => r.drainCpu[k]!) : undefined);
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const claimed = sum((r) => r.claimed);
  // claimWork calls over all rounds, from each round's claimed count and mean batch.
  const batches = sum((r) => r.claimed / Math.max(1, r.meanBatch));
  const errors = newErrors();
  for (const r of results) {
    errors.count += r.errors.count;
    errors.first.push(...r.errors.first.slice(0, 3 - errors.first.length));
  }
  return {
    ...results[0],
    tasks: sum((r) => r.tasks),
    createPerSecond: median(results.map((r) => r.createPerSecond)),
    claimed,
    drainSeconds: round(sum((r) => r.drainSeconds)),
    claimedPerSecond: median(results.map((r) => r.claimedPerSecond)),
    meanBatch: round(claimed / Math.max(1, batches), 1),
    drainStorage: results.map((r) => r.drainStorage).reduce(addDeltas),
    drainCpu: { selfMs: sum((r) => r.drainCpu.selfMs), loadMs: cpu('loadMs'), childMs: cpu('childMs') },
    errors,
    roundRates: results.map((r) => r.claimedPerSecond),
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
    await lifecycle(inst.queue, taskQueueId);
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
  await lifecycle(inst.queue, taskQueueId); // warm-up: pending queue, caches
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
