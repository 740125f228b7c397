/**
 * (s) What subscribers cost a lifecycle: its request-path latency and storage calls with no
 * subscription, one and 100 matching everything, and 100 matching nothing, each on a deployment
 * of its own. Run on the in-memory store (no storage latency: what the service itself does per
 * subscriber) and on Azurite.
 *
 * A lifecycle is createTask → claimWork → reportCompleted, one at a time. Its latency is the sum
 * of the three calls. Between lifecycles the reaper's event sweep runs (it expands fan-out
 * messages into the subscription queues; on Azure it is the timer function, on instances of its
 * own): `settle` is how long that took, and the storage calls are split into those of the
 * requests and those of the sweep.
 */
import { Instance, newDeployment, newTaskId, sleep, startInstance, taskDef } from './harness';
import { clearQueues, dropPrefix } from '../shared/local/azurite';
import { MEMORY_CONNECTION } from '../shared/storage/storage';
import { MeterDelta, latencySummary, meterWindow, perUnit, round } from './stats';
import { EXCHANGES, EXCHANGE_PREFIX } from '../shared/events/exchanges';
import { Row } from './report';
import { drainEventSweeps } from '../shared/reaper/reaper';
import { subscriptionQueue } from '../shared/storage/subscription-queues';
import { queueIdOf } from '../shared/events/subscriptions';

const WORKER = { workerGroup: 'bench', workerId: 'w' };
/** Lifecycles before measuring: the pending queue, the subscription list and the connections are warm. */
const WARMUP_LIFECYCLES = 3;
/** claimWork answers at once after a local createTask (the poller is woken); this bounds a lost wake. */
const CLAIM_ATTEMPTS = 20;
/** A drain that failed (a storage call past its deadline) is tried again this often, after a pause. */
const SETTLE_ATTEMPTS = 5;
const SETTLE_PAUSE_MS = 1000;

export interface SubscriberCase {
  label: string;
  subscriptions: number;
  /** Bound to everything (`#` on every exchange), or to a routing key no task has. */
  matching: boolean;
}

export const SUBSCRIBER_CASES: SubscriberCase[] = [
  { label: 'none', subscriptions: 0, matching: false },
  { label: '1 matching', subscriptions: 1, matching: true },
  { label: '100 matching nothing', subscriptions: 100, matching: false },
  { label: '100 matching', subscriptions: 100, matching: true },
];

export interface SubscriberResult {
  label: string;
  subscriptions: number;
  matching: boolean;
  /** Request path: the three calls of a lifecycle, summed. */
  p50Ms: number;
  p95Ms: number;
  /** The event sweep after the last call (expanding fan-out messages), p50. */
  settleP50Ms: number;
  /** Storage calls per lifecycle while its requests ran, and of the event sweep after them, by op. */
  duringRequests: MeterDelta;
  after: MeterDelta;
  lifecycles: number;
  /** Lifecycles that failed (not sampled), and the first messages. */
  errors: { count: number; first: string[] };
}

/** What the reaper does for a lifecycle's events: fan-out messages expanded into the subscription queues. */
async function settled(inst: Instance): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      while ((await drainEventSweeps(inst.services)) > 0);
      return;
    } catch (err) {
      // A storage call past its deadline (a loaded Azurite): the messages come back; drain again.
      if (attempt >= SETTLE_ATTEMPTS) throw err;
      await sleep(SETTLE_PAUSE_MS);
    }
  }
}

async function timedLifecycle(inst: Instance, root: any, taskQueueId: string): Promise<number> {
  const taskId = newTaskId();
  const t0 = performance.now();
  await root.createTask(taskId, taskDef(taskQueueId));
  for (let i = 0; i < CLAIM_ATTEMPTS; i++) {
    const { tasks } = await root.claimWork(taskQueueId, { ...WORKER, tasks: 1 });
    if (!tasks.length) continue;
    await inst.queue(tasks[0].credentials).reportCompleted(taskId, tasks[0].runId);
    return performance.now() - t0;
  }
  throw new Error(`task ${taskId} was never claimed`);
}

/** An instance of a deployment of its own; `clear` empties its subscription queues (a consumer that keeps up), uncounted. */
export interface SubscriberInstance {
  inst: Instance;
  clear(): Promise<void>;
}

/** An instance of a new deployment on `connection` (an Azurite one is dropped when closed). */
export async function subscriberInstance(connection: string, started: (i: Instance) => void): Promise<SubscriberInstance> {
  const dep = newDeployment(connection, 's');
  const inst = await startInstance('S', dep, { QUEUE_CLAIM_WORK_POLL_S: '5' });
  started(inst);
  const azure = connection !== MEMORY_CONNECTION;
  const close = async () => {
    await inst.close();
    if (azure) await dropPrefix(connection, dep.prefix).catch(() => undefined);
  };
  // In memory, through the port (uncounted: outside the meter windows), as a consumer reads.
  const drainInMemory = async () => {
    for (const sub of (await inst.services.events.dispatcher.subscriptions.active()).filter((x) => x.queueKey)) {
      const q = subscriptionQueue(inst.services.storage, queueIdOf(sub));
      for (let msgs = await q.receive(32, 60); msgs.length; msgs = await q.receive(32, 60))
        await Promise.all(msgs.map((m) => q.delete(m.messageId, m.popReceipt)));
    }
  };
  return { inst: { ...inst, close }, clear: async () => (azure ? void (await clearQueues(connection, `${dep.prefix}-sub-`)) : drainInMemory()) };
}

