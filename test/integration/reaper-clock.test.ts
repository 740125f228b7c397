/**
 * A reaper instance whose clock lags behind the queue service's: triggers it sees early are put
 * back for later, never acted on early and never dropped.
 */
import { startTestService, TestService, taskDef, slugid, clock } from '../helpers/service';
import { claim, runSummary, uniqueQueue, waitUntil, W1 } from '../helpers/work';
import { createApp } from '../../shared/app';
import { memoryLogger } from '../../shared/log';
import { runReaper } from '../../shared/reaper/reaper';
import { EXPIRY_KIND_DEADLINE } from '../../shared/tasks/triggers';

/** How far the lagging instance's clock is behind. */
const LAG_MS = 60_000;

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_CLAIM_TIMEOUT_S: '1', QUEUE_DEADLINE_DELAY_S: '0', QUEUE_CLAIM_WORK_POLL_S: '1' });
});
afterAll(async () => svc?.close());

test('a claim-expiry trigger seen early is deferred, a deadline is not due yet by the lagging clock, and the tasks are untouched', async () => {
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
  expect(stats).toMatchObject({ claim: 0, deadline: 0, deferred: 1, failed: 0 });
  expect(await runSummary(svc, claimed)).toEqual(['running']);
  expect(await runSummary(svc, unscheduled)).toEqual([]);
  // The claim trigger is still there, invisible until the lagging clock catches up; the deadline's
  // expiry-index row too, due by the service's clock.
  expect(await svc.services.storage.trigger('claim').approximateCount()).toBe(1);
  expect((await svc.services.expiry.due(new Date(clock.ms()), 100)).filter((r) => r.kind === EXPIRY_KIND_DEADLINE).map((r) => r.id)).toContain(unscheduled);
});
