/**
 * Where Taskcluster v106's auth suites (client_test, role_test, testauth_test) saw this service
 * differ, pinned through taskcluster-client's `Auth`: `**` scopes, updateClient without scopes, a
 * repeated createClient, normalized scope sets, idempotent createRole, role parameter cycles, the
 * paged role listings and the test-authentication methods.
 */
import { startTestService, TestService, slugid, expectError } from '../helpers/service';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => svc?.close());

const inAnHour = () => new Date(svc.clock.ms() + 3600_000).toJSON();
/** Past Taskcluster's 15-minute window for a repeated createClient. */
const PAST_REPEAT_WINDOW_MS = 16 * 60_000;

/** expectError, and the message says `message`. */
async function expectErrorSaying(p: Promise<unknown>, statusCode: number, code: string, message: RegExp): Promise<void> {
  expect((await expectError(p, statusCode, code)).message).toMatch(message);
}

describe('clients', () => {
  test('scopes ending in ** are refused (400 InputError); updateClient says so before looking the client up', async () => {
    const auth = svc.auth();
    const body = { expires: inAnHour(), description: 'stars', scopes: ['queue:**'] };
    await expectErrorSaying(auth.createClient(`stars/${slugid()}`, body), 400, 'InputError', /scopes must not end with `\*\*`/);
    await expectErrorSaying(auth.updateClient(`stars/${slugid()}`, body), 400, 'InputError', /scopes must not end with `\*\*`/);
    await expectError(auth.updateClient(`stars/${slugid()}`, { ...body, scopes: ['queue:ping'] }), 404, 'ResourceNotFound');
  });

  test('a clientId under static/ is refused by every call that makes or changes a client (400 InputError), whether or not it exists', async () => {
    const auth = svc.auth();
    const body = { expires: inAnHour(), description: 'static', scopes: ['queue:ping'] };
    const reserved = /reserved for statically configured clients/;
    for (const clientId of [`static/${slugid()}`, 'static/root']) {
      await expectErrorSaying(auth.createClient(clientId, body), 400, 'InputError', reserved);
      await expectErrorSaying(auth.updateClient(clientId, body), 400, 'InputError', reserved);
      await expectErrorSaying(auth.resetAccessToken(clientId), 400, 'InputError', reserved);
      await expectErrorSaying(auth.enableClient(clientId), 400, 'InputError', reserved);
      await expectErrorSaying(auth.disableClient(clientId), 400, 'InputError', reserved);
      await expectErrorSaying(auth.deleteClient(clientId), 400, 'InputError', reserved);
    }
    // The root client still works.
    expect((await auth.currentScopes()).scopes).toContain('*');
  });

  test("updateClient without scopes keeps the client's scopes", async () => {
    const auth = svc.auth();
    const clientId = `keep/${slugid()}`;
    await auth.createClient(clientId, { expires: inAnHour(), description: 'one', scopes: ['queue:ping', 'auth:current-scopes'] });
    const updated = await auth.updateClient(clientId, { expires: inAnHour(), description: 'two' });
    expect([updated.description, updated.scopes]).toEqual(['two', ['auth:current-scopes', 'queue:ping']]);
    expect((await auth.client(clientId)).scopes).toEqual(['auth:current-scopes', 'queue:ping']);
  });

  test('a repeated identical createClient within 15 minutes answers the same client and token; otherwise 409', async () => {
    const auth = svc.auth();
    const clientId = `repeat/${slugid()}`;
    const body = { expires: inAnHour(), description: 'repeat', scopes: ['queue:ping'] };
    const first = await auth.createClient(clientId, body);
    const again = await auth.createClient(clientId, body);
    expect(again).toEqual(first);
    await expectError(auth.createClient(clientId, { ...body, description: 'other' }), 409, 'RequestConflict');
    await expectError(auth.createClient(clientId, { ...body, scopes: ['queue:ping', 'queue:status:*'] }), 409, 'RequestConflict');
    await auth.disableClient(clientId);
    await expectError(auth.createClient(clientId, body), 409, 'RequestConflict');
    await auth.enableClient(clientId);
    if (!svc.clock.controlled) return; // on Azurite the clock is the real one
    svc.clock.advance(PAST_REPEAT_WINDOW_MS);
    await expectError(auth.createClient(clientId, body), 409, 'RequestConflict');
  });

  test('currentScopes answers the expanded scopes normalized: sorted, each once, none a star scope covers', async () => {
    const auth = svc.auth();
    const tag = slugid();
    await auth.createRole(`dup-a-${tag}`, { description: 'a', scopes: ['dup:x', 'dup:y:1'] });
    await auth.createRole(`dup-b-${tag}`, { description: 'b', scopes: ['dup:x', 'dup:y:*'] });
    const clientId = `dup/${tag}`;
    const scopes = [`assume:dup-b-${tag}`, 'auth:current-scopes', `assume:dup-a-${tag}`];
    const { accessToken } = await auth.createClient(clientId, { expires: inAnHour(), description: 'dup', scopes });
    const current = (await svc.auth({ clientId, accessToken }).currentScopes()).scopes;
    expect(current).toEqual(['assume:anonymous', `assume:dup-a-${tag}`, `assume:dup-b-${tag}`, 'auth:current-scopes', 'dup:x', 'dup:y:*']);
  });
});

