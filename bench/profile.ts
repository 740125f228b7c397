/**
 * A CPU profile of the bench process over one window (node:inspector, the same sampler as
 * `node --cpu-prof`), written as a .cpuprofile for Chrome DevTools, and summarized as the
 * functions and the code areas (a package, Node's internals, a project folder) with the most
 * self time. With the load in its own process (bench/load.ts) this profiles the service alone.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Session } from 'node:inspector';

/** Sampling interval, µs: fine enough for 15 s windows without slowing the service much. */
const SAMPLE_INTERVAL_US = 200;
/** Rows in each summary table. */
const TOP = 15;

type Frame = CallFrame;
/**
 * The components a sample's CPU is charged to: the first rule that matches its stack (leaf
 * first) wins, so a socket write made by the storage SDK counts as storage I/O, not as the SDK.
 */
const COMPONENTS: [string, (stack: Frame[]) => boolean][] = [
  ['profiler and bench bookkeeping', (s) => s.some((f) => /\/bench\//.test(f.url)) || s[0].functionName === 'dispatch' || /inspector/.test(s[0].url)],
  ['garbage collector', (s) => s[0].functionName === '(garbage collector)'],
  [
    'socket writes to storage',
    (s) => s.some((f) => /stream_base_commons|node:net/.test(f.url)) && s.some((f) => /_http_client|node_modules\/(@azure|@typespec)/.test(f.url)),
  ],
  ['socket writes to clients', (s) => s.some((f) => /stream_base_commons|node:net/.test(f.url))],
  [
    'storage SDK pipeline (per call: serialize, sign, HTTP, parse)',
    (s) => s.some((f) => /node_modules\/(@azure\/(core|data-tables|storage|abort)|@typespec|fast-xml-parser)|_http_client|_http_agent/.test(f.url)),
  ],
  [
    'local host (node:http, the Functions request object)',
    (s) => s.some((f) => /@azure\/functions|undici|shared\/local|_http_server|_http_incoming|_http_outgoing/.test(f.url)),
  ],
  ['Hawk and scopes', (s) => s.some((f) => /node_modules\/(hawk|@hapi|taskcluster-lib-scopes)|shared\/auth\//.test(f.url))],
  ['schema validation', (s) => s.some((f) => /node_modules\/ajv|shared\/api\/schemas/.test(f.url))],
  ['api (routing, body, responses)', (s) => s.some((f) => /shared\/api\//.test(f.url))],
  ['storage adapter and meter', (s) => s.some((f) => /shared\/storage\//.test(f.url))],
  ['domain (tasks, work, ops, events)', (s) => s.some((f) => /shared\/(tasks|work|ops|events|reaper)\//.test(f.url))],
  ['async context and microtasks', (s) => s.some((f) => /async_hooks|task_queues/.test(f.url)) || s[0].functionName === 'runMicrotasks'],
  ['other', () => true],
];

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileSummary {
  file: string;
  totalMs: number;
  /** Share of the sampled time (idle excluded) by component, by function (self time) and by code area. */
  components: { name: string; pct: number }[];
  functions: { name: string; pct: number }[];
  areas: { name: string; pct: number }[];
}

/** Where a frame's code lives: a package, Node's internals, a project folder, or the VM's own bucket. */
export function areaOf(url: string, functionName: string): string {
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1];
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/')[0] === 'internal' ? url.slice(5).split('/')[1] : url.slice(5)}`;
  const project = /\/dist\/(.+)\/[^/]+$/.exec(url);
  return project ? project[1] : path.basename(url);
}

/** Self time by function and by area; the idle bucket is left out of the shares. */
export function summarize(profile: CpuProfile, file: string): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const fn = new Map<string, number>();
  const area = new Map<string, number>();
  const component = new Map<string, number>();
  let total = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const f = byId.get(profile.samples[i]);
    const dt = profile.timeDeltas[i] ?? 0;
    if (!f || f.functionName === '(idle)') continue;
    total += dt;
    const stack: Frame[] = [];
    for (let id: number | undefined = profile.samples[i]; id !== undefined; id = parent.get(id)) stack.push(byId.get(id)!);
    const c = COMPONENTS.find(([, matches]) => matches(stack))![0];
    component.set(c, (component.get(c) ?? 0) + dt);
    const where = f.url ? `${f.url.replace(/^.*\/(node_modules|dist)\//, '')}:${f.lineNumber + 1}` : '';
    const key = `${f.functionName || '(anonymous)'} ${where}`.trim();
    fn.set(key, (fn.get(key) ?? 0) + dt);
    const a = areaOf(f.url, f.functionName);
    area.set(a, (area.get(a) ?? 0) + dt);
  }
  const top = (m: Map<string, number>) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, TOP)
      .map(([name, us]) => ({ name, pct: Math.round((1000 * us) / Math.max(1, total)) / 10 }));
  return { file, totalMs: Math.round(total / 1000), components: top(component), functions: top(fn), areas: top(area) };
}

/** Starts profiling when `file` is given; `stop()` writes the profile there and summarizes it. */
export function profileWindow(file: string | undefined): { stop(): Promise<ProfileSummary | undefined> } {
  if (!file) return { stop: async () => undefined };
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<any>((resolve, reject) => session.post(method, params ?? {}, (err, res) => (err ? reject(err) : resolve(res))));
  const started = post('Profiler.enable')
    .then(() => post('Profiler.setSamplingInterval', { interval: SAMPLE_INTERVAL_US }))
    .then(() => post('Profiler.start'));
  return {
    async stop() {
      await started;
      const { profile } = (await post('Profiler.stop')) as { profile: CpuProfile };
      session.disconnect();
      fs.writeFileSync(file, JSON.stringify(profile));
      return summarize(profile, file);
    },
  };
}
