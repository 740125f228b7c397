/**
 * A group of one keeps its rows in its task's partition, and its creator's resolution, written
 * while its row says nobody joined, is the group's close (shared/tasks/groups.ts). These prove that
 * this stays right when the group is not alone after all, whatever storage call fails: a task that
 * joined between the creator's create and its resolution keeps the group unresolved; one that joins
 * after the creator resolved reopens it (and takes the creator's open row away); a creator whose
 * group a joiner created first joins it. Users see it in task-group-resolved: published once the
 * last task resolved, never before.
 */
import { startTestService, TestService, taskDef, slugid, clock } from '../helpers/service';
import { claimOne, uniqueQueue, waitUntil } from '../helpers/work';
import { eachStorageCall, sweeperFor } from '../helpers/crash';
import { groupResolvedListener } from '../helpers/events';

let svc: TestService;
/** task-group-resolved events of a group delivered so far (test/helpers/events.ts). */
let groupEvents: Awaited<ReturnType<typeof groupResolvedListener>>;

beforeAll(async () => {
  svc = await startTestService(
    { QUEUE_CLAIM_WORK_POLL_S: '1', QUEUE_DEADLINE_DELAY_S: '0' },
    { tuning: { triggerLeaseS: 2, eventSweepDelayS: 1, resolvedNetDelayS: 1 } },
  );
  // Only task-group-resolved is listened to: a create's own events need no guard.
  groupEvents = await groupResolvedListener(svc, 'groups');
});
afterAll(async () => svc?.close());

/** Fails each storage call in turn, after filling the auth and subscription caches so every armed sequence is the same. */
const sweep = (scenario: Parameters<typeof eachStorageCall>[1]) => sweeperFor(svc)(scenario);

/** The client retries 5xx itself, as workers and creators do. */
const retrying = (c?: any) => svc.queue(c, { retries: 4 });

const resolvedEvents = (g: string, passes = 3) => groupEvents(g, passes, 200);

/** Resolves `taskId` (claimed from `tq`) and waits for the group's event naming it. */
async function lastResolves(g: string, tq: string, taskId: string): Promise<void> {
  const c = await claimOne(svc, tq, taskId);
  await svc.queue(c.credentials).reportCompleted(taskId, 0);
  const end = clock.ms() + 15_000;
  while (!(await resolvedEvents(g, 1)).includes(`${g}.resolved.${taskId}.0`)) {
    if (clock.ms() > end) throw new Error(`task-group-resolved of ${g} never delivered`);
  }
}

test("the creator's resolution after another task joined does not resolve the group, whatever call fails", async () => {
  const ops = await sweep(async (faulty) => {
    const [g, j] = [slugid(), slugid()];
    const [tq, tqj] = [uniqueQueue(), uniqueQueue()];
    // A short deadline: a close cut short by the fault is repeated by the deadline trigger.
    const deadline = new Date(clock.ms() + 2500).toJSON();
    await svc.queue().createTask(g, taskDef(tq, { taskGroupId: g, deadline }));
    await svc.queue().createTask(j, taskDef(tqj, { taskGroupId: g }));
    const c = await claimOne(svc, tq, g);
    const r = await faulty(() => retrying(c.credentials).reportCompleted(g, 0));
    expect(r.error).toBeUndefined();
    expect((await svc.queue().status(g)).status.state).toBe('completed');
    await waitUntil(deadline, 300);
    expect(await resolvedEvents(g)).toEqual([]);
    await lastResolves(g, tqj, j);
    expect(await resolvedEvents(g, 1)).toEqual([`${g}.resolved.${j}.0`]);
  });
  // The creator's row says the group was joined (the join set it): its report closes as any
  // member's does, its open row's delete and the group's read.
  expect(ops).toEqual(expect.arrayContaining(['Tasks.merge', 'Tasks.delete', 'Tasks.query']));
}, 300_000);

test('a task joining a group whose creator resolved alone reopens it, whatever call fails: it resolves again with the joiner', async () => {
  const ops = await sweep(async (faulty) => {
    const [g, j] = [slugid(), slugid()];
    const [tq, tqj] = [uniqueQueue(), uniqueQueue()];
    await svc.queue().createTask(g, taskDef(tq, { taskGroupId: g }));
    await lastResolves(g, tq, g);
    const r = await faulty(() => retrying().createTask(j, taskDef(tqj, { taskGroupId: g })));
    expect(r.error).toBeUndefined();
    // The creator's open row, kept while it was alone, went with the join: the joiner's resolution
    // leaves the group without an unresolved task.
    await lastResolves(g, tqj, j);
    expect((await resolvedEvents(g, 1)).sort()).toEqual([`${g}.resolved.${g}.0`, `${g}.resolved.${j}.0`].sort());
  });
  // The join reads the creator's row and changes it in its own transaction (the meta row's).
  expect(ops).toEqual(expect.arrayContaining(['Tasks.get', 'Tasks.query', 'Tasks.transaction']));
}, 300_000);

test('createTask of a group whose member created it first joins it, whatever call fails', async () => {
  const ops = await sweep(async (faulty) => {
    const [g, j] = [slugid(), slugid()];
    const [tq, tqj] = [uniqueQueue(), uniqueQueue()];
    await svc.queue().createTask(j, taskDef(tqj, { taskGroupId: g }));
    const r = await faulty(() => retrying().createTask(g, taskDef(tq, { taskGroupId: g })));
    expect(r.error).toBeUndefined();
    expect((await svc.queue().listTaskGroup(g)).tasks.map((t: any) => t.status.taskId).sort()).toEqual([g, j].sort());
    expect((await svc.queue().getTaskGroup(g)).schedulerId).toBe('-');
    // The creator resolves first: the group still has the member; then the member resolves it.
    const c = await claimOne(svc, tq, g);
    await svc.queue(c.credentials).reportCompleted(g, 0);
    expect(await resolvedEvents(g, 1)).toEqual([]);
    await lastResolves(g, tqj, j);
  });
  // Its own creation of the group conflicted, its task row was not there: it joined, then wrote its row.
  expect(ops).toEqual(expect.arrayContaining(['Tasks.transaction', 'Tasks.get']));
}, 300_000);
