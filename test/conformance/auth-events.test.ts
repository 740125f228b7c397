/**
 * The auth service's exchanges, bound through taskcluster-client's `AuthEvents`: every client and
 * role change announces itself as Taskcluster's auth service does (`{clientId}` / `{roleId}`, the
 * reserved routing key), refused changes announce nothing.
 */
import { startTestService, TestService, slugid, expectError } from '../helpers/service';
import { eventsClient, drainSubscription, DeliveredEvent } from '../helpers/events';

let svc: TestService;
let ae: any;
beforeAll(async () => {
  svc = await startTestService();
  ae = new svc.tc.AuthEvents({ rootUrl: svc.rootUrl });
});
afterAll(async () => svc?.close());

const inADay = () => new Date(Date.now() + 24 * 3600_000).toJSON();
/** Each event once: an ambiguous queue put may leave a second copy, and consumers drop repeats by id. */
const drainUnique = async (sub: Parameters<typeof drainSubscription>[0]): Promise<DeliveredEvent[]> => [
  ...new Map((await drainSubscription(sub)).map((e) => [e.id, e])).values(),
];

test('client-created, -updated and -deleted reach AuthEvents bindings', async () => {
  const sub = await eventsClient(svc).createSubscription(`auth-${slugid()}`, {
    bindings: [ae.clientCreated(), ae.clientUpdated(), ae.clientDeleted()],
    expires: inADay(),
  });
  const auth = svc.auth();
  const clientId = `ev/${slugid()}`;
  await auth.createClient(clientId, { description: 'd', expires: inADay(), scopes: [] });
  await auth.updateClient(clientId, { description: 'd2', expires: inADay() });
  await auth.disableClient(clientId);
  await auth.enableClient(clientId);
  await auth.resetAccessToken(clientId);
  await auth.deleteClient(clientId);
  // Refused: announces nothing.
  await expectError(auth.updateClient(clientId, { description: 'd3', expires: inADay() }), 404, 'ResourceNotFound');
  const events = await drainUnique(sub);
  expect(events.map((e) => e.exchange.replace('exchange/taskcluster-auth/v1/', ''))).toEqual([
    'client-created',
    'client-updated',
    'client-updated',
    'client-updated',
    'client-updated',
    'client-deleted',
  ]);
  for (const e of events)
    expect({ payload: e.payload, routingKey: e.routingKey, routes: e.routes }).toEqual({ payload: { clientId }, routingKey: '_', routes: [] });
});

test('role-created, -updated and -deleted reach AuthEvents bindings', async () => {
  const sub = await eventsClient(svc).createSubscription(`roles-${slugid()}`, {
    bindings: [ae.roleCreated(), ae.roleUpdated(), ae.roleDeleted()],
    expires: inADay(),
  });
  const auth = svc.auth();
  const roleId = `ev-role-${slugid()}`;
  await auth.createRole(roleId, { description: 'd', scopes: ['a:b'] });
  await auth.updateRole(roleId, { description: 'd', scopes: ['a:c'] });
  await auth.deleteRole(roleId);
  const events = await drainUnique(sub);
  expect(events.map((e) => [e.exchange.replace('exchange/taskcluster-auth/v1/', ''), e.payload])).toEqual([
    ['role-created', { roleId }],
    ['role-updated', { roleId }],
    ['role-deleted', { roleId }],
  ]);
});