describe('roles', () => {
  test('scopes ending in ** are refused by createRole and updateRole (400 InputError)', async () => {
    const auth = svc.auth();
    const roleId = `stars-${slugid()}`;
    await expectErrorSaying(auth.createRole(roleId, { description: 'stars', scopes: ['foo:***'] }), 400, 'InputError', /must not end with `\*\*`/);
    await auth.createRole(roleId, { description: 'stars', scopes: ['foo:*'] });
    await expectErrorSaying(auth.updateRole(roleId, { description: 'stars', scopes: ['foo:**'] }), 400, 'InputError', /must not end with `\*\*`/);
  });

  test('createRole stores its scopes sorted and answers a repeat the same; role().expandedScopes is normalized', async () => {
    const auth = svc.auth();
    const roleId = `sorted-${slugid()}`;
    const body = { description: 'sorted', scopes: ['zz:1', 'aa:1', `assume:${roleId}-inner`] };
    await auth.createRole(`${roleId}-inner`, { description: 'inner', scopes: ['aa:1', 'aa:*', 'zz:1'] });
    const first = await auth.createRole(roleId, body);
    expect(first.scopes).toEqual(['aa:1', `assume:${roleId}-inner`, 'zz:1']);
    expect(await auth.createRole(roleId, body)).toEqual(first);
    expect((await auth.role(roleId)).expandedScopes).toEqual(['aa:*', `assume:${roleId}`, `assume:${roleId}-inner`, 'zz:1']);
    await expectError(auth.createRole(roleId, { ...body, description: 'other' }), 409, 'RequestConflict');
  });

  test('two concurrent identical createRole calls both succeed', async () => {
    const auth = svc.auth();
    const roleId = `twice-${slugid()}`;
    const body = { description: 'twice', scopes: ['queue:ping'] };
    const [a, b] = await Promise.all([auth.createRole(roleId, body), auth.createRole(roleId, body)]);
    expect(a).toEqual(b);
  });

  test('a role parameter cycle that expands without bound is refused with 400', async () => {
    const auth = svc.auth();
    const tag = slugid()
      .replace(/[^a-zA-Z]/g, '')
      .toLowerCase();
    await auth.createRole(`c${tag}test*`, { description: 'test*', scopes: [`assume:c${tag}other<..>x`] });
    await expectErrorSaying(auth.createRole(`c${tag}other*`, { description: 'other*', scopes: [`assume:c${tag}te<..>`] }), 400, 'InputError', /cycle/);
    await expectError(auth.role(`c${tag}other*`), 404, 'ResourceNotFound');
    // A cycle without a parameter converges and is allowed.
    await auth.createRole(`c${tag}plain-a`, { description: 'a', scopes: [`assume:c${tag}plain-b`] });
    await auth.createRole(`c${tag}plain-b`, { description: 'b', scopes: [`assume:c${tag}plain-a`, 'queue:ping'] });
    expect((await auth.role(`c${tag}plain-a`)).expandedScopes).toContain('queue:ping');
  });

  test('listRoleIds and listRoles2 page through the roles in order (all of them without a limit)', async () => {
    const auth = svc.auth();
    const all = (await auth.listRoleIds()).roleIds;
    expect(all).toEqual([...all].sort());
    expect(all.length).toBeGreaterThan(3);
    const paged: string[] = [];
    let continuationToken: string | undefined;
    do {
      const page = await auth.listRoleIds({ limit: 2, ...(continuationToken ? { continuationToken } : {}) });
      expect(page.roleIds.length).toBeLessThanOrEqual(2);
      paged.push(...page.roleIds);
      continuationToken = page.continuationToken;
    } while (continuationToken);
    expect(paged).toEqual(all);

    const first = await auth.listRoles2({ limit: 1 });
    expect(first.roles.map((r: any) => r.roleId)).toEqual(all.slice(0, 1));
    expect(first.roles[0].expandedScopes).toEqual(expect.any(Array));
    const rest = await auth.listRoles2({ continuationToken: first.continuationToken });
    expect(rest.roles.map((r: any) => r.roleId)).toEqual(all.slice(1));
    expect(rest.continuationToken).toBeUndefined();
    await expectError(auth.listRoleIds({ continuationToken: 'not-a-token' }), 400);
  });
});

