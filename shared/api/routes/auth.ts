/**
 * The subset of the Taskcluster Auth API that taskcluster-client's `Auth` class calls to manage
 * clients and roles, and the audit history of who changed them (and secrets).
 */
import { ApiRequest, RouteDef, ok } from '../types';
import { heartbeatRoute, lbheartbeatRoute } from './health';
import { TEST_GET_SCOPES, testAuthenticator } from '../../auth/test-clients';
import { authenticateHawk } from '../../auth/authenticate-hawk';
import { Client, RoleRecord, generateAccessToken } from '../../auth/clients';
import { notFound, inputError } from '../../errors';
import { satisfies, normalize, endsWithDoubleStar } from '../../auth/scopes';
import { decodeToken, encodeToken, isString, pageLimit } from '../continuation';
import { AuthExchange, authChangedEvent } from '../../events/exchanges';
import * as slugid from 'slugid';
import { audited } from '../audited';
import { AuditPage, callerHistory, entityHistory } from '../../audit/history';

/**
 * A client write, announced on auth's exchange and then recorded in the audit history as `action`
 * (Taskcluster does both on every call, repeats included).
 */
async function clientChanged<T>(req: ApiRequest, change: AuthExchange, action: string, write: () => Promise<T>): Promise<T> {
  const out = await req.services.events.announced(authChangedEvent(change, { clientId: req.params.clientId }, slugid.nice()), write);
  await audited(req, 'client', req.params.clientId, action);
  return out;
}
/** A role write, likewise. */
async function roleChanged<T>(req: ApiRequest, change: AuthExchange, action: string, write: () => Promise<T>): Promise<T> {
  const out = await req.services.events.announced(authChangedEvent(change, { roleId: req.params.roleId }, slugid.nice()), write);
  await audited(req, 'role', req.params.roleId, action);
  return out;
}

/** A page of audit entries as Taskcluster answers it. */
function auditPage(p: AuditPage) {
  return ok({ auditHistory: p.entries, ...(p.continuation ? { continuationToken: encodeToken(p.continuation) } : {}) });
}

function clientJson(c: Client, expandedScopes: string[], withToken = false) {
  return {
    clientId: c.clientId,
    description: c.description,
    expires: c.expires.toJSON(),
    created: c.created.toJSON(),
    lastModified: c.lastModified.toJSON(),
    lastDateUsed: c.lastDateUsed.toJSON(),
    lastRotated: c.lastRotated.toJSON(),
    deleteOnExpiration: c.deleteOnExpiration,
    scopes: c.scopes,
    expandedScopes,
    disabled: c.disabled,
    ...(withToken ? { accessToken: c.accessToken } : {}),
  };
}

async function roleJson(req: Parameters<RouteDef['handler']>[0], r: RoleRecord) {
  return {
    roleId: r.roleId,
    description: r.description,
    scopes: r.scopes,
    expandedScopes: await req.services.clients.expand([`assume:${r.roleId}`]),
    created: r.created.toJSON(),
    lastModified: r.lastModified.toJSON(),
  };
}

async function expandedOf(req: Parameters<RouteDef['handler']>[0], c: Client) {
  return req.services.clients.expand(c.scopes);
}

/** Taskcluster's check, made before authorization and before looking the client or role up. */
function refuseDoubleStar(scopes: string[] | undefined): void {
  if (endsWithDoubleStar(scopes)) throw inputError('scopes must not end with `**`');
}

/** Taskcluster reserves this prefix for clients its deployment configures; no API call may make or change one. */
const STATIC_CLIENT_PREFIX = 'static/';

/** Taskcluster's check, made first: before the scopes and before looking the client up. */
function refuseStatic(clientId: string): void {
  if (clientId.startsWith(STATIC_CLIENT_PREFIX))
    throw inputError(
      `clientId "${clientId}" starts with "${STATIC_CLIENT_PREFIX}" which is reserved for statically configured clients. Contact your administrator to change static clients.`,
    );
}

/** What testAuthenticate answers: the caller as the method saw it. */
async function testCaller(req: ApiRequest) {
  const c = await req.caller();
  return { ...(c.clientId ? { clientId: c.clientId } : {}), scopes: normalize(c.scopes) };
}

