/**
 * Malformed requests to every route: bad parameters, query strings (continuation tokens and limits
 * of every wrong shape), bodies (wrong types, deep nesting, non-JSON) and headers. Requests are
 * signed with the root credentials so they get past authentication into the handlers. Nothing may
 * answer 5xx, and the service must still work afterwards.
 *
 * A second pass sends every route with a body (Queue, Auth, Index, Hooks, Object, subscriptions,
 * scheduling, operator routes) bodies shaped from that route's own input schema, with one value
 * replaced by something hostile (a leap second, 100,000 characters, non-ASCII, 1,000 keys, deep
 * nesting, a wrong type), and known-good path parameters so the body reaches the handler.
 *
 * The seed is fixed so a failure reproduces; FUZZ_REQUESTS (default 400) and FUZZ_SEED run more.
 */
import http from 'node:http';
import Hawk from 'hawk';
import { startTestService, TestService, taskDef } from '../helpers/service';
import { uniqueQueue, claimOne } from '../helpers/work';
import { routes } from '../../shared/api/route-table';
import { basePath } from '../../shared/api/router';
import { schemaById } from '../../shared/api/schemas';
import type { RouteDef } from '../../shared/api/types';
// The faithful storage mode's generator: the same seed, the same requests.
import { seeded } from '../../shared/storage/faults';

const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 400);
const SEED = Number(process.env.FUZZ_SEED ?? 20261123);

const b64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');

interface Known {
  taskId: string;
  taskGroupId: string;
  taskQueueId: string;
}

function makeGen(seed: number, known: Known) {
  const rnd = seeded(seed);
  const pick = <T>(xs: T[]): T => xs[Math.floor(rnd() * xs.length)];
  const nasty = [
    '',
    ' ',
    '..',
    '%2F',
    '%2e%2e',
    '%00',
    '%ZZ',
    '%',
    'a'.repeat(3000),
    '\u00e9\u4e2d',
    '%F0%9F%92%A9',
    '<script>',
    '-1',
    '1e400',
    '99999999999999999999',
    '0x10',
    'null',
    '{}',
    '[]',
    'true',
    'AAAAAAAAAAAAAAAAAAAAAA',
  ];
  const valid: Record<string, () => string> = {
    taskId: () => known.taskId,
    taskGroupId: () => known.taskGroupId,
    taskQueueId: () => known.taskQueueId,
    provisionerId: () => known.taskQueueId.split('/')[0],
    workerType: () => known.taskQueueId.split('/')[1],
    workerGroup: () => 'wg',
    workerId: () => 'w1',
    runId: () => '0',
    name: () => 'public/logs/live.log',
    clientId: () => 'static/root',
    roleId: () => 'anonymous',
  };
  const param = (name: string, wildcard: boolean): string => {
    const r = rnd();
    if (r < 0.35 && valid[name]) return wildcard ? valid[name]() : encodeURIComponent(valid[name]());
    if (r < 0.45) return String(Math.floor(rnd() * 1e6));
    if (r < 0.55) return encodeURIComponent(String.fromCharCode(...Array.from({ length: 1 + Math.floor(rnd() * 40) }, () => 32 + Math.floor(rnd() * 95))));
    return wildcard && rnd() < 0.3 ? `${pick(nasty)}/${pick(nasty)}` : pick(nasty);
  };
  // Continuation tokens: JSON of every wrong shape, Azure-looking tokens, and plain garbage.
  const token = (): string =>
    pick([
      () => b64(Math.floor(rnd() * 1e9)),
      () => b64(-5),
      () => b64(1.5),
      () => b64('x'),
      () => b64(''),
      () => b64(null),
      () => b64([1, 'a', {}]),
      () => b64({}),
      () => b64({ c: 5 }),
      () => b64({ c: 'not-a-token' }),
      () => b64({ c: b64({ nextPartitionKey: 5 }) }),
      () => b64({ nextPartitionKey: 'a', nextRowKey: 'b' }),
      () => b64({ pk: 'x', rk: ['y'] }),
      () => b64({ a: { b: { c: {} } } }),
      () => b64('a'.repeat(2000)),
      () => 'not base64 !!!',
      () => '%%%',
      () => pick(nasty),
      () => Buffer.from(Array.from({ length: 30 }, () => Math.floor(rnd() * 256))).toString('base64url'),
    ])();
  const queryValue = (key: string): string => {
    if (key === 'continuationToken') return token();
    if (key === 'limit') return pick(['-1', 'abc', '1e309', '99999999999', '0', '1', '1.5', '', ' 5', '0x10']);
    if (key === 'since' || key === 'until') return pick(['yesterday', '2020-13-45T00:00:00Z', '', '1', new Date().toJSON()]);
    return rnd() < 0.5 ? pick(nasty) : String(rnd());
  };
  const deep = (depth: number, open: string, close: string) => open.repeat(depth) + close.repeat(depth);
  const jsonish = (depth = 0): unknown => {
    const r = rnd();
    if (depth > 3 || r < 0.3) return pick<unknown>([null, true, 0, -1, 1e308, 'x', '', 'a'.repeat(500), [], {}]);
    if (r < 0.6) return Array.from({ length: Math.floor(rnd() * 4) }, () => jsonish(depth + 1));
    const o: Record<string, unknown> = {};
    for (let i = 0; i < 1 + Math.floor(rnd() * 4); i++)
      o[pick(['taskIds', 'scopes', 'payload', 'expires', 'storageType', 'x', 'workerGroup', 'tasks', 'url', 'contentType'])] = jsonish(depth + 1);
    return o;
  };
  const body = (): string | undefined =>
    pick<() => string | undefined>([
      () => undefined,
      () => '',
      () => 'not json',
      () => '{"a":',
      () => '5',
      () => '"str"',
      () => 'null',
      () => deep(20000, '[', ']'),
      () => deep(20000, '{"a":', '}'),
      () => `{"taskIds": ${deep(5000, '[', ']')}}`,
      () => JSON.stringify(jsonish()),
      () => JSON.stringify(jsonish()),
      () => JSON.stringify({ ...taskDef(known.taskQueueId), ...(jsonish() as object) }),
      () => JSON.stringify({ taskIds: Array.from({ length: 3 }, () => pick(nasty)) }),
    ])();
  return { rnd, pick, param, queryValue, body };
}

