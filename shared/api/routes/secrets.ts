/**
 * The Secrets service (/api/secrets/v1), as Taskcluster's: small JSON values by name with an expiry,
 * readable with `secrets:get:<name>`, written and removed with `secrets:set:<name>`, listed by name
 * (and, this deployment's own method, with their expiry) with `secrets:list-secrets`. Values are
 * encrypted at rest (shared/secrets/secrets.ts); every change is in the audit history.
 */
import { RouteDef, ok } from '../types';
import { registerSchema } from '../schemas';
import { decodeToken, encodeToken, isString, pageLimit } from '../continuation';
import { heartbeatRoute, lbheartbeatRoute } from './health';
import { audited } from '../audited';
import { checkSecretName, getSecret, listSecretExpiries, listSecrets, removeSecret, setSecret } from '../../secrets/secrets';

registerSchema('secret', {
  type: 'object',
  additionalProperties: false,
  properties: {
    secret: { type: 'object', description: 'The secret value to be encrypted.' },
    expires: { type: 'string', format: 'date-time', description: 'An expiration date for this secret.' },
  },
  required: ['secret', 'expires'],
});

const secrets = (r: Omit<RouteDef, 'service' | 'category'>): RouteDef => ({ ...r, service: 'secrets', category: 'Secrets Service' });

export const secretRoutes: RouteDef[] = [
  secrets({
    name: 'ping',
    title: 'Ping Server',
    stability: 'stable',
    output: 'ping-response',
    method: 'GET',
    route: '/ping',
    scopes: null,
    description: 'Whether the service is up.',
    handler: async (req) => ok({ alive: true, uptime: (Date.now() - req.services.startedAt.getTime()) / 1000 }),
  }),
  lbheartbeatRoute('secrets'),
  heartbeatRoute('secrets'),
  secrets({
    name: 'set',
    title: 'Set Secret',
    stability: 'stable',
    output: 'empty-response',
    input: 'secret',
    method: 'PUT',
    route: '/secret/<name>',
    scopes: 'secrets:set:<name>',
    cleanPayload: (p) => ({ ...p, secret: '(OMITTED)' }),
    description: 'Set the secret associated with some key. If the secret already exists, it is updated instead.',
    handler: async (req) => {
      checkSecretName(req.params.name);
      await audited(req, 'secret', req.params.name, await setSecret(req.services, req.params.name, req.body));
      return ok({});
    },
  }),
  secrets({
    name: 'remove',
    title: 'Delete Secret',
    stability: 'stable',
    output: 'empty-response',
    method: 'DELETE',
    route: '/secret/<name>',
    scopes: 'secrets:set:<name>',
    description: 'Delete the secret associated with some key (404 if there is none).',
    handler: async (req) => {
      await removeSecret(req.services, req.params.name);
      await audited(req, 'secret', req.params.name, 'deleted');
      return ok({});
    },
  }),
  secrets({
    name: 'get',
    title: 'Read Secret',
    stability: 'stable',
    output: 'secret',
    method: 'GET',
    route: '/secret/<name>',
    scopes: 'secrets:get:<name>',
    description:
      'Read the secret associated with some key. If the secret has recently expired, the response code 410 is returned. If the caller lacks ' +
      'the scope necessary to get the secret, the call will fail with a 403 code regardless of whether the secret exists.',
    handler: async (req) => ok(await getSecret(req.services, req.params.name)),
  }),
  secrets({
    name: 'list',
    title: 'List Secrets',
    stability: 'stable',
    output: 'secret-list',
    method: 'GET',
    route: '/secrets',
    query: ['limit', 'continuationToken'],
    scopes: 'secrets:list-secrets',
    description: 'The names of the secrets, a page at a time (`limit`, `continuationToken`); keep calling until no `continuationToken` comes back.',
    handler: async (req) => {
      const page = await listSecrets(req.services, pageLimit(req.query.limit), decodeToken(req.query.continuationToken, isString));
      return ok({ secrets: page.secrets, ...(page.continuation ? { continuationToken: encodeToken(page.continuation) } : {}) });
    },
  }),
  secrets({
    name: 'listSecretsWithExpiry',
    title: 'List Secrets with their Expiry',
    stability: 'experimental',
    output: 'secret-expiry-list',
    method: 'GET',
    route: '/secrets-with-expiry',
    query: ['limit', 'continuationToken'],
    scopes: 'secrets:list-secrets',
    description:
      'As `list`, each name with its `expires` and whether it has `expired` (reading it would answer 410 until the reaper removes it); ' +
      "never a value. This deployment's own method, for the dashboard and `tcq secret list`.",
    handler: async (req) => {
      const page = await listSecretExpiries(req.services, pageLimit(req.query.limit), decodeToken(req.query.continuationToken, isString));
      return ok({ secrets: page.secrets, ...(page.continuation ? { continuationToken: encodeToken(page.continuation) } : {}) });
    },
  }),
];
