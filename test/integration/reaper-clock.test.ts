/**
 * A reaper instance whose clock lags behind the queue service's: triggers it sees early are put
 * back for later (messages) or not yet due (expiry-index rows), never acted on early and never dropped.
 */
import { startTestService, TestService, taskDef, slugid, clock } from '../helpers/service';
import { claim, runSummary, uniqueQueue, waitUntil, W1 } from '../helpers/work';
import { createApp } from '../../shared/app';
import { memoryLogger } from '../../shared/log';
import { runReaper } from '../../shared/reaper/reaper';
import { EXPIRY_KIND_CLAIM, EXPIRY_KIND_DEADLINE } from '../../shared/tasks/triggers';
import { EXCHANGE_PREFIX } from '../../shared/events/exchanges';

/** How far the lagging instance's clock is behind. */
const LAG_MS = 60_000;

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_TIMEOUT_S: '1', QUEUE_DEADLINE_DELAY_S: '0', QUEUE_CLAIM_WORK_POLL_S: '1' });
});
afterAll(async () => svc?.close());

/** A claimed task and an unscheduled one, both due by the service's clock; the lagging reaper's pass over them. */
async function dueByServiceClock() {
  const lagging = await createApp(svc.services.config, { log: memoryLogger(), now: () => new Date(clock.ms() - LAG_MS) }).services();
  const claimed = slugid();
  const tq = uniqueQueue();
  await svc.queue().createTask(claimed, taskDef(tq));
  const [c] = await claim(svc, tq, W1, 1);
  const unscheduled = slugid();
  const deadline = new Date(clock.ms() + 1000).toJSON();
  await svc.queue().createTask(unscheduled, taskDef(uniqueQueue(), { deadline, dependencies: [unscheduled] }));
  await waitUntil([c.takenUntil, deadline].sort()[1], 1200);
  const stats = await runReaper(lagging);
  expect(await runSummary(svc, claimed)).toEqual(['running']);
  expect(await runSummary(svc, unscheduled)).toEqual([]);
  // The deadline's expiry-index row is still there, due by the service's clock.
  const due = await svc.services.expiry.dueTriggers(new Date(clock.ms()), 100);
  expect(due.filter((r) => r.kind === EXPIRY_KIND_DEADLINE).map((r) => r.id)).toContain(unscheduled);
  return { stats, claimed, due };
}

test('a claim-expiry message seen early is deferred, a deadline is not due yet by the lagging clock, and the tasks are untouched', async () => {
  // Someone listens to the run's events: its trigger is a message (shared/tasks/triggers.ts `claim`).
  const subs = svc.services.events.dispatcher.subscriptions;
  await subs.create({
    subscriptionId: 'reaper-clock',
    bindings: [{ exchange: `${EXCHANGE_PREFIX}task-running`, routingKeyPattern: '#' }],
    expires: new Date(clock.ms() + 3600_000).toJSON(),
  });
  await subs.refresh();
  try {
    const { stats } = await dueByServiceClock();
    expect(stats).toMatchObject({ claim: 0, deadline: 0, deferred: 1, failed: 0 });
    // The claim trigger is still there, invisible until the lagging clock catches up.
    expect(await svc.services.storage.trigger('claim').approximateCount()).toBe(1);
  } finally {
    await subs.delete('reaper-clock');
    await subs.refresh();
  }
});

test('claim-expiry and deadline rows of the expiry index are not due yet by the lagging clock, and the tasks are untouched', async () => {
  const before = await svc.services.storage.trigger('claim').approximateCount();
  const { stats, claimed, due } = await dueByServiceClock();
  expect(stats).toMatchObject({ claim: 0, deadline: 0, deferred: 0, failed: 0 });
  expect(due.filter((r) => r.kind === EXPIRY_KIND_CLAIM).map((r) => r.id)).toContain(claimed);
  expect(await svc.services.storage.trigger('claim').approximateCount()).toBe(before);
});
