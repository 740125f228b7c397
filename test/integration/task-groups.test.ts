/**
 * A group's emptiness, as task-group-resolved needs it: the task that created a group learns from
 * its own resolution's write that the group has no unresolved task left, unless another task ever
 * joined, in which case it (like every other member) reads the group's open rows. And a group an
 * older deployment stored in table TaskGroups is still found and used there. On Azurite.
 */
import { startTestService, startSecondInstance, TestService, slugid, taskDef, expectError } from '../helpers/service';
import { claimOne, uniqueQueue } from '../helpers/work';
import { GROUP_PREFIX, TaskGroups } from '../../shared/tasks/groups';

let svc: TestService;
let groups: TaskGroups;
beforeAll(async () => {
  svc = await startTestService();
  groups = svc.services.groups;
});
afterAll(async () => svc?.close());

// One time for all: a member that expires later than the group extends the group's meta row.
const at = new Date(Date.now() + 3600_000).toJSON();
const expires = () => at;

test('a group of one: its creator knows from the close that the group is empty; a repeat reads instead', async () => {
  const g = slugid();
  const etag = await groups.addMember(g, g, 'sched', expires(), new Date().toJSON());
  expect(etag).toEqual(expect.any(String));
  expect(await groups.close(g, g, etag)).toBe(true);
  expect(await groups.hasOpen(g)).toBe(false);
  // A repeat (a crash before the event was delivered) cannot prove it again: the caller reads.
  expect(await groups.close(g, g, etag)).toBe(false);
  expect(await groups.hasOpen(g)).toBe(false);
});

test('a member that joined makes the creator read: open while the member is unresolved, empty after', async () => {
  const g = slugid();
  const [creator, member, third] = [slugid(), slugid(), slugid()];
  const etag = await groups.addMember(g, creator, 'sched', expires(), new Date().toJSON());
  expect(await groups.addMember(g, member, 'sched', expires(), new Date().toJSON())).toBeUndefined();
  const afterJoin = (await groups.meta(g))!;
  expect(afterJoin.etag).not.toBe(etag);
  // Later members find the group joined already and leave its meta row alone (no hot row in a large group).
  await groups.addMember(g, third, 'sched', expires(), new Date().toJSON());
  expect((await groups.meta(g))!.etag).toBe(afterJoin.etag);
  await groups.close(g, third);

  expect(await groups.close(g, creator, etag)).toBe(false);
  expect(await groups.hasOpen(g)).toBe(true);
  expect(await groups.close(g, member)).toBe(false);
  expect(await groups.hasOpen(g)).toBe(false);
});

test('the creator resolving last after a member: not proven by the close, found empty by the read', async () => {
  const g = slugid();
  const [creator, member] = [slugid(), slugid()];
  const etag = await groups.addMember(g, creator, 'sched', expires(), new Date().toJSON());
  await groups.addMember(g, member, 'sched', expires(), new Date().toJSON());
  await groups.close(g, member);
  expect(await groups.hasOpen(g)).toBe(true);
  expect(await groups.close(g, creator, etag)).toBe(false);
  expect(await groups.hasOpen(g)).toBe(false);
});

test('a group stored before groups moved to the Tasks table is found in table TaskGroups and stays there until it expires', async () => {
  const q = svc.queue();
  const [g, member, joiner, late] = [slugid(), slugid(), slugid(), slugid()];
  const [tq, tqj] = [uniqueQueue(), uniqueQueue()];
  await q.createTask(member, taskDef(tq, { taskGroupId: g }));
  // As an older deployment stored it: the same rows in table TaskGroups, keys without the prefix.
  const tasks = svc.services.storage.table('Tasks');
  const legacy = svc.services.storage.table('TaskGroups');
  const groupRange = { ge: GROUP_PREFIX, lt: `${GROUP_PREFIX}~~` };
  const rows = (await tasks.page({ partitionKey: g, rowKey: groupRange }, 100)).items;
  expect(rows.length).toBe(4); // meta, member, open, latest
  for (const { etag: _etag, ...r } of rows) {
    await legacy.insert({ ...r, rowKey: r.rowKey.slice(GROUP_PREFIX.length) });
    await tasks.delete(g, r.rowKey);
  }
  // A process started now sees the legacy table holding rows.
  const b = await startSecondInstance(svc);
  try {
    const qb = b.queue();
    expect((await qb.getTaskGroup(g)).taskGroupId).toBe(g);
    await qb.createTask(joiner, taskDef(tqj, { taskGroupId: g }));
    expect((await qb.listTaskGroup(g)).tasks.map((t: any) => t.status.taskId).sort()).toEqual([member, joiner].sort());
    // The joiner's rows went to the legacy table, none to the Tasks table.
    expect((await legacy.page({ partitionKey: g }, 100)).items.map((r) => r.rowKey)).toEqual(expect.arrayContaining([member, joiner, `~group~${g}`]));
    expect((await tasks.page({ partitionKey: g, rowKey: groupRange }, 100)).items).toEqual([]);
    // Resolving both empties its open rows there.
    for (const [id, queue] of [
      [member, tq],
      [joiner, tqj],
    ]) {
      const c = await claimOne(b, queue, id);
      await b.queue(c.credentials).reportCompleted(id, 0);
    }
    expect(await b.services.groups.hasOpen(g)).toBe(false);
    expect((await legacy.page({ partitionKey: g, rowKey: { ge: '~open~', lt: '~open~~' } }, 10)).items).toEqual([]);
    await qb.sealTaskGroup(g);
    await expectError(qb.createTask(late, taskDef(tq, { taskGroupId: g })), 409);
    // Its expiry removes it from the legacy table; the id may then start a group in the Tasks table.
    await b.services.groups.expire(g, new Date(Date.now() + 400 * 24 * 3600_000));
    expect((await legacy.page({ partitionKey: g }, 100)).items).toEqual([]);
    await qb.createTask(late, taskDef(tq, { taskGroupId: g }));
    expect((await tasks.page({ partitionKey: g, rowKey: groupRange }, 100)).items.length).toBe(4);
    expect((await qb.listTaskGroup(g)).tasks.map((t: any) => t.status.taskId)).toEqual([late]);
  } finally {
    await b.close();
  }
});
