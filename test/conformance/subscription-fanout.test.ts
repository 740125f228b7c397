/**
 * More subscriptions matching everything than a request delivers to itself (INLINE_FANOUT): every
 * one still receives a lifecycle's events, in order, from the instance's background work.
 *
 * SUB_BENCH=1 makes it a bench: 100 subscriptions, and the lifecycle's p50 latency with 0, 1 and
 * 100 subscriptions printed (SUB_BENCH_LIFECYCLES, default 10, lifecycles each).
 */
import { startTestService, TestService, taskDef, slugid } from '../helpers/service';
import { claimOne, uniqueQueue } from '../helpers/work';
import { eventsClient, drainSubscription, short } from '../helpers/events';
import { INLINE_FANOUT } from '../../shared/events/dispatch';

const BENCH = !!process.env.SUB_BENCH;
const LIFECYCLES = Number(process.env.SUB_BENCH_LIFECYCLES ?? 10);
const MANY = BENCH ? 100 : INLINE_FANOUT * 2;

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' });
});
afterAll(async () => svc?.close());

const EVERYTHING = ['task-defined', 'task-pending', 'task-running', 'task-completed'].map((e) => ({
  exchange: `exchange/taskcluster-queue/v1/${e}`,
  routingKeyPattern: '#',
}));

async function lifecycle(): Promise<{ taskId: string; ms: number }> {
  const q = svc.queue();
  const tq = uniqueQueue();
  const taskId = slugid();
  const t = performance.now();
  await q.createTask(taskId, taskDef(tq));
  const c = await claimOne(svc, tq, taskId);
  await q.reportCompleted(taskId, c.runId);
  return { taskId, ms: performance.now() - t };
}

async function p50(n: number): Promise<number> {
  const xs: number[] = [];
  for (let i = 0; i < n; i++) xs.push((await lifecycle()).ms);
  return xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
}

const settled = () => Promise.allSettled([...(svc.services.background ?? [])]);

test(`${MANY} subscriptions on everything each receive a lifecycle's events, in order`, async () => {
  const ev = eventsClient(svc);
  const subs: any[] = [];
  const add = async (n: number) => {
    while (subs.length < n)
      subs.push(await ev.createSubscription(`fan-${slugid()}`, { bindings: EVERYTHING, expires: new Date(Date.now() + 3600_000).toJSON() }));
    await svc.services.events.dispatcher.subscriptions.refresh();
  };
  let none = 0;
  let one = 0;
  if (BENCH) {
    await p50(3); // warm
    none = await p50(LIFECYCLES);
    await add(1);
    one = await p50(LIFECYCLES);
  }
  await add(MANY);

  const { taskId } = await lifecycle();
  await settled();
  for (const s of subs) {
    // On Azure an ambiguous queue put leaves a second copy; consumers drop repeats by id (the first stays in place).
    const events = [...new Map((await drainSubscription(s)).map((e) => [e.id, e])).values()];
    const got = events.filter((e) => e.payload.status.taskId === taskId).map((e) => short(e.exchange));
    expect(got).toEqual(['task-defined', 'task-pending', 'task-running', 'task-completed']);
  }

  if (BENCH) {
    const many = await p50(LIFECYCLES);
    const pct = (x: number) => `${((x / none - 1) * 100).toFixed(0)} %`;
    console.log(
      `lifecycle p50 over ${LIFECYCLES}: ${none.toFixed(0)} ms with no subscription, ${one.toFixed(0)} ms with 1 (${pct(one)}), ${many.toFixed(0)} ms with ${MANY} (${pct(many)})`,
    );
    await settled();
  }
}, 300_000);