/** Values that break storage or parsing if they get past validation. */
const HOSTILE: unknown[] = [
  '2026-12-31T23:59:60Z',
  '2026-02-30T00:00:00Z',
  '+275760-09-13T00:00:00.001Z',
  'a'.repeat(100_000),
  'caf\u00e9 \u4e2d\u6587 \ud83d\udca9',
  'line\r\nbreak',
  '\u0000',
  -1,
  1e308,
  2 ** 53 + 1,
  1.5,
  null,
  true,
  {},
  [],
  Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`k${i}`, 'v'])),
  Array.from({ length: 1000 }, () => 'x'),
  JSON.parse('['.repeat(200) + ']'.repeat(200)),
];

/** A plausible value for `schema` (no $ref), so that one hostile value placed in it reaches the handler. */
function sample(schema: any, rnd: () => number, depth = 0): unknown {
  if (!schema || typeof schema !== 'object' || depth > 6) return 'x';
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum)) return schema.enum[Math.floor(rnd() * schema.enum.length)];
  const alt = schema.oneOf ?? schema.anyOf;
  if (Array.isArray(alt) && alt.length)
    return sample({ ...schema, oneOf: undefined, anyOf: undefined, ...alt[Math.floor(rnd() * alt.length)] }, rnd, depth + 1);
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  if (type === 'object' || (!type && schema.properties)) {
    const out: Record<string, unknown> = {};
    const required = new Set<string>(schema.required ?? []);
    for (const [k, v] of Object.entries<any>(schema.properties ?? {})) if (required.has(k) || rnd() < 0.5) out[k] = sample(v, rnd, depth + 1);
    return out;
  }
  if (type === 'array') return Array.from({ length: Math.max(schema.minItems ?? 0, Math.floor(rnd() * 3)) }, () => sample(schema.items, rnd, depth + 1));
  if (type === 'integer' || type === 'number') return schema.minimum ?? 0;
  if (type === 'boolean') return rnd() < 0.5;
  if (schema.format === 'date-time') return new Date(Date.now() + 3600_000).toJSON();
  if (schema.format === 'uri') return 'https://example.com/x';
  if (schema.pattern && /slugid|\[A-Za-z0-9_-\]\{8\}/i.test(schema.pattern)) return 'AAAAAAAAQQAAAAAAAAAAAA';
  return 'x'.repeat(Math.max(1, schema.minLength ?? 1));
}

