/**
 * The subset of the Taskcluster Auth API that taskcluster-client's `Auth` class calls to manage
 * clients and roles.
 */
import { RouteDef, ok } from '../types';
import { Client, RoleRecord, generateAccessToken } from '../../auth/clients';
import { notFound, inputError } from '../../errors';
import { satisfies, normalize } from '../../auth/scopes';
import { decodeToken, encodeToken, isString, pageLimit } from '../continuation';

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
      const c = await req.services.clients.modifyClient(req.params.clientId, (c) => ({ ...c, accessToken: generateAccessToken(), lastRotated: new Date() }));
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
      const c = await req.services.clients.modifyClient(req.params.clientId, (c) => ({ ...c, disabled: false }));
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
      const c = await req.services.clients.modifyClient(req.params.clientId, (c) => ({ ...c, disabled: true }));
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
      await req.authorize({ clientId: req.params.clientId, scopes: req.body.scopes });
      if (new Date(req.body.expires) <= req.services.now())
        throw inputError(`expires (${req.body.expires}) is in the past; a client must expire in the future`);
      const c = await req.services.clients.createClient({
        clientId: req.params.clientId,
        description: req.body.description,
        expires: new Date(req.body.expires),
        disabled: false,
        scopes: normalize([...req.body.scopes]),
        deleteOnExpiration: req.body.deleteOnExpiration,
      });
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
      const existing = await req.services.clients.client(req.params.clientId, true);
      if (!existing) throw notFound(`client ${req.params.clientId} not found`);
      const held = await req.services.clients.expand(existing.scopes);
      const scopesAdded = (req.body.scopes as string[]).filter((s) => !satisfies(held, s));
      await req.authorize({ clientId: req.params.clientId, scopesAdded });
      const c = await req.services.clients.modifyClient(req.params.clientId, (c) => ({
        ...c,
        description: req.body.description,
        expires: new Date(req.body.expires),
        scopes: normalize([...req.body.scopes]),
        deleteOnExpiration: req.body.deleteOnExpiration,
      }));
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
      await req.services.clients.deleteClient(req.params.clientId);
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
      await req.authorize({ roleId: req.params.roleId, scopes: req.body.scopes });
      const r = await req.services.clients.putRole(req.params.roleId, req.body.description, normalize([...req.body.scopes]), 'create');
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
      const existing = await req.services.clients.role(req.params.roleId);
      if (!existing) throw notFound(`role ${req.params.roleId} not found`);
      const held = await req.services.clients.expand([`assume:${req.params.roleId}`]);
      const scopesAdded = (req.body.scopes as string[]).filter((s) => !satisfies(held, s));
      await req.authorize({ roleId: req.params.roleId, scopesAdded });
      const r = await req.services.clients.putRole(req.params.roleId, req.body.description, normalize([...req.body.scopes]), 'update');
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
      await req.services.clients.deleteRole(req.params.roleId);
      return { status: 200, body: {} };
    },
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
      return ok({ scopes: c.scopes });
    },
  }),
];
