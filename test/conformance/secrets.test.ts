/**
 * The Secrets service through taskcluster-client's `Secrets` class, with Taskcluster's scopes:
 * set (twice: an update), get, remove, list (paged), 404 for a missing secret, 410 once expired,
 * 403 without the scope whether or not the secret exists; values are never echoed in errors and
 * are stored encrypted; this deployment's listSecretsWithExpiry lists names with their expiry.
 */
import { startTestService, TestService, slugid, expectError } from '../helpers/service';
import { passTime } from '../helpers/work';
import { encodeKey } from '../../shared/storage/keys';
import { EXPIRED_SECRET_KEPT_MS } from '../../shared/secrets/secrets';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => svc?.close());

const fromNow = (ms: number) => new Date(Date.now() + ms).toJSON();
const DAY = 24 * 3600_000;

async function secretsWith(scopes: string[]): Promise<any> {
  const clientId = `secrets/${slugid()}`;
  const c = await svc.auth().createClient(clientId, { expires: fromNow(DAY), description: 'secrets test', scopes });
  return new svc.tc.Secrets({ rootUrl: svc.rootUrl, credentials: { clientId, accessToken: c.accessToken }, retries: 0 });
}

test('set (twice), get, remove with the scopes Taskcluster names', async () => {
  const name = `captain:${slugid()}/a b`;
  const write = await secretsWith(['secrets:set:captain:*']);
  const read = await secretsWith(['secrets:get:captain:*']);
  const v1 = { secret: { data: 'bar' }, expires: fromNow(DAY) };
  const v2 = { secret: { data: 'foo', list: [1, 2] }, expires: fromNow(2 * DAY) };
  expect(await write.set(name, v1)).toEqual({});
  expect(await write.set(name, v2)).toEqual({});
  expect(await read.get(name)).toEqual(v2);
  await expectError(write.get(name), 403, 'InsufficientScopes');
  await expectError(read.remove(name), 403, 'InsufficientScopes');
  await expectError(write.set('other-name', v1), 403, 'InsufficientScopes');
  expect(await write.remove(name)).toEqual({});
  await expectError(read.get(name), 404, 'ResourceNotFound');
  await expectError(write.remove(name), 404, 'ResourceNotFound');
});

test('a refused set never echoes the value; the stored row holds it encrypted', async () => {
  const s = await secretsWith(['secrets:set:captain:*']);
  const name = `captain:${slugid()}`;
  const err = await expectError(s.set(name, { secret: { token: 'hunter2' }, expires: 'not a date' }), 400, 'InputValidationError');
  expect(JSON.stringify(err.body)).not.toContain('hunter2');
  await s.set(name, { secret: { token: 'hunter2' }, expires: fromNow(DAY) });
  const row = await svc.services.storage.table('Secrets').get(encodeKey(name), 'secret');
  expect(row).toBeDefined();
  expect(JSON.stringify(row)).not.toContain('hunter2');
});

test('list pages through every name (secrets:list-secrets)', async () => {
  const s = await secretsWith(['secrets:set:list:*', 'secrets:list-secrets']);
  const prefix = `list:${slugid()}`;
  const names = [`${prefix}/1`, `${prefix}/2`, `${prefix}/3`];
  for (const n of names) await s.set(n, { secret: { n }, expires: fromNow(DAY) });
  const seen: string[] = [];
  let token: string | undefined;
  do {
    const page = await s.list({ limit: 1, ...(token ? { continuationToken: token } : {}) });
    seen.push(...page.secrets);
    token = page.continuationToken;
  } while (token);
  expect(seen.filter((n) => n.startsWith(prefix))).toEqual(names);
  await expectError((await secretsWith([])).list(), 403, 'InsufficientScopes');
});

test('listSecretsWithExpiry (this deployment’s own): names, expiry and expired, never a value, paged to the end', async () => {
  const ref = await (await fetch(`${svc.rootUrl}/api/references/secrets/v1/api.json`)).json();
  const Own = svc.tc.createClient({ ...ref, entries: ref.entries.filter((e: any) => e.name === 'listSecretsWithExpiry') }, 'secrets');
  const write = await secretsWith(['secrets:set:expiry:*']);
  const prefix = `expiry:${slugid()}`;
  const later = fromNow(DAY);
  await write.set(`${prefix}/live`, { secret: { token: 'hunter2' }, expires: later });
  await write.set(`${prefix}/old`, { secret: { token: 'hunter3' }, expires: fromNow(-3600_000) });
  const clientId = `secrets/${slugid()}`;
  const c = await svc.auth().createClient(clientId, { expires: fromNow(DAY), description: 'lister', scopes: ['secrets:list-secrets'] });
  const lister = new Own({ rootUrl: svc.rootUrl, credentials: { clientId, accessToken: c.accessToken }, retries: 0 });
  const seen: any[] = [];
  let token: string | undefined;
  do {
    const page = await lister.listSecretsWithExpiry({ limit: 1, ...(token ? { continuationToken: token } : {}) });
    expect(JSON.stringify(page)).not.toMatch(/hunter/);
    seen.push(...page.secrets);
    token = page.continuationToken;
  } while (token);
  expect(seen.filter((s) => s.name.startsWith(prefix))).toEqual([
    { name: `${prefix}/live`, expires: later, expired: false },
    { name: `${prefix}/old`, expires: expect.any(String), expired: true },
  ]);
  const nobody = await svc.auth().createClient(`secrets/${slugid()}`, { expires: fromNow(DAY), description: 'none', scopes: [] });
  await expectError(
    new Own({ rootUrl: svc.rootUrl, credentials: { clientId: nobody.clientId, accessToken: nobody.accessToken }, retries: 0 }).listSecretsWithExpiry(),
    403,
    'InsufficientScopes',
  );
});

test('an expired secret reads as 410; the reaper removes it a grace period later', async () => {
  const name = `captain:${slugid()}`;
  const s = await secretsWith(['secrets:set:captain:*', 'secrets:get:captain:*']);
  await s.set(name, { secret: { x: 1 }, expires: fromNow(-2 * 3600_000) });
  const err = await expectError(s.get(name), 410, 'ResourceExpired');
  expect(err.message).toMatch(/^The requested resource has expired\./);
  // Last in this file: the service's clock moves a day on (clients made above expire with it).
  await passTime(EXPIRED_SECRET_KEPT_MS);
  await svc.runReaper();
  const root = new svc.tc.Secrets({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
  await expectError(root.get(name), 404, 'ResourceNotFound');
});
