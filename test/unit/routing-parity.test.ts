/**
 * Azure and the local host must route every request alike. The same list of requests goes
 * (a) through the Azure Functions registrations exactly as functions/http.ts makes them (captured
 * with a stand-in for `@azure/functions-core`), selected by a model of the Functions host's
 * ASP.NET Core route-template matching, then through the chosen handler's own path match; and
 * (b) through the local host's matcher. Both must pick the same route with the same params.
 *
 * Azure behaviour assumed by the model (ASP.NET Core routing, as the Functions host uses it):
 * - the `api` route prefix and literal segments match case-insensitively;
 * - the path is split at literal `/` only: Kestrel leaves `%2F` encoded, so `prov%2Fwt` is one
 *   segment (other escapes are decoded before literals are compared);
 * - `{name}` matches one non-empty segment, `{*name}` the rest of the path, possibly empty;
 * - one trailing `/` is ignored;
 * - the HTTP method is a constraint: a registration whose methods lack it does not match;
 * - among matching templates the lowest inbound precedence wins, a digit per segment (literal 1,
 *   parameter 3, catch-all 5) compared left to right, a shorter template before a longer one;
 *   equal precedence would be an ambiguous match (an error on the host), which the test rejects.
 * The handler then matches its parameters on the raw path (`X-Waws-Unencoded-Url`), so a request
 * Azure routes to a function whose pattern it does not fit is a 404, as it is locally.
 * OPTIONS (CORS preflight) is answered by the platform's CORS settings, not by a route: not modelled.
 */
import { routes } from '../../shared/api/route-table';
import { basePath, compile, findRoute, matchPath } from '../../shared/api/router';
import type { RouteDef } from '../../shared/api/types';

interface Registration {
  name: string;
  route: string;
  methods: string[];
}

const registered: Registration[] = [];
jest.mock(
  '@azure/functions-core',
  () => ({
    registerFunction(metadata: { name: string; bindings: Record<string, { type: string; route?: string; methods?: string[] }> }) {
      const trigger = Object.values(metadata.bindings).find((b) => b.type === 'httpTrigger');
      if (trigger) registered.push({ name: metadata.name, route: trigger.route!, methods: trigger.methods! });
      return { dispose() {} };
    },
    setProgrammingModel() {},
    getProgrammingModel() {},
    registerHook: () => ({ dispose() {} }),
    log() {},
  }),
  { virtual: true },
);

beforeAll(() => {
  jest.isolateModules(() => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    require('../../functions/http');
  });
});

/** The route a registered Function serves (its name is `<service>_<name>`, `_split` for a second form). */
function defOf(fnName: string): RouteDef {
  const def = routes.find((r) => fnName === `${r.service}_${r.name}` || fnName === `${r.service}_${r.name}_split`);
  if (!def) throw new Error(`registered function ${fnName} is not in the route table`);
  return def;
}

type Segment = { kind: 'literal'; text: string } | { kind: 'param' } | { kind: 'catchall' };

function parseTemplate(template: string): Segment[] {
  return template.split('/').map((seg) => {
    const m = /^\{(\*?)([A-Za-z0-9_]+)\}$/.exec(seg);
    if (m) return { kind: m[1] ? 'catchall' : 'param' };
    if (/[{}]/.test(seg)) throw new Error(`multi-part segment ${seg} is not modelled`);
    return { kind: 'literal', text: seg };
  });
}

const PRECEDENCE_DIGIT = { literal: 1, param: 3, catchall: 5 } as const;

/** Path segments as ASP.NET Core sees them: prefix removed, `%2F` kept, other escapes decoded. */
function pathSegments(rawPath: string): string[] | undefined {
  const m = /^\/api(\/.*)?$/i.exec(rawPath);
  if (!m) return undefined;
  const rest = (m[1] ?? '').replace(/^\//, '').replace(/\/$/, '');
  return rest === '' ? [] : rest.split('/').map((s) => decodeURIComponent(s.replace(/%2F/gi, '%252F')));
}

function templateMatches(segments: Segment[], path: string[]): boolean {
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i];
    if (s.kind === 'catchall') return true;
    if (i >= path.length) return false;
    if (s.kind === 'literal' && s.text.toLowerCase() !== path[i].toLowerCase()) return false;
    if (s.kind === 'param' && path[i] === '') return false;
  }
  return segments.length === path.length;
}

function comparePrecedence(a: Segment[], b: Segment[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const da = a[i] ? PRECEDENCE_DIGIT[a[i].kind] : 0;
    const db = b[i] ? PRECEDENCE_DIGIT[b[i].kind] : 0;
    if (da !== db) return da - db;
  }
  return 0;
}

type Outcome = { route: string; params: Record<string, string> } | 'not found';

function viaAzure(method: string, rawPath: string): Outcome {
  const path = pathSegments(rawPath);
  if (!path) return 'not found';
  const candidates = registered
    .filter((r) => r.methods.includes(method))
    .map((r) => ({ r, segments: parseTemplate(r.route) }))
    .filter((c) => templateMatches(c.segments, path))
    .sort((x, y) => comparePrecedence(x.segments, y.segments));
  if (!candidates.length) return 'not found';
  if (candidates.length > 1 && comparePrecedence(candidates[0].segments, candidates[1].segments) === 0) {
    throw new Error(`ambiguous on Azure: ${method} ${rawPath} matches ${candidates[0].r.name} and ${candidates[1].r.name}`);
  }
  const def = defOf(candidates[0].r.name);
  const params = matchPath(compile(def), rawPath);
  return params ? { route: `${def.service}_${def.name}`, params } : 'not found';
}

