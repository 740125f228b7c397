/**
 * More subscriptions matching everything than a request delivers to itself (INLINE_FANOUT): the
 * request leaves them one fan-out message, and a reaper pass puts a lifecycle's events, in order,
 * into every one's queue; one created after the lifecycle, or deleted before the pass, gets none.
 * (Lifecycle latency with 0, 1 and 100 subscriptions is bench phase (s): `BENCH_PHASES=s npm run bench`.)
 */
import { startTestService, TestService, taskDef, slugid } from '../helpers/service';
import { claimOne, uniqueQueue } from '../helpers/work';
import { eventsClient, drainSubscription, short } from '../helpers/events';
import { INLINE_FANOUT } from '../../shared/events/dispatch';

const MANY = INLINE_FANOUT * 2;

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' });
});
afterAll(async () => svc?.close());

const EVERYTHING = ['task-defined', 'task-pending', 'task-running', 'task-completed'].map((e) => ({
  exchange: `exchange/taskcluster-queue/v1/${e}`,
  routingKeyPattern: '#',
}));

async function lifecycle(): Promise<string> {
  const q = svc.queue();
  const tq = uniqueQueue();
  const taskId = slugid();
  await q.createTask(taskId, taskDef(tq));
  const c = await claimOne(svc, tq, taskId);
  await q.reportCompleted(taskId, c.runId);
  return taskId;
}

/** A consumer's view: the task's events in the queue, repeats dropped by id (on Azure an ambiguous put leaves a second copy). */
async function received(sub: any, taskId: string): Promise<string[]> {
  const events = [...new Map((await drainSubscription(sub)).map((e) => [e.id, e])).values()];
  return events.filter((e) => e.payload.status.taskId === taskId).map((e) => short(e.exchange));
}

test(`${MANY} subscriptions on everything each receive a lifecycle's events, in order, from the fan-out`, async () => {
  const ev = eventsClient(svc);
  const expires = () => new Date(Date.now() + 3600_000).toJSON();
  const subs: any[] = [];
  while (subs.length < MANY) subs.push(await ev.createSubscription(`fan-${slugid()}`, { bindings: EVERYTHING, expires: expires() }));
  await svc.services.events.dispatcher.subscriptions.refresh();

  const taskId = await lifecycle();
  // After the lifecycle: one more subscription, and one of the others deleted and created again.
  const late = await ev.createSubscription(`late-${slugid()}`, { bindings: EVERYTHING, expires: expires() });
  const gone = subs.pop();
  await ev.deleteSubscription(gone.subscriptionId);
  const again = await ev.createSubscription(gone.subscriptionId, { bindings: EVERYTHING, expires: expires() });
  await svc.services.events.dispatcher.subscriptions.refresh();

  await svc.runReaper();
  for (const s of subs) expect(await received(s, taskId)).toEqual(['task-defined', 'task-pending', 'task-running', 'task-completed']);
  expect(await received(late, taskId)).toEqual([]);
  expect(await received(again, taskId)).toEqual([]);
}, 120_000);
