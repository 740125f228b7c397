/**
 * A local stand-in for the Functions host: serves the route table under /api with node:http,
 * building real `HttpRequest` / `InvocationContext` objects and calling the same handlers, and runs
 * timer functions on their schedules. With in-memory storage it also serves the stores' blob and
 * queue endpoints under /memory-storage, so the SAS URLs the app hands out work over plain HTTP.
 */
import http from 'node:http';
import crypto from 'node:crypto';
import { HttpRequest, InvocationContext, HttpResponseInit, Timer } from '@azure/functions';
import { compile, CompiledRoute, findRoute } from '../api/router';
import { errorResponse, makeHandler } from '../api/http';
import type { App } from '../app';
import { ApiError } from '../errors';
import { parseSchedule, resolveSchedule, runOnSchedule } from '../cron';
import { memoryStoresOf } from '../storage/storage';
import { MEMORY_STORAGE_PATH } from '../storage/memory';
import { MAX_BODY_BYTES } from '../api/body';

/** The error context of a request that matched no route. */
const NO_ROUTE = { method: 'unknown', params: {}, payload: {} };

/** An error answer to a request whose body was not read (whole): the connection closes after it. */
function refuseError(req: http.IncomingMessage, res: http.ServerResponse, err: ApiError): void {
  const r = errorResponse(err, NO_ROUTE);
  refuseUnread(req, res, r.status ?? 500, r.headers as Record<string, string>, Buffer.from(String(r.body)));
}

/** Azure's answer to a body over the operation's limit. */
const storageTooLarge = () => ({
  status: 413,
  body: '<?xml version="1.0" encoding="utf-8"?><Error><Code>RequestBodyTooLarge</Code></Error>',
  headers: { 'content-type': 'application/xml', 'x-ms-error-code': 'RequestBodyTooLarge' },
});

/** How long a refused request's unread body is still taken (and dropped) before its connection is cut. */
const UNREAD_LINGER_MS = 5_000;

/** Where `/` sends a browser. */
export const DASHBOARD_PATH = '/api/dashboard';

export interface TimerDef {
  name: string;
  /** NCRONTAB schedule (see shared/cron.ts); `%SETTING%` is resolved from the app settings as Azure does. */
  schedule: string;
  handler: (timer: Timer, context: InvocationContext) => Promise<void>;
}

export interface LocalHost {
  url: string;
  port: number;
  close(): Promise<void>;
  /** Runs a timer function now (as POST /admin/functions/<name> does on the real host). */
  runTimer(name: string): Promise<void>;
}

function context(functionName: string, quiet: boolean): InvocationContext {
  return new InvocationContext({
    invocationId: crypto.randomUUID(),
    functionName,
    logHandler: (level, ...args) => {
      if (quiet && (level === 'information' || level === 'debug' || level === 'trace')) return;
      console.error(`[${functionName}] ${level}:`, ...args);
    },
  });
}

/** The request's URL as the Functions host would build it, or undefined if the Host header is not a valid host. */
function requestUrl(host: string | undefined, rawUrl: string): string | undefined {
  const url = `http://${host ?? 'localhost'}${rawUrl}`;
  try {
    new URL(url);
    return url;
  } catch {
    return undefined;
  }
}

/**
 * The request's body, read only up to `limit` bytes: undefined as soon as it is longer (declared or
 * streamed), with the rest left unread, so no body costs more memory than its limit.
 */
function readBody(req: http.IncomingMessage, limit: number): Promise<Buffer | undefined> {
  if (Number(req.headers['content-length'] ?? 0) > limit) return Promise.resolve(undefined);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = (v: Buffer | undefined) => {
      req.off('data', onData).off('end', onEnd).off('error', reject);
      req.pause();
      resolve(v);
    };
    const onData = (c: Buffer) => {
      size += c.length;
      if (size > limit) stop(undefined);
      else chunks.push(c);
    };
    const onEnd = () => stop(Buffer.concat(chunks));
    req.on('data', onData).on('end', onEnd).on('error', reject);
  });
}

/**
 * Answers a request whose body was not read whole. The unread rest is discarded as it comes (never
 * kept), so that a client still sending reads the answer instead of failing its write on a closed
 * socket; a body still coming after UNREAD_LINGER_MS has its connection cut.
 */
function refuseUnread(req: http.IncomingMessage, res: http.ServerResponse, status: number, headers: Record<string, string>, body: Buffer): void {
  res.writeHead(status, { ...headers, 'content-length': String(body.length) });
  res.end(body);
  const cut = setTimeout(() => req.socket.destroy(), UNREAD_LINGER_MS).unref();
  req.once('end', () => clearTimeout(cut)).resume();
}