interface Running {
  c: SubscriberCase;
  si: SubscriberInstance;
  root: any;
  latencies: number[];
  settles: number[];
  during: MeterDelta;
  after: MeterDelta;
  errors: string[];
}

const TASK_QUEUE = 'bench/subscribers';

function add(into: MeterDelta, d: MeterDelta): void {
  into.total += d.total;
  for (const [op, n] of Object.entries(d.byOp)) into.byOp[op] = (into.byOp[op] ?? 0) + n;
}

/** One measured lifecycle of a case: its requests, then the event sweep, each metered. */
async function measure(r: Running): Promise<void> {
  const meter = r.si.inst.services.storage.meter;
  const m = meterWindow(meter);
  let ms: number;
  try {
    ms = await timedLifecycle(r.si.inst, r.root, TASK_QUEUE);
  } catch (err) {
    // A storage call past its deadline on a loaded Azurite: counted, not sampled (its calls neither).
    r.errors.push(String((err as Error)?.message ?? err).split('\n')[0]);
    m.stop();
    await settled(r.si.inst).catch(() => undefined);
    return;
  }
  const during = m.stop();
  const t = performance.now();
  const m2 = meterWindow(meter);
  try {
    await settled(r.si.inst);
  } catch (err) {
    // Left for the next lifecycle's drain: this one's figures would be short of its fan-out.
    r.errors.push(`event sweep: ${String((err as Error)?.message ?? err).split('\n')[0]}`);
    m2.stop();
    return;
  }
  r.latencies.push(ms);
  add(r.during, during);
  add(r.after, m2.stop());
  r.settles.push(performance.now() - t);
  await r.si.clear();
}

/**
 * Every case on an instance of its own (`start`), measured in turn, one lifecycle of each case
 * after another, so a change in the machine's load affects all cases alike.
 */
export async function subscriberCost(start: () => Promise<SubscriberInstance>, lifecycles: number, cases = SUBSCRIBER_CASES): Promise<SubscriberResult[]> {
  const running: Running[] = [];
  try {
    for (const c of cases) {
      const si = await start();
      running.push({ c, si, root: si.inst.queue(), latencies: [], settles: [], during: { total: 0, byOp: {} }, after: { total: 0, byOp: {} }, errors: [] });
      const subs = si.inst.services.events.dispatcher.subscriptions;
      const bindings = EXCHANGES.map((e) => ({ exchange: EXCHANGE_PREFIX + e, routingKeyPattern: c.matching ? '#' : 'route.nobody-routes-here.#' }));
      for (let i = 0; i < c.subscriptions; i++)
        await subs.create({ subscriptionId: `bench-${i}`, bindings, expires: new Date(Date.now() + 3600_000).toJSON() }, `bench-client-${i}`);
    }
    for (const r of running)
      for (let i = 0; i < WARMUP_LIFECYCLES; i++) {
        await timedLifecycle(r.si.inst, r.root, TASK_QUEUE).catch(() => undefined);
        await settled(r.si.inst).catch(() => undefined);
        await r.si.clear();
      }
    for (const r of running) Object.assign(r, { latencies: [], settles: [], during: { total: 0, byOp: {} }, after: { total: 0, byOp: {} }, errors: [] });
    for (let i = 0; i < lifecycles; i++) for (const r of running) await measure(r);
    return running.map((r) => {
      const lat = latencySummary(r.latencies);
      return {
        ...r.c,
        p50Ms: lat.p50Ms,
        p95Ms: lat.p95Ms,
        settleP50Ms: latencySummary(r.settles).p50Ms,
        duringRequests: perUnit(r.during, Math.max(1, r.latencies.length)),
        after: perUnit(r.after, Math.max(1, r.latencies.length)),
        lifecycles: r.latencies.length,
        errors: { count: r.errors.length, first: r.errors.slice(0, 3) },
      };
    });
  } finally {
    await Promise.all(running.map((r) => r.si.inst.close().catch(() => undefined)));
  }
}

/** Report rows: latency against no subscription, and calls on and off the request path. */
export function subscriberRows(store: string, results: SubscriberResult[]): Row[] {
  const none = results.find((r) => r.subscriptions === 0)?.p50Ms;
  return results.map((r) => ({
    metric: `(s) ${store}, ${r.label}: lifecycle p50 (p95), settle p50, calls during / after`,
    value: `${r.p50Ms} ms (${r.p95Ms})${none ? ` ${vs(r.p50Ms, none)}` : ''}, ${r.settleP50Ms} ms, ${r.duringRequests.total} / ${r.after.total}${r.errors.count ? `, ${r.errors.count} failed` : ''}`,
  }));
}

const vs = (x: number, base: number) => `${x >= base ? '+' : ''}${round((x / base - 1) * 100, 0)} %`;