/** `value` with one of its leaves (or itself) replaced by `hostile`. */
function plant(value: unknown, hostile: unknown, rnd: () => number): unknown {
  if (value && typeof value === 'object' && rnd() < 0.75) {
    const keys = Object.keys(value);
    if (keys.length) {
      const k = keys[Math.floor(rnd() * keys.length)];
      const copy: any = Array.isArray(value) ? [...value] : { ...value };
      copy[k] = plant(copy[k], hostile, rnd);
      return copy;
    }
  }
  return hostile;
}

interface Sent {
  route: string;
  method: string;
  path: string;
  status: number;
  body: string;
}

function send(port: number, method: string, path: string, headers: Record<string, string>, body?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    // The app's origin (on the in-memory store, 127.0.0.1 is its storage's: shared/storage/memory.ts storageOriginFor).
    const req = http.request({ host: '127.0.0.1', port, method, path, headers: { host: `localhost:${port}`, ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8').slice(0, 500) }));
    });
    req.on('error', reject);
    req.setTimeout(30_000, () => req.destroy(new Error(`timeout: ${method} ${path}`)));
    if (body !== undefined) req.write(body);
    req.end();
  });
}

describe('fuzz: malformed requests to every route', () => {
  let svc: TestService;
  let known: Known;

  beforeAll(async () => {
    svc = await startTestService();
    const taskQueueId = uniqueQueue();
    const taskId = svc.tc.slugid();
    await svc.queue().createTask(taskId, taskDef(taskQueueId));
    known = { taskId, taskGroupId: taskId, taskQueueId };
  });
  afterAll(() => svc?.close());

  it(`sends ${REQUESTS} generated requests (seed ${SEED}) and none answers 5xx`, async () => {
    const gen = makeGen(SEED, known);
    const root = svc.root;
    const failures: Sent[] = [];
    const fill = (r: RouteDef) =>
      r.route.replace(/<([a-zA-Z0-9_]+)(\*?)>/g, (_m, name: string, star: string) => {
        const v = gen.param(name, !!star);
        return v;
      });
    for (let i = 0; i < REQUESTS; i++) {
      const r = routes[i % routes.length];
      // Raw paths must be ASCII on the wire: spaces and non-ASCII characters go percent-encoded.
      let path = (basePath(r.service) + fill(r)).replace(/[^\x21-\x7e]/g, (c) => encodeURIComponent(c));
      const q: string[] = [];
      for (const k of [...(r.query ?? []), ...(gen.rnd() < 0.1 ? ['bogus'] : [])]) if (gen.rnd() < 0.7) q.push(`${k}=${encodeURIComponent(gen.queryValue(k))}`);
      if (q.length) path += `?${q.join('&')}`;
      const body = r.method === 'GET' ? undefined : gen.body();
      const headers: Record<string, string> = {};
      if (body !== undefined) headers['content-type'] = gen.pick(['application/json', 'text/plain', 'application/json; charset=utf-8']);
      const a = gen.rnd();
      if (a < 0.75) {
        headers.authorization = Hawk.client.header(`${svc.rootUrl}${path}`, r.method, {
          credentials: { id: root.clientId, key: root.accessToken, algorithm: 'sha256' },
        }).header;
      } else if (a < 0.85) {
        headers.authorization = gen.pick(['Hawk', 'Hawk id="x"', 'Bearer abc', 'Hawk id="static/root", ts="1", nonce="x", mac="AAAA"', 'x'.repeat(5000)]);
      }
      if (gen.rnd() < 0.05) headers.host = gen.pick(['', 'a b', '[::1', 'exa mple.com:99999', '%%']);
      let res: { status: number; body: string };
      try {
        res = await send(svc.host.port, r.method, path, headers, body);
      } catch (err) {
        failures.push({
          route: r.name,
          method: r.method,
          path: path.slice(0, 200),
          status: -1,
          body: `${err} (headers ${JSON.stringify(headers).slice(0, 300)}, body ${body?.length ?? 0} bytes)`,
        });
        continue;
      }
      if (res.status >= 500 && r.name !== 'heartbeat')
        failures.push({ route: r.name, method: r.method, path: path.slice(0, 200), status: res.status, body: res.body });
    }
    expect(failures).toEqual([]);
  }, 300_000);

  it("bodies shaped from each route's input schema, one value hostile, get no 5xx on any service", async () => {
    const rnd = seeded(SEED + 1);
    const good: Record<string, string> = {
      taskId: known.taskId,
      taskGroupId: known.taskGroupId,
      taskQueueId: known.taskQueueId,
      provisionerId: known.taskQueueId.split('/')[0],
      workerType: known.taskQueueId.split('/')[1],
      workerGroup: 'wg',
      workerId: 'w1',
      runId: '0',
      name: 'tests/fuzz/object',
      clientId: 'fuzz/client',
      roleId: 'fuzz-role',
      hookGroupId: 'fuzz',
      hookId: 'hook',
      namespace: 'fuzz.ns',
      indexPath: 'fuzz.ns.task',
      subscriptionId: 'fuzz-sub',
      schedulerId: 'fuzz',
      projectId: 'fuzz',
      concurrencyKey: 'fuzz-key',
    };
    const failures: Sent[] = [];
    const withBody = routes.filter((r) => r.input && r.method !== 'GET');
    expect(withBody.map((r) => r.service).sort()).toEqual(expect.arrayContaining(['auth', 'hooks', 'index', 'object', 'queue']));
    const PER_ROUTE = 4;
    for (const r of withBody) {
      const schema = schemaById(r.input!);
      for (let i = 0; i < PER_ROUTE; i++) {
        const path =
          basePath(r.service) +
          r.route.replace(/<([a-zA-Z0-9_]+)(\*?)>/g, (_m, n: string, star: string) => (star ? good[n] : encodeURIComponent(good[n] ?? 'x')));
        const body = JSON.stringify(plant(sample(schema, rnd), HOSTILE[Math.floor(rnd() * HOSTILE.length)], rnd));
        const headers = {
          'content-type': 'application/json',
          authorization: Hawk.client.header(`${svc.rootUrl}${path}`, r.method, {
            credentials: { id: svc.root.clientId, key: svc.root.accessToken, algorithm: 'sha256' },
          }).header,
        };
        const res = await send(svc.host.port, r.method, path, headers, body).catch((err) => ({ status: -1, body: String(err) }));
        if (res.status >= 500 || res.status < 0)
          failures.push({ route: `${r.service}.${r.name}`, method: r.method, path, status: res.status, body: `${res.body} <- ${body.slice(0, 300)}` });
      }
    }
    expect(failures).toEqual([]);
  }, 300_000);

  it('the service still works afterwards: ping, a whole lifecycle, and the heartbeat', async () => {
    const q = svc.queue();
    expect((await q.ping()).alive).toBe(true);
    const taskQueueId = uniqueQueue();
    const taskId = svc.tc.slugid();
    await q.createTask(taskId, taskDef(taskQueueId));
    const c = await claimOne(svc, taskQueueId, taskId);
    await q.reportCompleted(taskId, c.runId);
    expect((await q.status(taskId)).status.state).toBe('completed');
    const hb = await send(svc.host.port, 'GET', '/api/queue/v1/__heartbeat__', {});
    expect(hb.status).toBe(200);
  });
});