const headersOf = (req: http.IncomingMessage): Record<string, string> => {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
  return headers;
};

/** Whether `given` is `expected`, in constant time. */
function keyMatches(expected: string, given: string | undefined): boolean {
  const a = crypto.createHash('sha256').update(expected).digest();
  const b = crypto
    .createHash('sha256')
    .update(given ?? '')
    .digest();
  return given !== undefined && crypto.timingSafeEqual(a, b);
}

async function send(res: http.ServerResponse, r: HttpResponseInit): Promise<void> {
  const headers: Record<string, string> = {};
  if (r.headers) {
    for (const [k, v] of Object.entries(r.headers as Record<string, string>)) headers[k] = String(v);
  }
  let body: Buffer | undefined;
  if (r.jsonBody !== undefined) {
    body = Buffer.from(JSON.stringify(r.jsonBody));
    headers['content-type'] ??= 'application/json';
  } else if (typeof r.body === 'string') body = Buffer.from(r.body);
  else if (r.body instanceof Uint8Array) body = Buffer.from(r.body);
  if (body) headers['content-length'] = String(body.length);
  res.writeHead(r.status ?? 200, headers);
  res.end(body);
}

export async function startHost(opts: {
  /** The routes, services and timers to serve (createApp). */
  app: Pick<App, 'routes' | 'services' | 'timers'>;
  port?: number;
  host?: string;
  quiet?: boolean;
  /** Run timers on their schedule (tests usually trigger them by hand). */
  runTimers?: boolean;
  /** App settings that a `%SETTING%` schedule names (default: process.env). */
  settings?: Record<string, string | undefined>;
}): Promise<LocalHost> {
  const quiet = opts.quiet ?? false;
  const compiled: { c: CompiledRoute; handler: ReturnType<typeof makeHandler> }[] = opts.app.routes.map((r) => ({
    c: compile(r),
    handler: makeHandler(r, opts.app.services),
  }));
  const timers = new Map<string, TimerDef>(opts.app.timers.map((t) => [t.name, t]));
  // Schedules are checked before listening: a timer that cannot run stops start-up.
  const scheduled = [...timers.values()]
    .filter(() => opts.runTimers)
    .map((t) => {
      try {
        const schedule = resolveSchedule(t.schedule, opts.settings ?? process.env);
        parseSchedule(schedule);
        return [t.name, schedule] as const;
      } catch (err) {
        throw new Error(`timer ${t.name}: ${(err as Error).message}`, { cause: err });
      }
    });
  const running = new Map<string, Promise<void>>();

  const runTimer = async (name: string, isPastDue = false): Promise<void> => {
    const t = timers.get(name);
    if (!t) throw new Error(`no timer ${name}`);
    // Like the real host, one run at a time per timer on this host.
    const inflight = running.get(name);
    if (inflight) return inflight;
    const p = t
      .handler(
        { isPastDue, schedule: { adjustForDST: false }, scheduleStatus: { last: '', next: '', lastUpdated: '' } } as unknown as Timer,
        context(name, quiet),
      )
      .catch((err) => console.error(`[${name}] failed:`, err))
      .finally(() => running.delete(name));
    running.set(name, p);
    return p;
  };

  const server = http.createServer(async (req, res) => {
    try {
      const rawUrl = req.url ?? '/';
      const path = rawUrl.split('?')[0];
      const method = (req.method ?? 'GET').toUpperCase();
      if (method === 'OPTIONS') {
        res.writeHead(200, {
          'access-control-allow-origin': '*',
          'access-control-allow-methods': 'OPTIONS,GET,HEAD,POST,PUT,DELETE',
          'access-control-allow-headers': 'X-Requested-With,Content-Type,Authorization,Accept,Origin,Cache-Control',
          'access-control-max-age': '600',
        });
        res.end();
        return;
      }
      const svc = await opts.app.services();
      // With in-memory storage, its endpoints have an origin of their own (storageOriginFor): served
      // only there, and nothing else is served there. A request the store refuses anyway (its SAS,
      // its operation) is answered before its body is read; an accepted one reads at most what the
      // operation takes.
      const stores = memoryStoresOf(svc.storage);
      if (stores.length) {
        const onStorageOrigin = stores.some((s) => new URL(s.endpoint).host === req.headers.host);
        const store = onStorageOrigin && path.startsWith(`${MEMORY_STORAGE_PATH}/`) ? stores.find((s) => s.serves(path)) : undefined;
        if (store) {
          const headers = headersOf(req);
          const prepared = store.prepare(method, `http://localhost${rawUrl}`, headers);
          const body = 'run' in prepared ? await readBody(req, prepared.maxBody) : undefined;
          const r = 'answer' in prepared ? prepared.answer : body ? prepared.run(body) : storageTooLarge();
          const payload = r.status === 204 ? undefined : Buffer.from(r.body);
          if (!body) return refuseUnread(req, res, r.status, r.headers, payload ?? Buffer.alloc(0));
          res.writeHead(r.status, payload ? { ...r.headers, 'content-length': String(payload.length) } : r.headers);
          res.end(method === 'HEAD' ? undefined : payload);
          return;
        }
        if (onStorageOrigin && !path.startsWith(`${MEMORY_STORAGE_PATH}/`) && (method === 'GET' || method === 'HEAD')) {
          res.writeHead(302, { location: `${svc.config.publicUrl}${rawUrl}` }).end();
          return;
        }
        if (onStorageOrigin || path.startsWith(`${MEMORY_STORAGE_PATH}/`)) {
          return refuseError(
            req,
            res,
            new ApiError(
              'ResourceNotFound',
              onStorageOrigin
                ? `this origin serves the in-memory storage only; the API is at ${svc.config.publicUrl}`
                : `no storage endpoint ${path} on this origin`,
            ),
          );
        }
      }
      const body = await readBody(req, MAX_BODY_BYTES);
      if (!body) return refuseError(req, res, new ApiError('InputTooLarge', `request body is larger than ${MAX_BODY_BYTES} bytes`));
      // The Functions host runs a timer on this route for a caller with its master key; here the
      // root client's access token is that key.
      const adminTimer = /^\/admin\/functions\/([A-Za-z0-9_-]+)$/.exec(path);
      if (adminTimer && method === 'POST' && timers.has(adminTimer[1])) {
        if (!keyMatches(svc.config.rootAccessToken, req.headers['x-functions-key'] as string | undefined)) {
          res.writeHead(401, { 'content-type': 'text/plain' }).end('POST /admin/functions/<name> needs the x-functions-key header: the root access token\n');
          return;
        }
        await runTimer(adminTimer[1]);
        res.writeHead(202).end();
        return;
      }
      // The root is the operator dashboard (a Functions host serves only under /api).
      if (path === '/' && (method === 'GET' || method === 'HEAD')) {
        res.writeHead(302, { location: DASHBOARD_PATH }).end();
        return;
      }
      const hit = findRoute(compiled, method, path);
      if (!hit) {
        await send(res, errorResponse(new ApiError('ResourceNotFound', `no route ${method} ${path}`), NO_ROUTE));
        return;
      }
      const headers = headersOf(req);
      const url = requestUrl(req.headers.host, rawUrl);
      if (!url) {
        await send(
          res,
          errorResponse(new ApiError('InvalidRequestArguments', `invalid Host header '${req.headers.host}'`), {
            method: hit.c.def.name,
            params: {},
            payload: {},
          }),
        );
        return;
      }
      const request = new HttpRequest({ method, url, headers, body: body.length && method !== 'GET' && method !== 'HEAD' ? { bytes: body } : undefined });
      const ctx = context(`${hit.c.def.service}_${hit.c.def.name}`, quiet);
      // The caller hung up before the answer: a long poll stops waiting (ApiRequest.gone).
      const gone = new AbortController();
      res.once('close', () => {
        if (!res.writableFinished) gone.abort();
      });
      const result = await hit.handler(request, ctx, gone.signal);
      await send(res, result);
    } catch (err) {
      console.error('local host error:', err);
      if (res.headersSent) res.end();
      else await send(res, errorResponse(new ApiError('InternalServerError', 'Internal Server Error in the local host'), NO_ROUTE));
    }
  });
  server.keepAliveTimeout = 65_000;
  // A listen error (EADDRINUSE) rejects instead of crashing the process as an unhandled 'error'.
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as { port: number }).port;

  const jobs = scheduled.map(([name, schedule]) => runOnSchedule(schedule, () => void runTimer(name)));

  return {
    url: `http://localhost:${port}`,
    port,
    runTimer: (name) => runTimer(name),
    close: async () => {
      jobs.forEach((j) => j.stop());
      await Promise.all(running.values());
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
