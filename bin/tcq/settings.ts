/**
 * Where `tcq` connects and as whom: the standard TASKCLUSTER_* variables, as every Taskcluster
 * tool reads them. A mistake names the variable to fix.
 */

export interface Credentials {
  clientId: string;
  accessToken: string;
  certificate?: Record<string, unknown>;
}

export interface Settings {
  rootUrl: string;
  /** Absent: calls are made without credentials (the `anonymous` role's scopes). */
  credentials?: Credentials;
}

/** An `@` before the host (after an optional scheme): what a URL's `user:password@` looks like, parsed or not. */
const USERINFO = /^([a-z][a-z0-9+.-]*:\/\/)?[^/?#]*@/i;
const CREDENTIALS_IN_URL =
  'TASKCLUSTER_ROOT_URL holds credentials (user:token@host): remove them, and set TASKCLUSTER_CLIENT_ID and TASKCLUSTER_ACCESS_TOKEN instead';

/** A mistake of the user's (a missing variable, a bad argument): printed as one message, exit 2. */
export class UsageError extends Error {}

export function readSettings(env: NodeJS.ProcessEnv): Settings {
  const rootUrl = (env.TASKCLUSTER_ROOT_URL ?? '').trim().replace(/\/+$/, '');
  if (!rootUrl)
    throw new UsageError(
      'TASKCLUSTER_ROOT_URL is not set: export TASKCLUSTER_ROOT_URL=<the deployment URL> (`npm start` prints the lines to paste, with the credentials)',
    );
  let url: URL | undefined;
  try {
    url = new URL(rootUrl);
  } catch {
    // not a URL: said below
  }
  // Checked before anything echoes the URL: its `user:token@` is a secret a terminal or a log would keep.
  if (USERINFO.test(rootUrl) || url?.username || url?.password) throw new UsageError(CREDENTIALS_IN_URL);
  if (url?.protocol !== 'http:' && url?.protocol !== 'https:') throw new UsageError(`TASKCLUSTER_ROOT_URL '${rootUrl}' is not an http(s) URL`);
  const clientId = env.TASKCLUSTER_CLIENT_ID?.trim();
  const accessToken = env.TASKCLUSTER_ACCESS_TOKEN?.trim();
  if (!clientId && !accessToken) return { rootUrl };
  if (!clientId)
    throw new UsageError('TASKCLUSTER_ACCESS_TOKEN is set but TASKCLUSTER_CLIENT_ID is not: export both (or neither, to call without credentials)');
  if (!accessToken)
    throw new UsageError(`TASKCLUSTER_CLIENT_ID is '${clientId}' but TASKCLUSTER_ACCESS_TOKEN is not set: export the access token of that client`);
  let certificate: Record<string, unknown> | undefined;
  if (env.TASKCLUSTER_CERTIFICATE?.trim()) {
    try {
      certificate = JSON.parse(env.TASKCLUSTER_CERTIFICATE);
    } catch {
      throw new UsageError('TASKCLUSTER_CERTIFICATE is not JSON: it must be the certificate of temporary credentials, or unset');
    }
  }
  return { rootUrl, credentials: { clientId, accessToken, ...(certificate ? { certificate } : {}) } };
}
