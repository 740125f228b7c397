/**
 * A per-task proxy (like taskcluster-proxy): the task calls
 * `$TASKCLUSTER_PROXY_URL/api/<service>/<version>/<path>` without any credentials, and the proxy
 * forwards the request to the root URL signed with the run's latest temporary credentials and
 * `authorizedScopes = task.scopes`. Without that restriction the task could use the run
 * credentials' own scopes (reportCompleted, createArtifact) behind the worker's back.
 * It listens on loopback only; redirects (e.g. getArtifact's 303) are passed through unfollowed.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import hawk from 'hawk';
import type { Credentials } from './types';
import type { TaskProxy } from './task-run';

/** Largest request body forwarded (task definitions are the biggest bodies a task sends). */
const MAX_BODY_BYTES = 10 * 1024 * 1024;
/** Request headers passed on; everything else (cookies, auth attempts) is dropped. */
const FORWARD_HEADERS = ['content-type', 'accept', 'x-taskcluster-skip-cdn'];
/** Response headers passed back. */
const RETURN_HEADERS = ['content-type', 'location', 'x-taskcluster-artifact-storage-type', 'cache-control', 'etag', 'last-modified'];

/** The `ext` Hawk attribute: certificate of temporary credentials plus the scope restriction. */
export function hawkExt(credentials: Credentials, authorizedScopes: string[]): string {
  const ext: Record<string, unknown> = { authorizedScopes };
  if (credentials.certificate) {
    ext.certificate = typeof credentials.certificate === 'string' ? JSON.parse(credentials.certificate) : credentials.certificate;
  }
  return Buffer.from(JSON.stringify(ext)).toString('base64');
}

/** Maps a proxy path to the target URL: `/api/...` as is, legacy `/<service>/v1/...` under `/api`. */
export function targetUrl(rootUrl: string, pathAndQuery: string): string | undefined {
  if (!pathAndQuery.startsWith('/') || pathAndQuery.startsWith('//')) return undefined;
  if (pathAndQuery.startsWith('/api/')) return rootUrl + pathAndQuery;
  if (/^\/[a-z-]+\/v\d+\//.test(pathAndQuery)) return rootUrl + '/api' + pathAndQuery;
  return undefined;
}

export async function startTaskProxy(opts: { rootUrl: string; credentials: () => Credentials; scopes: string[] }): Promise<TaskProxy> {
  const server = http.createServer((req, res) => {
    void handle(req, res).catch((err) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ code: 'ProxyError', message: `taskcluster proxy: ${(err as Error).message}` }));
    });
  });

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = targetUrl(opts.rootUrl, req.url ?? '');
    if (!url) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ code: 'ResourceNotFound', message: 'taskcluster proxy: use $TASKCLUSTER_PROXY_URL/api/<service>/<version>/<path>' }));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of req) {
      size += (c as Buffer).length;
      if (size > MAX_BODY_BYTES) throw new Error(`request body larger than ${MAX_BODY_BYTES} bytes`);
      chunks.push(c as Buffer);
    }
    const method = (req.method ?? 'GET').toUpperCase();
    const creds = opts.credentials();
    const { header } = hawk.client.header(url, method, {
      credentials: { id: creds.clientId, key: creds.accessToken, algorithm: 'sha256' },
      ext: hawkExt(creds, opts.scopes),
    });
    const headers: Record<string, string> = { authorization: header };
    for (const h of FORWARD_HEADERS) {
      const v = req.headers[h];
      if (typeof v === 'string') headers[h] = v;
    }
    const r = await fetch(url, {
      method,
      headers,
      body: method === 'GET' || method === 'HEAD' || size === 0 ? undefined : Buffer.concat(chunks),
      redirect: 'manual',
    });
    const out: Record<string, string> = {};
    for (const h of RETURN_HEADERS) {
      const v = r.headers.get(h);
      if (v !== null) out[h] = v;
    }
    const body = Buffer.from(await r.arrayBuffer());
    out['content-length'] = String(body.length);
    res.writeHead(r.status, out);
    res.end(body);
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
