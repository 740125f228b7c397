/**
 * Subscriptions one client cannot abuse: URLs minted before deleteSubscription read nothing of a
 * subscription re-created under the same id (each creation has its own queue), and the limit on
 * subscriptions is per client, so one client filling its share leaves others theirs.
 */
import { startTestService, TestService, taskDef, slugid, expectError } from '../helpers/service';
import { uniqueQueue } from '../helpers/work';
import { eventsClient, drainSubscription } from '../helpers/events';
import { poll } from '../helpers/azure-queue';
import { MAX_SUBSCRIPTIONS_PER_CLIENT } from '../../shared/events/subscriptions';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => svc?.close());

const inADay = () => new Date(Date.now() + 86400_000).toJSON();
const everyTaskDefined = (taskGroupId: string) => ({
  bindings: [{ exchange: 'exchange/taskcluster-queue/v1/task-defined', routingKeyPattern: `#.${taskGroupId}.#` }],
  expires: inADay(),
});

async function clientWith(scopes: string[]) {
  const clientId = `sub-test/${slugid()}`;
  const c = await svc.auth().createClient(clientId, { description: 'subscription test client', expires: inADay(), scopes });
  return { clientId, accessToken: c.accessToken as string };
}

test("a poll URL minted before deleteSubscription reads nothing of the id's next subscription", async () => {
  const id = `recreated-${slugid()}`;
  const taskGroupId = slugid();
  const first = await eventsClient(svc).createSubscription(id, everyTaskDefined(taskGroupId));
  await eventsClient(svc).deleteSubscription(id);

  // Another client creates a subscription under the same id and receives events.
  const other = await clientWith([`queue:create-subscription:${id}`, `queue:get-subscription:${id}`]);
  const second = await eventsClient(svc, other).createSubscription(id, everyTaskDefined(taskGroupId));
  expect(second.signedPollUrl).not.toBe(first.signedPollUrl);
  const taskId = slugid();
  await svc.queue().createTask(taskId, taskDef(uniqueQueue(), { taskGroupId }));

  const old = await poll(first.signedPollUrl, 32);
  expect(old.status === 200 ? old.messages : []).toEqual([]);
  const events = await drainSubscription(second);
  expect(events.map((e) => e.payload.status.taskId)).toEqual([taskId]);
});

test('one client filling its subscription limit leaves other clients theirs', async () => {
  const greedy = await clientWith(['queue:create-subscription:greedy-*']);
  const ev = eventsClient(svc, greedy);
  const prefix = `greedy-${slugid().slice(0, 8)}`;
  for (let i = 0; i < MAX_SUBSCRIPTIONS_PER_CLIENT; i++) await ev.createSubscription(`${prefix}-${i}`, everyTaskDefined(slugid()));
  const err = await expectError(ev.createSubscription(`${prefix}-over`, everyTaskDefined(slugid())), 409);
  expect(err.message).toMatch(new RegExp(`${greedy.clientId}.*${MAX_SUBSCRIPTIONS_PER_CLIENT}`));
  // Root (another client) still creates one.
  await eventsClient(svc).createSubscription(`root-${slugid()}`, everyTaskDefined(slugid()));
}, 120_000);
