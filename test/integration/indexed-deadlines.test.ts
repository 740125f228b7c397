/**
 * Deadlines kept in the expiry index (shared/tasks/triggers.ts), through the real client: each task
 * is resolved at its own deadline, a task reported before is left as it was and its report deletes
 * nothing for its deadline; and a report whose group close is not folded is guarded by a safety
 * net, so task-group-resolved is published once the last member resolved, whatever storage call
 * fails and even if the worker never retries.
 */
import { startTestService, TestService, taskDef, slugid, clock } from '../helpers/service';
import { claimOne, uniqueQueue, reapUntil, runSummary, waitUntil } from '../helpers/work';
import { sweeperFor } from '../helpers/crash';
import { groupResolvedListener } from '../helpers/events';
import { INDEXED_DEADLINE } from '../../shared/tasks/triggers';

let svc: TestService;
/** task-group-resolved events of a group delivered so far (test/helpers/events.ts). */
let groupEvents: Awaited<ReturnType<typeof groupResolvedListener>>;

beforeAll(async () => {
  svc = await startTestService(
    { QUEUE_CLAIM_WORK_POLL_S: '1', QUEUE_DEADLINE_DELAY_S: '0' },
    { tuning: { triggerLeaseS: 2, eventSweepDelayS: 1, resolvedNetDelayS: 1 } },
  );
  // Only task-group-resolved is listened to: a create's own events need no guard, so its deadline goes in the index.
  groupEvents = await groupResolvedListener(svc, 'indexed-deadlines');
});
afterAll(async () => svc?.close());

/** Creates the tasks side by side; returns the taskIds whose deadline is kept in the expiry index. */
async function createIndexed(tasks: [string, Record<string, unknown>][]): Promise<string[]> {
  await Promise.all(tasks.map(([id, def]) => svc.queue().createTask(id, def)));
  const rows = await Promise.all(tasks.map(([id]) => svc.services.tasks.load(id)));
  return rows.filter((t) => t?.deadlineTrigger === INDEXED_DEADLINE).map((t) => t!.taskId);
}

/** Reaper passes a second apart: the safety net's delay. */
const resolvedEvents = (g: string, passes = 3) => groupEvents(g, passes, 1100);

test('each task resolved at its own deadline; a reported one left as it was, its report deleting nothing for its deadline', async () => {
  const tq = uniqueQueue();
  const ids = [slugid(), slugid(), slugid(), slugid()];
  const soon = new Date(clock.ms() + 2000).toJSON();
  const later = new Date(clock.ms() + 5000).toJSON();
  expect(await createIndexed(ids.map((id, i) => [id, taskDef(tq, { deadline: i % 2 ? later : soon })]))).toEqual(ids);
  const c = await claimOne(svc, tq, undefined);
  const worked = c.status.taskId as string;
  await svc.settled();
  svc.services.storage.meter.byOp.clear();
  await svc.queue(c.credentials).reportCompleted(worked, 0);
  await svc.settled();
  // Nothing to delete for its deadline (the index row finds it resolved); the one Expiry call is
  // its claim-expiry row's delete (shared/tasks/triggers.ts `claim`).
  const ops = svc.services.storage.meter.byOp;
  expect([...ops.keys()].filter((op) => /^(deadline|Expiry)\./.test(op))).toEqual(['Expiry.delete']);
  expect(ops.get('Expiry.delete')).toBe(1);

  const summary = async () => Object.fromEntries(await Promise.all(ids.map(async (id) => [id, (await runSummary(svc, id)).join()])));
  const expired = (id: string) => async () => (await summary())[id] === 'exception/deadline-exceeded';
  const others = ids.filter((id) => id !== worked);
  const soonOnes = others.filter((id) => ids.indexOf(id) % 2 === 0);
  await waitUntil(soon, 300);
  await reapUntil(svc, async () => (await Promise.all(soonOnes.map((id) => expired(id)()))).every(Boolean));
  const atSoon = await summary();
  // Still before the later deadline: those members wait, shown again for them alone.
  expect(clock.ms()).toBeLessThan(Date.parse(later));
  for (const id of others.filter((id) => !soonOnes.includes(id))) expect([id, atSoon[id]]).toEqual([id, 'pending']);
  expect(atSoon[worked]).toBe('completed/completed');
  await waitUntil(later, 300);
  await reapUntil(svc, async () => (await Promise.all(others.map((id) => expired(id)()))).every(Boolean));
  expect((await summary())[worked]).toBe('completed/completed');
  // The reported task's history ends with its report: the message found nothing to do for it.
  const history = (await svc.queue().status(worked)).status.runs;
  expect(history).toHaveLength(1);
});

test('a report whose group close is left to after is guarded by a safety net: task-group-resolved once, whatever call fails, without a retry', async () => {
  const ops = await sweeperFor(svc)(async (faulty) => {
    const g = slugid();
    const queues = new Map<string, string>();
    const tasks: [string, Record<string, unknown>][] = [slugid(), slugid(), slugid()].map((id) => {
      queues.set(id, uniqueQueue());
      return [id, taskDef(queues.get(id)!, { taskGroupId: g })];
    });
    expect(await createIndexed(tasks)).toEqual(tasks.map(([id]) => id));
    const last = tasks[0][0];
    for (const [id] of tasks.filter(([id]) => id !== last)) {
      const c = await claimOne(svc, queues.get(id)!, id);
      await svc.queue(c.credentials).reportCompleted(id, 0);
    }
    expect(await resolvedEvents(g, 1)).toEqual([]);
    const c = await claimOne(svc, queues.get(last)!, last);
    // The worker reports once: a failure is not retried, so the service's own guards must finish the close.
    await faulty(() => svc.queue(c.credentials, { retries: 0 }).reportCompleted(last, 0));
    // A fault before the write left the run running: the worker reports again later.
    if ((await runSummary(svc, last)).join() === 'running') await svc.queue(c.credentials).reportCompleted(last, 0);
    expect(await runSummary(svc, last)).toEqual(['completed/completed']);
    // Published once the last member resolved, never before. A guard an ambiguous storage answer
    // left twice may redo a member's close after that and publish it once more (as a stale deadline
    // message does when it fires): at least once, never lost.
    expect(await resolvedEvents(g)).toContain(`${g}.resolved.${last}.0`);
  });
  expect(ops).toEqual(expect.arrayContaining(['resolved.put', 'Tasks.merge']));
}, 300_000);
