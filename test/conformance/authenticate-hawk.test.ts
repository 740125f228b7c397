/**
 * authenticateHawk through taskcluster-client's Auth class: another service hands over a request
 * it received (method, resource, host, port, Authorization header or a bewit) and gets the
 * caller's clientId and scopes, why it failed, or the anonymous role's scopes.
 */
import hawk from 'hawk';
import { startTestService, TestService } from '../helpers/service';

let svc: TestService;
let auth: any;
beforeAll(async () => {
  svc = await startTestService();
  auth = svc.auth();
});
afterAll(async () => svc?.close());

/** A request to another service, signed as taskcluster-client signs. */
const signed = (key: string, resource = '/api/thing/v1/x?y=1', method = 'POST') => ({
  method: method.toLowerCase(),
  resource,
  host: 'other.example.com',
  port: 443,
  authorization: hawk.client.header(`https://other.example.com${resource}`, method, { credentials: { id: svc.root.clientId, key, algorithm: 'sha256' } })
    .header,
});

test('a correctly signed request: auth-success with the clientId, its expanded scopes and their expiry', async () => {
  const r = await auth.authenticateHawk(signed(svc.root.accessToken));
  expect(r).toMatchObject({ status: 'auth-success', scheme: 'hawk', clientId: svc.root.clientId });
  expect(r.scopes).toContain('*');
  expect(Date.parse(r.expires)).toBeGreaterThan(Date.now());
});

test('a wrong key: auth-failed with the reason, not an error', async () => {
  const r = await auth.authenticateHawk(signed('not-the-token-at-all-really'));
  expect(r).toEqual({ status: 'auth-failed', message: expect.stringContaining('Bad mac') });
});

test("without credentials: no-auth with the anonymous role's scopes", async () => {
  const r = await auth.authenticateHawk({ method: 'get', resource: '/api/thing/v1/x', host: 'other.example.com', port: 443 });
  expect(r).toMatchObject({ status: 'no-auth', scheme: 'none' });
  expect(r.scopes).toEqual(expect.arrayContaining(['assume:anonymous']));
});

test('a bewit in the resource authenticates as the client that signed the URL', async () => {
  const url = new URL(svc.queue().buildSignedUrl(svc.queue().task, 'aaaaaaaaaaaaaaaaaaaaaa'));
  const r = await auth.authenticateHawk({ method: 'get', resource: url.pathname + url.search, host: url.hostname, port: Number(url.port) });
  expect(r).toMatchObject({ status: 'auth-success', clientId: svc.root.clientId });
});