/** A page of the roles in roleId order, resuming after the last roleId handed out (all of them without `limit`). */
async function rolesPage(req: ApiRequest) {
  const after = decodeToken(req.query.continuationToken, isString);
  const all = (await req.services.clients.roles(true)).filter((r) => after === undefined || r.roleId > after);
  if (req.query.limit === undefined) return { roles: all, more: {} };
  const roles = all.slice(0, pageLimit(req.query.limit));
  const more = roles.length < all.length ? { continuationToken: encodeToken(roles[roles.length - 1].roleId) } : {};
  return { roles, more };
}

const auth = (r: Omit<RouteDef, 'service'>): RouteDef => ({ ...r, service: 'auth' });

export const authRoutes: RouteDef[] = [
  auth({
    name: 'ping',
    title: 'Ping Server',
    description: 'Respond without doing anything. This endpoint is used to check that the service is up.',
    stability: 'stable',
    output: 'ping-response',
    method: 'GET',
    route: '/ping',
    scopes: null,
    handler: async (req) => ok({ alive: true, uptime: (Date.now() - req.services.startedAt.getTime()) / 1000 }),
  }),
  lbheartbeatRoute('auth'),
  heartbeatRoute('auth'),
  auth({
    name: 'listClients',
    title: 'List Clients',
    description: 'The clients, optionally those whose clientId starts with `prefix`, a page at a time.',
    stability: 'stable',
    output: 'list-clients-response',
    method: 'GET',
    route: '/clients/',
    query: ['prefix', 'continuationToken', 'limit'],
    scopes: 'auth:list-clients',
    handler: async (req) => {
      const page = await req.services.clients.listClients(req.query.prefix, pageLimit(req.query.limit), decodeToken(req.query.continuationToken, isString));
      const clients = await Promise.all(page.clients.map(async (c) => clientJson(c, await expandedOf(req, c))));
      return ok({ clients, ...(page.continuation ? { continuationToken: encodeToken(page.continuation) } : {}) });
    },
  }),
  auth({
    name: 'resetAccessToken',
    title: 'Reset `accessToken`',
    description: 'Give a client a new access token and return it; the old one stops working.',
    stability: 'stable',
    output: 'create-client-response',
    method: 'POST',
    route: '/clients/<clientId>/reset',
    scopes: 'auth:reset-access-token:<clientId>',
    handler: async (req) => {
      refuseStatic(req.params.clientId);
      const c = await clientChanged(req, 'client-updated', 'reset', () =>
        req.services.clients.modifyClient(req.params.clientId, (c) => ({ ...c, accessToken: generateAccessToken(), lastRotated: new Date() })),
      );
      return ok(clientJson(c, await expandedOf(req, c), true));
    },
  }),
  auth({
    name: 'enableClient',
    title: 'Enable Client',
    description: 'Enable a disabled client.',
    stability: 'stable',
    output: 'get-client-response',
    method: 'POST',
    route: '/clients/<clientId>/enable',
    scopes: 'auth:enable-client:<clientId>',
    handler: async (req) => {
      refuseStatic(req.params.clientId);
      const c = await clientChanged(req, 'client-updated', 'enabled', () =>
        req.services.clients.modifyClient(req.params.clientId, (c) => ({ ...c, disabled: false })),
      );
      return ok(clientJson(c, await expandedOf(req, c)));
    },
  }),
  auth({
    name: 'disableClient',
    title: 'Disable Client',
    description: 'Disable a client: its credentials are refused until it is enabled again.',
    stability: 'stable',
    output: 'get-client-response',
    method: 'POST',
    route: '/clients/<clientId>/disable',
    scopes: 'auth:disable-client:<clientId>',
    handler: async (req) => {
      refuseStatic(req.params.clientId);
      const c = await clientChanged(req, 'client-updated', 'disabled', () =>
        req.services.clients.modifyClient(req.params.clientId, (c) => ({ ...c, disabled: true })),
      );
      return ok(clientJson(c, await expandedOf(req, c)));
    },
  }),
  auth({
    name: 'client',
    title: 'Get Client',
    description: 'A client, with its scopes and their expansion (no access token).',
    stability: 'stable',
    output: 'get-client-response',
    method: 'GET',
    route: '/clients/<clientId>',
    scopes: 'auth:get-client:<clientId>',
    handler: async (req) => {
      const c = await req.services.clients.client(req.params.clientId, true);
      if (!c) throw notFound(`client ${req.params.clientId} not found`);
      return ok(clientJson(c, await expandedOf(req, c)));
    },
  }),
  auth({
    name: 'createClient',
    title: 'Create Client',
    description: 'Create a client and return it with its access token (the only time the token is shown).',
    stability: 'stable',
    output: 'create-client-response',
    method: 'PUT',
    route: '/clients/<clientId>',
    scopes: { AllOf: ['auth:create-client:<clientId>', { for: 'scope', in: 'scopes', each: '<scope>' }] },
    input: 'create-client-request',
    handler: async (req) => {
      const scopes: string[] = req.body.scopes ?? [];
      refuseStatic(req.params.clientId);
      refuseDoubleStar(scopes);
      await req.authorize({ clientId: req.params.clientId, scopes });
      if (new Date(req.body.expires) <= req.services.now())
        throw inputError(`expires (${req.body.expires}) is in the past; a client must expire in the future`);
      const c = await clientChanged(req, 'client-created', 'created', () =>
        req.services.clients.createClient({
          clientId: req.params.clientId,
          description: req.body.description,
          expires: new Date(req.body.expires),
          disabled: false,
          scopes: normalize(scopes),
          deleteOnExpiration: req.body.deleteOnExpiration,
        }),
      );
      return ok(clientJson(c, await expandedOf(req, c), true));
    },
  }),
  auth({
    name: 'updateClient',
    title: 'Update Client',
    description: 'Change the description, expiry and scopes of a client.',
    stability: 'stable',
    output: 'get-client-response',
    method: 'POST',
    route: '/clients/<clientId>',
    scopes: { AllOf: ['auth:update-client:<clientId>', { for: 'scope', in: 'scopesAdded', each: '<scope>' }] },
    input: 'create-client-request',
    handler: async (req) => {
      // Without `scopes` the client keeps its own (Taskcluster's schema has no default for them).
      const scopes: string[] | undefined = req.body.scopes;
      refuseStatic(req.params.clientId);
      refuseDoubleStar(scopes);
      const existing = await req.services.clients.client(req.params.clientId, true);
      if (!existing) throw notFound(`client ${req.params.clientId} not found`);
      const held = await req.services.clients.expand(existing.scopes);
      const scopesAdded = (scopes ?? []).filter((s) => !satisfies(held, s));
      await req.authorize({ clientId: req.params.clientId, scopesAdded });
      const c = await clientChanged(req, 'client-updated', 'updated', () =>
        req.services.clients.modifyClient(req.params.clientId, (c) => ({
          ...c,
          description: req.body.description,
          expires: new Date(req.body.expires),
          scopes: scopes ? normalize(scopes) : c.scopes,
          deleteOnExpiration: req.body.deleteOnExpiration,
        })),
      );
      return ok(clientJson(c, await expandedOf(req, c)));
    },
  }),
  auth({
    name: 'deleteClient',
    title: 'Delete Client',
    description: 'Delete a client; deleting a client that does not exist succeeds.',
    stability: 'stable',
    output: 'empty-response',
    method: 'DELETE',
    route: '/clients/<clientId>',
    scopes: 'auth:delete-client:<clientId>',
    handler: async (req) => {
      refuseStatic(req.params.clientId);
      await clientChanged(req, 'client-deleted', 'deleted', () => req.services.clients.deleteClient(req.params.clientId));
      return { status: 200, body: {} };
    },
  }),
  auth({
    name: 'listRoles',
    title: 'List Roles',
    description: 'Every role, with its scopes and their expansion.',
    stability: 'stable',
    output: 'list-roles-response',
    method: 'GET',
    route: '/roles/',
    scopes: 'auth:list-roles',
    handler: async (req) => ok(await Promise.all((await req.services.clients.roles(true)).map((r) => roleJson(req, r)))),
  }),
  auth({
    name: 'listRoleIds',
    title: 'List Role IDs',
    description: 'The ids of the roles in order, a page at a time (every one when no `limit` is given).',
    stability: 'stable',
    output: 'list-role-ids-response',
    method: 'GET',
    route: '/roleids/',
    query: ['continuationToken', 'limit'],
    scopes: 'auth:list-roles',
    handler: async (req) => {
      const page = await rolesPage(req);
      return ok({ roleIds: page.roles.map((r) => r.roleId), ...page.more });
    },
  }),
  auth({
    name: 'listRoles2',
    title: 'List Roles',
    description: 'The roles in order, with their scopes and expansion, a page at a time (every one when no `limit` is given).',
    stability: 'stable',
    output: 'list-roles2-response',
    method: 'GET',
    route: '/roles2/',
    query: ['continuationToken', 'limit'],
    scopes: 'auth:list-roles',
    handler: async (req) => {
      const page = await rolesPage(req);
      return ok({ roles: await Promise.all(page.roles.map((r) => roleJson(req, r))), ...page.more });
    },
  }),
  auth({
    name: 'role',
    title: 'Get Role',
    description: 'A role, with its scopes and their expansion.',
    stability: 'stable',
    output: 'get-role-response',
    method: 'GET',
    route: '/roles/<roleId>',
    scopes: 'auth:get-role:<roleId>',
    handler: async (req) => {
      const r = await req.services.clients.role(req.params.roleId);
      if (!r) throw notFound(`role ${req.params.roleId} not found`);
      return ok(await roleJson(req, r));
    },
  }),
  auth({
    name: 'createRole',
    title: 'Create Role',
    description: 'Create a role: clients with `assume:<roleId>` get its scopes.',
    stability: 'stable',
    output: 'get-role-response',
    method: 'PUT',
    route: '/roles/<roleId>',
    scopes: { AllOf: ['auth:create-role:<roleId>', { for: 'scope', in: 'scopes', each: '<scope>' }] },
    input: 'create-role-request',
    handler: async (req) => {
      refuseDoubleStar(req.body.scopes);
      await req.authorize({ roleId: req.params.roleId, scopes: req.body.scopes });
      const r = await roleChanged(req, 'role-created', 'created', () =>
        req.services.clients.putRole(req.params.roleId, req.body.description, normalize([...req.body.scopes]), 'create'),
      );
      return ok(await roleJson(req, r));
    },
  }),
  auth({
    name: 'updateRole',
    title: 'Update Role',
    description: 'Change the description and scopes of a role.',
    stability: 'stable',
    output: 'get-role-response',
    method: 'POST',
    route: '/roles/<roleId>',
    scopes: { AllOf: ['auth:update-role:<roleId>', { for: 'scope', in: 'scopesAdded', each: '<scope>' }] },
    input: 'create-role-request',
    handler: async (req) => {
      refuseDoubleStar(req.body.scopes);
      const existing = await req.services.clients.role(req.params.roleId);
      if (!existing) throw notFound(`role ${req.params.roleId} not found`);
      const held = await req.services.clients.expand([`assume:${req.params.roleId}`]);
      const scopesAdded = (req.body.scopes as string[]).filter((s) => !satisfies(held, s));
      await req.authorize({ roleId: req.params.roleId, scopesAdded });
      const r = await roleChanged(req, 'role-updated', 'updated', () =>
        req.services.clients.putRole(req.params.roleId, req.body.description, normalize([...req.body.scopes]), 'update'),
      );
      return ok(await roleJson(req, r));
    },
  }),
  auth({
    name: 'deleteRole',
    title: 'Delete Role',
    description: 'Delete a role; deleting a role that does not exist succeeds.',
    stability: 'stable',
    output: 'empty-response',
    method: 'DELETE',
    route: '/roles/<roleId>',
    scopes: 'auth:delete-role:<roleId>',
    handler: async (req) => {
      await roleChanged(req, 'role-deleted', 'deleted', () => req.services.clients.deleteRole(req.params.roleId));
      return { status: 200, body: {} };
    },
  }),
  auth({
    name: 'getEntityHistory',
    title: 'Get Entity History',
    description:
      'Who changed a client, role or secret (`entityType` `client`, `role` or `secret`) and how, newest first, a page at a time ' +
      '(`limit`, `continuationToken`; keep calling until no `continuationToken` comes back). Entries are kept 30 days.',
    stability: 'stable',
    category: 'Audit',
    output: 'get-entity-history-response',
    method: 'GET',
    route: '/audit/<entityType>/<entityId>',
    query: ['continuationToken', 'limit'],
    scopes: 'auth:audit-history:<entityType>',
    handler: async (req) =>
      auditPage(
        await entityHistory(
          req.services,
          req.params.entityType,
          req.params.entityId,
          pageLimit(req.query.limit),
          decodeToken(req.query.continuationToken, isString),
        ),
      ),
  }),
  auth({
    name: 'listAuditHistory',
    title: 'List Audit History',
    description:
      'What a client changed (clients, roles and secrets), newest first, a page at a time (`limit`, `continuationToken`; keep ' +
      'calling until no `continuationToken` comes back). Entries are kept 30 days.',
    stability: 'stable',
    category: 'Audit',
    output: 'get-entity-history-response',
    method: 'GET',
    route: '/clients/<clientId>/audit',
    query: ['continuationToken', 'limit'],
    scopes: 'auth:client-audit-history:<clientId>',
    handler: async (req) =>
      auditPage(await callerHistory(req.services, req.params.clientId, pageLimit(req.query.limit), decodeToken(req.query.continuationToken, isString))),
  }),
  auth({
    name: 'expandScopes',
    title: 'Expand Scopes',
    description: 'The given scopes with every role they assume expanded.',
    stability: 'stable',
    output: 'scopeset',
    method: 'POST',
    route: '/scopes/expand',
    scopes: 'auth:expand-scopes',
    input: 'scopeset',
    handler: async (req) => ok({ scopes: await req.services.clients.expand(req.body.scopes) }),
  }),
  auth({
    name: 'currentScopes',
    title: 'Get Current Scopes',
    description: 'The scopes the caller holds, expanded.',
    stability: 'stable',
    output: 'scopeset',
    method: 'GET',
    route: '/scopes/current',
    scopes: 'auth:current-scopes',
    handler: async (req) => {
      const c = await req.caller();
      if (!c.clientId) throw inputError('currentScopes needs credentials');
      return ok({ scopes: normalize(c.scopes) });
    },
  }),
  auth({
    name: 'authenticateHawk',
    title: 'Validate Hawk Request',
    description:
      'Authenticates a request another service received (its method, resource, host, port and Authorization header, or a bewit ' +
      "in the resource), as this deployment's own endpoints do, so services can delegate Hawk. Answers the caller's clientId, " +
      "expanded scopes and their expiry (`auth-success`), why it failed (`auth-failed`), or the anonymous role's scopes (`no-auth`).",
    stability: 'stable',
    output: 'authenticate-hawk-response',
    input: 'authenticate-hawk-request',
    method: 'POST',
    route: '/authenticate-hawk',
    scopes: null,
    handler: async (req) => ok(await authenticateHawk(req.services, req.body)),
  }),
  auth({
    name: 'testAuthenticate',
    title: 'Test Authentication',
    description:
      "Checks a client library's request signing: authenticates as clientId `tester` with accessToken `no-secret` holding " +
      '`clientScopes` (certificates and authorizedScopes applied), requires `requiredScopes`, and answers the clientId and scopes seen.',
    stability: 'stable',
    output: 'test-authenticate-response',
    method: 'POST',
    route: '/test-authenticate',
    scopes: { AllOf: [{ for: 'scope', in: 'requiredScopes', each: '<scope>' }] },
    input: 'test-authenticate-request',
    authenticator: (body, svc) => testAuthenticator(body?.clientScopes ?? [], svc.now),
    handler: async (req) => {
      await req.authorize({ requiredScopes: req.body.requiredScopes ?? [] });
      return ok(await testCaller(req));
    },
  }),
  auth({
    name: 'testAuthenticateGet',
    title: 'Test Authentication (GET)',
    description:
      'testAuthenticate with GET, for signed URLs (bewits): the `tester` client holds `test:*` and `auth:create-client:test:*`, ' +
      'and the call requires `test:authenticate-get`.',
    stability: 'stable',
    output: 'test-authenticate-response',
    method: 'GET',
    route: '/test-authenticate-get/',
    scopes: 'test:authenticate-get',
    authenticator: (_body, svc) => testAuthenticator(TEST_GET_SCOPES, svc.now),
    handler: async (req) => ok(await testCaller(req)),
  }),
];
