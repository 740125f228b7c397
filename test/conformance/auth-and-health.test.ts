/**
 * The Auth API calls and health endpoints other suites do not make, through taskcluster-client, so
 * their responses are checked against their output schemas too (test/helpers/service.ts).
 */
import { startTestService, TestService, slugid } from '../helpers/service';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => svc?.close());

const inAnHour = () => new Date(Date.now() + 3600_000).toJSON();

test('ping and the load-balancer heartbeat answer', async () => {
  expect((await svc.queue().ping()).alive).toBe(true);
  expect((await svc.auth().ping()).alive).toBe(true);
  const lb = await fetch(`${svc.rootUrl}/api/queue/v1/__lbheartbeat__`);
  expect([lb.status, await lb.json()]).toEqual([200, {}]);
});

test('HEAD answers like GET, without a body', async () => {
  const head = await fetch(`${svc.rootUrl}/api/queue/v1/ping`, { method: 'HEAD' });
  expect(head.status).toBe(200);
  expect(head.headers.get('content-type')).toMatch(/application\/json/);
  expect(await head.text()).toBe('');
  const missing = await fetch(`${svc.rootUrl}/api/queue/v1/no-such-endpoint`, { method: 'HEAD' });
  expect([missing.status, await missing.text()]).toEqual([404, '']);
});

test('clients: update, disable, enable, reset the access token', async () => {
  const auth = svc.auth();
  const clientId = `schemas/${slugid()}`;
  await auth.createClient(clientId, { expires: inAnHour(), description: 'one', scopes: ['queue:ping'] });
  const updated = await auth.updateClient(clientId, { expires: inAnHour(), description: 'two', scopes: ['auth:current-scopes', 'queue:status:*'] });
  expect([updated.description, updated.scopes]).toEqual(['two', ['auth:current-scopes', 'queue:status:*']]);
  expect((await auth.disableClient(clientId)).disabled).toBe(true);
  expect((await auth.enableClient(clientId)).disabled).toBe(false);
  const reset = await auth.resetAccessToken(clientId);
  const asClient = svc.auth({ clientId, accessToken: reset.accessToken });
  expect((await asClient.currentScopes()).scopes).toEqual(expect.arrayContaining(['auth:current-scopes', 'queue:status:*']));
});

test('roles: create, update, get, list', async () => {
  const auth = svc.auth();
  const roleId = `schemas-role-${slugid()}`;
  await auth.createRole(roleId, { description: 'one', scopes: ['queue:ping'] });
  expect((await auth.updateRole(roleId, { description: 'two', scopes: ['queue:status:*'] })).scopes).toEqual(['queue:status:*']);
  expect((await auth.role(roleId)).description).toBe('two');
  expect((await auth.listRoles()).map((r: any) => r.roleId)).toContain(roleId);
  await auth.deleteRole(roleId);
});
