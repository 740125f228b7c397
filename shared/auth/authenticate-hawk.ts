/**
 * authenticateHawk: Hawk verification as a service, for services that delegate it (as Taskcluster's
 * auth service offers): the same checks as this deployment's own endpoints, given the request's
 * method, resource, host, port and Authorization header (or a bewit in the resource).
 */
import hawk from 'hawk';
import { ApiError } from '../errors';
import type { Authenticator } from './authenticate';

/** How long a `no-auth` answer's anonymous scopes may be relied on (the role can change). */
const NO_AUTH_VALID_MS = 15 * 60 * 1000;

export interface HawkRequest {
  method: string;
  resource: string;
  host: string;
  port: number;
  authorization?: string;
}

export type HawkAnswer =
  | { status: 'auth-success'; scheme: 'hawk'; clientId: string; scopes: string[]; expires: string; hash?: string }
  | { status: 'auth-failed'; message: string }
  | { status: 'no-auth'; scheme: 'none'; scopes: string[]; expires: string };

export async function authenticateHawk(d: { authenticator: Authenticator; now: () => Date }, r: HawkRequest): Promise<HawkAnswer> {
  const bewit = /^\/.*[?&]bewit=/.test(r.resource);
  if (!r.authorization && !bewit) {
    const { scopes } = await d.authenticator.anonymous();
    return { status: 'no-auth', scheme: 'none', scopes, expires: new Date(d.now().getTime() + NO_AUTH_VALID_MS).toJSON() };
  }
  try {
    const caller = await d.authenticator.authenticate({
      method: r.method.toUpperCase(),
      resource: r.resource,
      host: r.host,
      port: r.port,
      authorization: r.authorization,
    });
    const hash = r.authorization ? payloadHash(r.authorization) : undefined;
    return {
      status: 'auth-success',
      scheme: 'hawk',
      clientId: caller.clientId ?? '',
      scopes: caller.scopes,
      expires: (caller.expires ?? new Date(d.now().getTime() + NO_AUTH_VALID_MS)).toJSON(),
      ...(hash ? { hash } : {}),
    };
  } catch (err) {
    if (err instanceof ApiError && err.code === 'AuthenticationFailed') return { status: 'auth-failed', message: err.message };
    throw err;
  }
}

/** The payload hash the client signed, if its header carries one (the caller may check the body against it). */
function payloadHash(authorization: string): string | undefined {
  try {
    return (hawk.utils.parseAuthorizationHeader(authorization) as { hash?: string }).hash;
  } catch {
    return undefined;
  }
}
