/**
 * Auth's audit history through taskcluster-client's `Auth.getEntityHistory` and `listAuditHistory`:
 * every change to a client, role or secret is recorded with the caller's clientId, newest first,
 * paged to the end, behind Taskcluster's scopes, and kept 30 days. A refused change records nothing.
 */
import { startTestService, TestService, slugid, expectError } from '../helpers/service';
import { passTime } from '../helpers/work';
import { AUDIT_RETENTION_MS } from '../../shared/audit/history';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => svc?.close());

const DAY = 24 * 3600_000;
const fromNow = (ms: number) => new Date(svc.clock.ms() + ms).toJSON();
/** Between two changes: entries are ordered by the service's clock, which moves only when a test moves it. */
const STEP_MS = 1000;

/** A client of its own, holding `scopes`, and taskcluster-client's Auth and Secrets as it. */
async function caller(scopes: string[]) {
  const clientId = `audit/${slugid()}`;
  const c = await svc.auth().createClient(clientId, { expires: fromNow(DAY), description: 'audit test', scopes });
  const credentials = { clientId, accessToken: c.accessToken };
  return { clientId, auth: svc.auth(credentials), secrets: new svc.tc.Secrets({ rootUrl: svc.rootUrl, credentials, retries: 0 }) };
}

/** Every entry, one page of `limit` at a time, to the end: an empty page with a token is not the end. */
async function all(read: (query: Record<string, unknown>) => Promise<any>, limit = 1): Promise<any[]> {
  const out: any[] = [];
  let token: string | undefined;
  do {
    const page = await read({ limit, ...(token ? { continuationToken: token } : {}) });
    out.push(...page.auditHistory);
    token = page.continuationToken;
  } while (token);
  return out;
}

const actions = (entries: any[]) => entries.map((e) => e.actionType);

test("a client's changes, newest first, each naming who made it", async () => {
  const admin = await caller(['auth:*']);
  const clientId = `audit/target/${slugid()}`;
  const body = { expires: fromNow(DAY), description: 'target', scopes: [] };
  await admin.auth.createClient(clientId, body);
  for (const change of [
    () => admin.auth.updateClient(clientId, { ...body, description: 'changed' }),
    () => admin.auth.disableClient(clientId),
    () => admin.auth.enableClient(clientId),
    () => admin.auth.resetAccessToken(clientId),
    () => admin.auth.deleteClient(clientId),
  ]) {
    await passTime(STEP_MS);
    await change();
  }
  const history = await svc.auth().getEntityHistory('client', clientId);
  expect(actions(history.auditHistory)).toEqual(['deleted', 'reset', 'enabled', 'disabled', 'updated', 'created']);
  for (const e of history.auditHistory)
    expect(e).toEqual({ entityType: 'client', entityId: clientId, clientId: admin.clientId, actionType: e.actionType, created: e.created });
  const times = history.auditHistory.map((e: any) => Date.parse(e.created));
  expect([...times].sort((a, b) => b - a)).toEqual(times);
  expect(history.continuationToken).toBeUndefined();
});