describe('testAuthenticate and testAuthenticateGet', () => {
  const tester = { clientId: 'tester', accessToken: 'no-secret' };
  const call = (opts: Record<string, unknown>, body: Record<string, unknown>) => svc.auth(tester, opts).testAuthenticate(body);

  test('the tester client holds the clientScopes asked for; requiredScopes are checked', async () => {
    expect(await call({}, { clientScopes: ['test-scope:test'], requiredScopes: ['test-scope:test'] })).toEqual({
      clientId: 'tester',
      scopes: ['test-scope:test'],
    });
    expect((await call({}, { clientScopes: ['test-scope:*'], requiredScopes: ['test-scope:test'] })).scopes).toEqual(['test-scope:*']);
    await expectError(call({}, { clientScopes: ['test-scope'], requiredScopes: ['test-scope:*'] }), 403, 'InsufficientScopes');
    await expectError(
      svc.auth({ clientId: 'tester', accessToken: 'wrong' }).testAuthenticate({ clientScopes: ['a'], requiredScopes: ['a'] }),
      401,
      'AuthenticationFailed',
    );
    // The service's own clients are not the test clients.
    await expectError(svc.auth().testAuthenticate({ clientScopes: ['a'], requiredScopes: ['a'] }), 401, 'AuthenticationFailed');
  });

  test('authorizedScopes and temporary credentials apply as for any call', async () => {
    const narrowed = { authorizedScopes: ['test-scope:test'] };
    expect((await call(narrowed, { clientScopes: ['test-scope:*'], requiredScopes: ['test-scope:test'] })).scopes).toEqual(['test-scope:test']);
    await expectError(
      call({ authorizedScopes: ['test-scope:test1'] }, { clientScopes: ['test-scope:*'], requiredScopes: ['test-scope:test2'] }),
      403,
      'InsufficientScopes',
    );
    await expectError(
      call({ authorizedScopes: ['test-scope:*'] }, { clientScopes: ['test-scope:test2'], requiredScopes: ['test-scope:test2'] }),
      401,
      'AuthenticationFailed',
    );
    const temp = svc.tc.createTemporaryCredentials({ credentials: tester, scopes: ['test-scope:t'], expiry: new Date(svc.clock.ms() + 60_000) });
    expect(await svc.auth(temp).testAuthenticate({ clientScopes: ['test-scope:*'], requiredScopes: ['test-scope:t'] })).toEqual({
      clientId: 'tester',
      scopes: ['test-scope:t'],
    });
  });

  test('testAuthenticateGet: the tester holds test:* and auth:create-client:test:*, signed URLs too', async () => {
    const auth = svc.auth(tester);
    expect(await auth.testAuthenticateGet()).toEqual({ clientId: 'tester', scopes: ['auth:create-client:test:*', 'test:*'] });
    await expectError(svc.auth({ clientId: 'tester', accessToken: 'wrong' }).testAuthenticateGet(), 401, 'AuthenticationFailed');
    await expectError(svc.auth(tester, { authorizedScopes: ['test:scopes-abc'] }).testAuthenticateGet(), 403, 'InsufficientScopes');
    const signed = await fetch(auth.buildSignedUrl(auth.testAuthenticateGet));
    expect([signed.status, (await signed.json()).clientId]).toEqual([200, 'tester']);
  });
});
