/**
 * A stand-in for the Functions host, for a packaged app unzipped in a folder: run
 *   node --require ./fake-functions-core.js ./package-host.js
 * with that folder as the working directory. It loads the app as the Node worker does (package.json
 * `main` glob, ./load-time.js), then serves every registered HTTP function under host.json's route
 * prefix on 127.0.0.1 (a free port), choosing among matching routes as ASP.NET routing does (literal
 * segments before parameters before catch-alls), and runs a timer on POST /admin/functions/<name>.
 * QUEUE_PUBLIC_URL is set to the URL it listens on unless given; it prints `LISTENING <url>`.
 * PACKAGE_HOST_FUNCTIONS: path of an `@azure/functions` module to build requests with (the app's
 * own copy is inside its bundle).
 */
'use strict';
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { loadMain } = require('./load-time');

const { HttpRequest, InvocationContext } = require(process.env.PACKAGE_HOST_FUNCTIONS || '@azure/functions');
const core = require('@azure/functions-core');

const dir = process.cwd();
loadMain(dir);
const prefix = JSON.parse(fs.readFileSync(path.join(dir, 'host.json'), 'utf8')).extensions?.http?.routePrefix ?? 'api';

const httpFunctions = [];
const timers = new Map();
for (const meta of core.registered()) {
  const trigger = Object.values(meta.bindings).find((b) => b.direction === 'in' && /Trigger$/.test(b.type));
  const handler = core.handlers.get(meta.name);
  if (trigger.type === 'httpTrigger') {
    const segments = `${prefix}/${trigger.route}`.split('/').filter((s) => s !== '');
    httpFunctions.push({ name: meta.name, methods: trigger.methods.map((m) => m.toUpperCase()), segments, handler });
  } else if (trigger.type === 'timerTrigger') {
    timers.set(meta.name, handler);
  }
}

/** Rank of a route for a path, lower is more specific; undefined when it does not match. */
function rank(segments, parts) {
  const ranks = [];
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i];
    if (/^\{\*\w+\}$/.test(s)) return i < parts.length ? [...ranks, 2] : undefined;
    if (i >= parts.length) return undefined;
    if (/^\{\w+\}$/.test(s)) ranks.push(1);
    else if (s.toLowerCase() === parts[i].toLowerCase()) ranks.push(0);
    else return undefined;
  }
  return parts.length === segments.length ? ranks : undefined;
}

function findFunction(method, pathname) {
  const parts = pathname.split('/').filter((s) => s !== '');
  let best;
  for (const f of httpFunctions) {
    if (!f.methods.includes(method)) continue;
    const r = rank(f.segments, parts);
    if (!r) continue;
    const cmp = best ? r.findIndex((x, i) => x !== best.rank[i]) : 0;
    if (!best || (cmp >= 0 && r[cmp] < best.rank[cmp])) best = { f, rank: r };
  }
  return best?.f;
}

function context(functionName) {
  return new InvocationContext({
    invocationId: crypto.randomUUID(),
    functionName,
    logHandler: (level, ...args) => {
      if (level === 'error' || level === 'warning') console.error(`[${functionName}] ${level}:`, ...args);
    },
  });
}

async function readBody(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return Buffer.concat(chunks);
}

function send(res, r) {
  const headers = Object.fromEntries(new Headers(r.headers ?? {}));
  let body;
  if (r.jsonBody !== undefined) {
    body = Buffer.from(JSON.stringify(r.jsonBody));
    headers['content-type'] ??= 'application/json';
  } else if (typeof r.body === 'string') body = Buffer.from(r.body);
  else if (r.body instanceof Uint8Array) body = Buffer.from(r.body);
  if (body) headers['content-length'] = String(body.length);
  res.writeHead(r.status ?? 200, headers);
  res.end(body);
}

const server = http.createServer(async (req, res) => {
  try {
    const body = await readBody(req);
    const method = (req.method ?? 'GET').toUpperCase();
    const pathname = (req.url ?? '/').split('?')[0];
    const timer = /^\/admin\/functions\/([\w-]+)$/.exec(pathname);
    if (timer && method === 'POST' && timers.has(timer[1])) {
      await timers.get(timer[1])({ isPastDue: false, schedule: { adjustForDST: false } }, context(timer[1]));
      res.writeHead(202).end();
      return;
    }
    const f = findFunction(method, pathname);
    if (!f) {
      res.writeHead(404).end();
      return;
    }
    const headers = {};
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
    const url = `http://${req.headers.host}${req.url}`;
    const request = new HttpRequest({ method, url, headers, body: body.length ? { bytes: body } : undefined });
    send(res, await f.handler(request, context(f.name)));
  } catch (err) {
    console.error('package host error:', err);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  }
});

server.listen(0, '127.0.0.1', () => {
  const url = `http://127.0.0.1:${server.address().port}`;
  process.env.QUEUE_PUBLIC_URL ??= url; // read when the app first needs its settings
  process.stdout.write(`LISTENING ${url}\n`);
});

process.on('SIGTERM', async () => {
  server.close();
  for (const h of core.hooks.filter((x) => x.name === 'appTerminate')) await h.callback({ hookData: {} });
  process.exit(0);
});