test("roles and secrets too; listAuditHistory is one caller's changes across entity types; limit pages to the end", async () => {
  const admin = await caller(['auth:create-role:audit-*', 'auth:update-role:audit-*', 'auth:delete-role:audit-*', 'secrets:set:audit/*', 'queue:ping']);
  const roleId = `audit-${slugid()}`;
  const name = `audit/${slugid()}`;
  const steps = [
    () => admin.auth.createRole(roleId, { description: 'r', scopes: ['queue:ping'] }),
    () => admin.secrets.set(name, { secret: { v: 1 }, expires: fromNow(DAY) }),
    () => admin.auth.updateRole(roleId, { description: 'r2', scopes: [] }),
    () => admin.secrets.set(name, { secret: { v: 2 }, expires: fromNow(DAY) }),
    () => admin.secrets.remove(name),
    () => admin.auth.deleteRole(roleId),
  ];
  for (const step of steps) {
    await passTime(STEP_MS);
    await step();
  }
  const root = svc.auth();
  expect(actions((await root.getEntityHistory('role', roleId)).auditHistory)).toEqual(['deleted', 'updated', 'created']);
  expect(actions((await root.getEntityHistory('secret', name)).auditHistory)).toEqual(['deleted', 'updated', 'created']);

  const mine = await all((q) => root.listAuditHistory(admin.clientId, q));
  expect(mine.map((e) => `${e.entityType} ${e.actionType}`)).toEqual([
    'role deleted',
    'secret deleted',
    'secret updated',
    'role updated',
    'secret created',
    'role created',
  ]);
  expect(new Set(mine.map((e) => e.clientId))).toEqual(new Set([admin.clientId]));
  expect(await all((q) => root.getEntityHistory('secret', name, q), 2)).toEqual(mine.filter((e) => e.entityType === 'secret'));
  // An entity type this deployment does not record has no history.
  expect(await root.getEntityHistory('hook', `${roleId}/x`)).toEqual({ auditHistory: [] });
});

test('an id with slashes is one entity; a refused change records nothing', async () => {
  const auth = svc.auth();
  const clientId = `test/client/id/with/slashes/${slugid()}`;
  const body = { expires: fromNow(DAY), description: 'slashes', scopes: [] };
  await auth.createClient(clientId, body);
  await expectError(auth.createClient(clientId, { ...body, description: 'another' }), 409, 'RequestConflict');
  await expectError(auth.updateClient(`${clientId}/missing`, body), 404, 'ResourceNotFound');
  await expectError(auth.updateRole(`audit-missing-${slugid()}`, { description: 'x', scopes: [] }), 404, 'ResourceNotFound');
  const history = await auth.getEntityHistory('client', clientId);
  expect(history.auditHistory).toEqual([
    { entityType: 'client', entityId: clientId, clientId: svc.root.clientId, actionType: 'created', created: expect.any(String) },
  ]);
  expect((await auth.getEntityHistory('client', `${clientId}/missing`)).auditHistory).toEqual([]);
});

test("Taskcluster's scopes: auth:audit-history:<entityType>, auth:client-audit-history:<clientId>", async () => {
  const roles = await caller(['auth:audit-history:role']);
  const self = await caller([]);
  const reader = await caller([`auth:client-audit-history:${self.clientId}`]);
  expect(await roles.auth.getEntityHistory('role', 'anything')).toEqual({ auditHistory: [] });
  await expectError(roles.auth.getEntityHistory('client', self.clientId), 403, 'InsufficientScopes');
  await expectError(roles.auth.listAuditHistory(self.clientId), 403, 'InsufficientScopes');
  expect(await reader.auth.listAuditHistory(self.clientId)).toEqual({ auditHistory: [] });
  await expectError(reader.auth.listAuditHistory(roles.clientId), 403, 'InsufficientScopes');
  await expectError(self.auth.getEntityHistory('secret', 'x'), 403, 'InsufficientScopes');
});

test('entries are removed 30 days after the change', async () => {
  const auth = svc.auth();
  const roleId = `audit-old-${slugid()}`;
  await auth.createRole(roleId, { description: 'old', scopes: [] });
  expect(actions((await auth.getEntityHistory('role', roleId)).auditHistory)).toEqual(['created']);
  // Last in this file: the service's clock moves 30 days on (clients made above expire with it).
  await passTime(AUDIT_RETENTION_MS - 60_000);
  await svc.runReaper();
  expect(actions((await auth.getEntityHistory('role', roleId)).auditHistory)).toEqual(['created']);
  await passTime(2 * 60_000);
  await svc.runReaper();
  expect((await auth.getEntityHistory('role', roleId)).auditHistory).toEqual([]);
  expect((await auth.listAuditHistory(svc.root.clientId)).auditHistory.filter((e: any) => e.entityId === roleId)).toEqual([]);
});
