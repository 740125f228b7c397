/**
 * A group's emptiness, as task-group-resolved needs it: the task that created a group learns from
 * its own resolution's write that the group has no unresolved task left, unless another task ever
 * joined, in which case it (like every other member) reads the group's open rows. On Azurite.
 */
import { startTestService, TestService, slugid } from '../helpers/service';
import { TaskGroups } from '../../shared/tasks/groups';

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
