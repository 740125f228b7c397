/**
 * A local stand-in for the Functions host: serves the route table under /api with node:http,
 * building real `HttpRequest` / `InvocationContext` objects and calling the same handlers, and runs
 * timer functions on their schedules.
 */
import http from 'node:http';
import crypto from 'node:crypto';
import { HttpRequest, InvocationContext, HttpResponseInit, Timer } from '@azure/functions';
import { compile, CompiledRoute, findRoute } from '../api/router';
import { errorResponse, makeHandler } from '../api/http';
import type { App } from '../app';
import { ApiError } from '../errors';

export interface TimerDef {
  name: string;
  /** NCRONTAB schedule (six fields); `%SETTING%` is resolved from the environment as Azure does. */
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

/** Interval between timer runs for a six-field NCRONTAB schedule (second- or minute-steps only). */
export function intervalMs(schedule: string, env: NodeJS.ProcessEnv = process.env): number {
  const resolved = schedule.replace(/^%(.+)%$/, (_m, k: string) => env[k] ?? '');
  const f = resolved.trim().split(/\s+/);
  if (f.length === 6) {
    const step = (x: string) => (x === '*' ? 1 : /^\*\/(\d+)$/.test(x) ? Number(x.slice(2)) : undefined);
    const s = step(f[0]);
    if (s && f.slice(1).every((x) => x === '*')) return s * 1000;
    const m = step(f[1]);
    if (f[0] === '0' && m && f.slice(2).every((x) => x === '*')) return m * 60_000;
  }
  return 60_000;
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

async function readBody(req: http.IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
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
}): Promise<LocalHost> {
  const quiet = opts.quiet ?? false;
  const compiled: { c: CompiledRoute; handler: ReturnType<typeof makeHandler> }[] = opts.app.routes.map((r) => ({
    c: compile(r),
    handler: makeHandler(r, opts.app.services),
  }));
  const timers = new Map<string, TimerDef>(opts.app.timers.map((t) => [t.name, t]));
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
      const adminTimer = /^\/admin\/functions\/([A-Za-z0-9_-]+)$/.exec(path);
      if (adminTimer && method === 'POST' && timers.has(adminTimer[1])) {
        await runTimer(adminTimer[1]);
        res.writeHead(202).end();
        return;
      }
      const hit = findRoute(compiled, method, path);
      if (!hit) {
        await send(res, errorResponse(new ApiError('ResourceNotFound', `no route ${method} ${path}`), { method: 'unknown', params: {}, payload: {} }));
        return;
      }
      const body = method === 'GET' || method === 'HEAD' ? undefined : await readBody(req);
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
      const url = `http://${req.headers.host ?? 'localhost'}${rawUrl}`;
      const request = new HttpRequest({ method, url, headers, body: body && body.length ? { bytes: body } : undefined });
      const result = await hit.handler(request, context(`${hit.c.def.service}_${hit.c.def.name}`, quiet));
      await send(res, result);
    } catch (err) {
      console.error('local host error:', err);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    }
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;

  const intervals: NodeJS.Timeout[] = [];
  if (opts.runTimers) {
    for (const t of timers.values()) {
      intervals.push(setInterval(() => void runTimer(t.name), intervalMs(t.schedule)));
    }
  }

  return {
    url: `http://localhost:${port}`,
    port,
    runTimer: (name) => runTimer(name),
    close: async () => {
      intervals.forEach(clearInterval);
      await Promise.all(running.values());
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