const local = routes.map((def) => ({ c: compile(def) }));

function viaLocalHost(method: string, rawPath: string): Outcome {
  const hit = findRoute(local, method, rawPath);
  if (!hit) return 'not found';
  const params = matchPath(hit.c, rawPath);
  return params ? { route: `${hit.c.def.service}_${hit.c.def.name}`, params } : 'not found';
}

const TASK = 'fN1SbArXTPSVFNUvaOlinQ';
const SAMPLE: Record<string, string> = {
  taskId: TASK,
  taskGroupId: TASK,
  runId: '0',
  taskQueueId: 'prov%2Fwt',
  provisionerId: 'prov',
  workerType: 'wt',
  workerGroup: 'wg',
  workerId: 'w1',
  name: 'public%2Flogs%2Flive.log',
  clientId: 'static%2Froot',
  roleId: 'repo%3Agithub.com%2F*',
};

/** One request per route (and HEAD beside every GET), with parameters as taskcluster-client encodes them. */
const perRoute = routes.flatMap((def) => {
  const filled = basePath(def.service) + def.route.replace(/<([a-zA-Z0-9_]+)\*?>/g, (_m, name: string) => SAMPLE[name] ?? name);
  const methods = def.method === 'GET' ? ['GET', 'HEAD'] : [def.method];
  return methods.map((method) => ({ method, path: filled, want: `${def.service}_${def.name}` }));
});

const Q = '/api/queue/v1';
/** Edge cases: literal `/` in wildcards, suffix-like task queue names, case, trailing slashes, misses. */
const edges: [string, string][] = [
  ['GET', `${Q}/ping/`],
  ['GET', '/API/Queue/V1/Ping'],
  ['GET', `${Q}/task-queues/prov/wt`],
  ['GET', `${Q}/task-queues/prov/wt/counts`],
  ['GET', `${Q}/task-queues/prov%2Fwt/counts/`],
  ['HEAD', `${Q}/task-queues/prov/wt/pending`],
  ['GET', `${Q}/task-queues/prov/counts`],
  ['GET', `${Q}/task-queues/prov%2Fcounts`],
  ['GET', `${Q}/task-queues/a/b/c/counts`],
  ['GET', `${Q}/task-queues/prov/wt/tasks`],
  ['POST', `${Q}/claim-work/prov/wt`],
  ['POST', `${Q}/claim-work/prov%2Fwt`],
  ['GET', `${Q}/pending/prov/wt`],
  ['GET', `${Q}/task/${TASK}/runs/0/artifacts/public/logs/live.log`],
  ['HEAD', `${Q}/task/${TASK}/artifacts/public/logs/live.log`],
  ['PUT', `${Q}/task/${TASK}/runs/0/artifacts/public%2Fbuild%2Fa.zip`],
  ['GET', `${Q}/task/${TASK}/runs/0/artifacts`],
  ['GET', `${Q}/task/${TASK}/runs/0/artifacts/`],
  ['GET', `${Q}/task/${TASK}/artifacts/`],
  ['GET', `${Q}/task/${TASK}/artifact-content/a%20b.txt`],
  ['GET', '/api/auth/v1/clients/'],
  ['GET', '/api/auth/v1/clients/a/b'],
  ['DELETE', '/api/auth/v1/roles/repo%3Agithub.com%2Fmozilla%2F*'],
  ['PUT', `${Q}/provisioners/prov/worker-types/wt/workers/w1`],
  ['PUT', `${Q}/provisioners/prov/worker-types/wt/workers/wg/w1`],
  ['GET', `${Q}/provisioners/prov/worker-types/wt/workers/wg/w1/counts`],
  ['GET', `${Q}/nope`],
  ['PATCH', `${Q}/task/${TASK}`],
  ['DELETE', `${Q}/ping`],
  ['HEAD', `${Q}/task/${TASK}/runs/0/completed`],
  ['GET', '/api/queue/v2/ping'],
  ['GET', '/elsewhere'],
];

test('functions/http.ts registers every route of the table', () => {
  expect(new Set(registered.map((r) => defOf(r.name)))).toEqual(new Set(routes));
});

test.each(perRoute)('$method $path reaches $want on Azure and locally', ({ method, path, want }) => {
  const azure = viaAzure(method, path);
  expect(viaLocalHost(method, path)).toEqual(azure);
  expect(azure === 'not found' ? azure : azure.route).toBe(want);
});

test.each(edges)('%s %s is routed alike on Azure and locally', (method, path) => {
  expect(viaLocalHost(method, path)).toEqual(viaAzure(method, path));
});

test('the model itself: literal beats parameter beats catch-all, and %2F stays inside a segment', () => {
  expect(viaAzure('GET', `${Q}/task-queues/prov%2Fwt/counts`)).toEqual({ route: 'queue_taskQueueCounts', params: { taskQueueId: 'prov/wt' } });
  expect(viaAzure('GET', `${Q}/task-queues/prov%2Fwt`)).toEqual({ route: 'queue_getTaskQueue', params: { taskQueueId: 'prov/wt' } });
  expect(viaAzure('GET', `${Q}/task/${TASK}/artifacts`)).toEqual({ route: 'queue_listLatestArtifacts', params: { taskId: TASK } });
  expect(viaAzure('HEAD', `${Q}/task/${TASK}`)).toEqual({ route: 'queue_task', params: { taskId: TASK } });
  expect(viaAzure('GET', '/api/auth/v1/clients/a/b')).toBe('not found');
});
