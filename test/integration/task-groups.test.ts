/**
 * A group's emptiness, as task-group-resolved needs it: its open rows, one per unresolved member
 * (a group of one learns it from its creator's own resolution: test/unit/executor.test.ts and
 * test/integration/crash-groups.test.ts). On Azurite.
 */
import { startTestService, TestService, slugid, clock } from '../helpers/service';
import { TaskGroups } from '../../shared/tasks/groups';

let svc: TestService;
let groups: TaskGroups;
beforeAll(async () => {
  svc = await startTestService();
  groups = svc.services.groups;
});
afterAll(async () => svc?.close());

// One time for all: a member that expires later than the group extends the group's meta row.
const at = new Date(clock.ms() + 3600_000).toJSON();
const expires = () => at;

test('a group is open while any member is unresolved, empty once all resolved', async () => {
  const g = slugid();
  const [creator, member, third] = [slugid(), slugid(), slugid()];
  await groups.addMember(g, creator, 'sched', expires(), new Date().toJSON());
  await groups.addMember(g, member, 'sched', expires(), new Date().toJSON());
  const afterJoin = (await groups.meta(g))!;
  expect(afterJoin.joined).toBe(true);
  // Later members find the group joined already and leave its meta row alone (no hot row in a large group).
  await groups.addMember(g, third, 'sched', expires(), new Date().toJSON());
  expect((await groups.meta(g))!.etag).toBe(afterJoin.etag);
  await groups.close(g, third);
  await groups.close(g, creator);
  expect(await groups.hasOpen(g)).toBe(true);
  await groups.close(g, member);
  expect(await groups.hasOpen(g)).toBe(false);
  // A repeat (a crash before the event was delivered) changes nothing.
  await groups.close(g, member);
  expect(await groups.hasOpen(g)).toBe(false);
});
