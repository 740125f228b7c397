/**
 * The Auth API calls and health endpoints other suites do not make, through taskcluster-client, so
 * their responses are checked against their output schemas too (test/helpers/service.ts).
 */
import { startTestService, TestService, slugid, taskDef } from '../helpers/service';
import { claimOne, uniqueQueue } from '../helpers/work';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => svc?.close());

const inAnHour = () => new Date(svc.clock.ms() + 3600_000).toJSON();

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

/** Far past Hawk's 15-minute timestamp window and the certificate drift allowed. */
const HOURS_AHEAD_MS = 6 * 3600_000;

test("with the service's clock hours ahead of the real time the client signs with, requests and issued credentials authenticate", async () => {
  if (!svc.clock.controlled) return; // on Azurite the clock is the real one
  svc.clock.advance(HOURS_AHEAD_MS);
  // Hawk checks the request's timestamp against real time, as a transport freshness window.
  const tq = uniqueQueue();
  const taskId = slugid();
  await svc.queue().createTask(taskId, taskDef(tq));
  // Credentials are judged on the service's clock: the claim's temporary credentials, issued now, work.
  const c = await claimOne(svc, tq, taskId);
  expect(Date.parse(c.takenUntil)).toBeGreaterThan(Date.now() + HOURS_AHEAD_MS);
  expect((await svc.queue(c.credentials).reclaimTask(taskId, 0)).status.state).toBe('running');
  // A client whose expiry passed on the service's clock (but not in real time) is refused.
  const auth = svc.auth();
  const clientId = `clock/${slugid()}`;
  const created = await auth.createClient(clientId, {
    expires: new Date(svc.clock.ms() + 60_000).toJSON(),
    description: 'soon',
    scopes: ['auth:current-scopes'],
  });
  const asClient = svc.auth({ clientId, accessToken: created.accessToken });
  expect((await asClient.currentScopes()).scopes).toContain('auth:current-scopes');
  svc.clock.advance(120_000);
  await expect(svc.auth({ clientId, accessToken: created.accessToken }).currentScopes()).rejects.toMatchObject({ statusCode: 401 });
});
