/**
 * One run against a fake queue (recording every call and the credentials it was signed with) and
 * a fake blob store; the command really runs.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runTask, TaskRunDeps } from '../../worker/task-run';
import { memoryLog } from '../../worker/logger';
import type { Claim, Credentials, RunQueue } from '../../worker/types';
import { fakeStorage } from '../helpers/fake-storage';

const NODE = process.execPath;
let storage: Awaited<ReturnType<typeof fakeStorage>>;
let workDir: string;
beforeAll(async () => {
  storage = await fakeStorage();
  workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'task-run-test-'));
});
afterAll(async () => {
  await storage.close();
  fs.rmSync(workDir, { recursive: true, force: true });
});

type Call = { call: string; clientId: string; name?: string; body?: any };

function fakeQueue(
  opts: {
    reclaim?: (n: number) => unknown;
    /** How far ahead each reclaim moves takenUntil (default 2 s: the next reclaim comes 1 s later). */
    reclaimForMs?: number;
    createArtifact?: (name: string) => unknown;
    suspendRun?: () => unknown;
    /** Give the queue this queue's createLiveLog extension (answering with an append URL nothing serves). */
    liveLog?: boolean;
  } = {},
) {
  const calls: Call[] = [];
  let reclaims = 0;
  const queueFor = (c: Credentials): RunQueue => ({
    ...(opts.liveLog
      ? {
          async createLiveLog() {
            calls.push({ call: 'createLiveLog', clientId: c.clientId });
            return { url: `${storage.url}/append?sig=x`, expires: new Date(Date.now() + 3600_000).toJSON() };
          },
        }
      : {}),
    async reclaimTask() {
      calls.push({ call: 'reclaimTask', clientId: c.clientId });
      reclaims++;
      const r = opts.reclaim?.(reclaims);
      if (r instanceof Error) throw r;
      return { takenUntil: new Date(Date.now() + (opts.reclaimForMs ?? 2000)).toJSON(), credentials: { clientId: `reclaimed-${reclaims}`, accessToken: 'x' } };
    },
    async reportCompleted() {
      calls.push({ call: 'reportCompleted', clientId: c.clientId });
      return {};
    },
    async reportFailed() {
      calls.push({ call: 'reportFailed', clientId: c.clientId });
      return {};
    },
    async reportException(_t, _r, body) {
      calls.push({ call: 'reportException', clientId: c.clientId, body });
      return {};
    },
    async suspendRun(_t, _r, body) {
      calls.push({ call: 'suspendRun', clientId: c.clientId, body });
      const e = opts.suspendRun?.();
      if (e) throw e;
      return {};
    },
    async createArtifact(_t, _r, name, body) {
      calls.push({ call: 'createArtifact', clientId: c.clientId, name, body });
      const e = opts.createArtifact?.(name);
      if (e) throw e;
      return body.storageType === 's3' ? { storageType: 's3', putUrl: `${storage.url}/${encodeURIComponent(name)}/${calls.length}` } : { storageType: 'error' };
    },
  });
  return { calls, queueFor };
}

function claimFor(payload: unknown, takenUntilMs = 60_000): Claim {
  return {
    status: { taskId: `T${Math.random().toString(36).slice(2, 8)}` },
    runId: 0,
    workerGroup: 'g',
    workerId: 'w',
    takenUntil: new Date(Date.now() + takenUntilMs).toJSON(),
    task: { deadline: new Date(Date.now() + 3600_000).toJSON(), expires: new Date(Date.now() + 86400_000).toJSON(), payload },
    credentials: { clientId: 'claim', accessToken: 'x' },
  };
}

function deps(queueFor: TaskRunDeps['queueFor'], extra: Partial<TaskRunDeps> = {}): TaskRunDeps {
  return { queueFor, log: memoryLog(), rootUrl: 'http://root', workDir, workerGroup: 'g', workerId: 'w', baseEnv: { PATH: process.env.PATH ?? '' }, ...extra };
}

const putBody = (name: string) => storage.puts.filter((p) => p.path.startsWith(`/${encodeURIComponent(name)}/`)).map((p) => p.body.toString());
/** The complete log, uploaded when the run ends; live.log then links to it. */
const BACKING = 'public/logs/live_backing.log';
/** ' log' for the complete log's upload, ' link' for live.log made a link to it. */
const tag = (c: Call) => (c.name === BACKING ? ' log' : c.name === 'public/logs/live.log' ? ` ${c.body?.storageType}` : '');

test('uploads go before reportCompleted, all signed with the newest credentials; the run directory is removed', async () => {
  // One reclaim, half way to the claim's takenUntil (1 s in, while the command runs its 1.5 s);
  // it holds the run for an hour, so no later reclaim can fall between the uploads.
  const q = fakeQueue({ reclaimForMs: 3600_000 });
  const claim = claimFor(
    {
      command: [NODE, '-e', "require('fs').writeFileSync('o.txt', 'out'); setTimeout(() => {}, 1500)"],
      maxRunTime: 30,
      artifacts: [{ type: 'file', path: 'o.txt', name: 'public/o.txt' }],
    },
    2000,
  );
  const outcome = await runTask(claim, new AbortController().signal, deps(q.queueFor));
  expect(outcome).toEqual({ kind: 'completed' });
  const order = q.calls.map((c) => `${c.call}${c.name ? ' ' + c.name : ''} as ${c.clientId}`);
  expect(order).toEqual([
    'reclaimTask as claim',
    'createArtifact public/o.txt as reclaimed-1',
    'createArtifact public/logs/live_backing.log as reclaimed-1',
    'createArtifact public/logs/live.log as reclaimed-1',
    'reportCompleted as reclaimed-1',
  ]);
  expect(putBody('public/o.txt')).toEqual(['out']);
  expect(putBody(BACKING)[0]).toContain('exited with code 0');
  expect(fs.readdirSync(workDir)).toEqual([]);
});

test("live.log: a reference to the run's live-log reader while it runs, then a link to the complete live_backing.log", async () => {
  const q = fakeQueue({ liveLog: true });
  const claim = claimFor({ command: [NODE, '-e', "console.log('hello')"], maxRunTime: 30 });
  expect(await runTask(claim, new AbortController().signal, deps(q.queueFor))).toEqual({ kind: 'completed' });
  const taskId = claim.status.taskId;
  const seq = q.calls.filter((c) => c.call === 'createArtifact' || c.call.startsWith('report')).map((c) => c.call + tag(c));
  expect(seq).toEqual(['createArtifact reference', 'createArtifact log', 'createArtifact link', 'reportCompleted']);
  const [reference, , link] = q.calls.filter((c) => c.call === 'createArtifact');
  expect(reference.body).toEqual({
    storageType: 'reference',
    url: `http://root/api/queue/v1/task/${taskId}/runs/0/live-log`,
    contentType: 'text/plain',
    expires: claim.task.expires,
  });
  // The queue lets a reference become a link, and only if the expiry does not shrink.
  expect(link.body).toMatchObject({ storageType: 'link', artifact: BACKING, expires: claim.task.expires });
  expect(putBody(BACKING).at(-1)).toContain('hello');
});

test('a live.log reference the queue refuses does not stop the run', async () => {
  const q = fakeQueue({
    liveLog: true,
    createArtifact: (name) =>
      name === 'public/logs/live.log' && !q.calls.some((c) => c.name === BACKING) ? Object.assign(new Error('nope'), { statusCode: 400 }) : undefined,
  });
  const log = memoryLog();
  expect(await runTask(claimFor({ command: [NODE, '-e', '0'], maxRunTime: 30 }), new AbortController().signal, deps(q.queueFor, { log }))).toEqual({
    kind: 'completed',
  });
  expect(q.calls.filter((c) => c.call === 'createArtifact').map(tag)).toEqual([' reference', ' log', ' link']);
  expect(log.events.map((e) => e.event)).toContain('live-log-reference-failed');
});

test('an invalid payload: log uploaded, then exception/malformed-payload; nothing runs', async () => {
  const q = fakeQueue();
  const outcome = await runTask(claimFor({ command: [], maxRunTime: 5 }), new AbortController().signal, deps(q.queueFor));
  expect(outcome).toEqual({ kind: 'exception', reason: 'malformed-payload' });
  expect(q.calls.map((c) => c.call + tag(c))).toEqual(['createArtifact log', 'createArtifact link', 'reportException']);
  expect(q.calls[2].body).toEqual({ reason: 'malformed-payload' });
  expect(q.calls[0].body).toMatchObject({ storageType: 's3', contentType: 'text/plain' });
  expect(q.calls[1].body).toEqual({ storageType: 'link', artifact: BACKING, contentType: 'text/plain', expires: q.calls[0].body.expires });
});

test('shutdown mid-command: exception/worker-shutdown is reported first, the log follows', async () => {
  const q = fakeQueue();
  const shutdown = new AbortController();
  const p = runTask(claimFor({ command: [NODE, '-e', 'setTimeout(() => {}, 30000)'], maxRunTime: 60 }), shutdown.signal, deps(q.queueFor));
  await new Promise((r) => setTimeout(r, 500));
  shutdown.abort('SIGTERM');
  expect(await p).toEqual({ kind: 'exception', reason: 'worker-shutdown' });
  expect(q.calls.map((c) => c.call + tag(c))).toEqual(['reportException', 'createArtifact log', 'createArtifact link']);
  expect(q.calls[0].body).toEqual({ reason: 'worker-shutdown' });
});

test('a 409 at reclaim: the command is stopped, nothing is uploaded or reported', async () => {
  const q = fakeQueue({ reclaim: () => Object.assign(new Error('canceled'), { statusCode: 409 }) });
  const started = Date.now();
  const outcome = await runTask(
    claimFor({ command: [NODE, '-e', 'setTimeout(() => {}, 30000)'], maxRunTime: 60 }, 1000),
    new AbortController().signal,
    deps(q.queueFor),
  );
  expect(outcome).toEqual({ kind: 'lost', reason: 'conflict' });
  expect(q.calls.map((c) => c.call)).toEqual(['reclaimTask']);
  expect(Date.now() - started).toBeLessThan(20_000);
});

test('storage unavailable while uploading an artifact: exception/resource-unavailable first, then the log best-effort', async () => {
  const q = fakeQueue({
    createArtifact: (name) => (name === 'public/o.txt' ? Object.assign(new Error('Internal Server Error'), { statusCode: 500 }) : undefined),
  });
  const outcome = await runTask(
    claimFor({
      command: [NODE, '-e', "require('fs').writeFileSync('o.txt', 'x')"],
      maxRunTime: 30,
      artifacts: [{ type: 'file', path: 'o.txt', name: 'public/o.txt' }],
    }),
    new AbortController().signal,
    deps(q.queueFor),
  );
  expect(outcome).toEqual({ kind: 'exception', reason: 'resource-unavailable' });
  const seq = q.calls.map((c) => c.call + (c.name ? ' ' + c.name : ''));
  const firstReport = seq.indexOf('reportException');
  expect(seq.slice(firstReport)).toEqual(['reportException', `createArtifact ${BACKING}`, 'createArtifact public/logs/live.log']);
  expect(seq.filter((s) => s === 'createArtifact public/o.txt').length).toBeGreaterThanOrEqual(1);
});

test('a symlink pointing outside the task directory is not uploaded', async () => {
  const q = fakeQueue();
  const outcome = await runTask(
    claimFor({
      command: [NODE, '-e', "require('fs').symlinkSync('/etc/passwd', 'leak.txt')"],
      maxRunTime: 30,
      artifacts: [{ type: 'file', path: 'leak.txt', name: 'public/leak.txt' }],
    }),
    new AbortController().signal,
    deps(q.queueFor),
  );
  expect(outcome).toEqual({ kind: 'completed' });
  const leak = q.calls.find((c) => c.name === 'public/leak.txt')!;
  expect(leak.body).toMatchObject({ storageType: 'error', reason: 'invalid-resource-on-worker' });
});

test('the command gets the payload env and task variables, never the worker environment', async () => {
  const q = fakeQueue();
  process.env.WORKER_SECRET_FOR_TEST = 'leak';
  try {
    await runTask(
      claimFor({ command: [NODE, '-e', 'console.log(JSON.stringify(process.env))'], env: { MINE: '1' }, maxRunTime: 30 }),
      new AbortController().signal,
      deps(q.queueFor),
    );
  } finally {
    delete process.env.WORKER_SECRET_FOR_TEST;
  }
  const log = putBody(BACKING).at(-1)!;
  const env = JSON.parse(log.split('\n').find((l) => l.startsWith('{'))!);
  expect(env).toMatchObject({ MINE: '1', RUN_ID: '0', TASKCLUSTER_ROOT_URL: 'http://root', TASKCLUSTER_WORKER_ID: 'w' });
  expect(env.TASK_ID).toMatch(/^T/);
  expect(env.WORKER_SECRET_FOR_TEST).toBeUndefined();
});

describe("suspension on the command's request", () => {
  /** A command that records its continuation and asks to suspend with `request` (JSON text). */
  const suspending = (request: string) => [
    NODE,
    '-e',
    `const fs = require('fs');
     const f = process.env.TASK_CONTINUATION_FILE;
     console.log('continuation:', f ? fs.readFileSync(f, 'utf8') : 'none');
     if (process.env.TASK_SUSPEND_FILE) fs.writeFileSync(process.env.TASK_SUSPEND_FILE, ${JSON.stringify(request)});`,
  ];

  test('suspendRun instead of a report, with the default delay; the log follows; no artifacts', async () => {
    const q = fakeQueue();
    const before = Date.now();
    const claim = claimFor({
      command: suspending('{"continuation": {"step": 1}}'),
      maxRunTime: 30,
      suspend: { resumeAfter: 120 },
      artifacts: [{ type: 'file', path: 'out.txt', name: 'public/out.txt', required: true }],
    });
    const outcome = await runTask(claim, new AbortController().signal, deps(q.queueFor));
    expect(outcome).toMatchObject({ kind: 'suspended' });
    const resumeAt = Date.parse((outcome as { resumeAt: string }).resumeAt);
    expect(resumeAt).toBeGreaterThanOrEqual(before + 120_000);
    expect(resumeAt).toBeLessThan(Date.now() + 121_000);
    expect(q.calls.filter((c) => c.call !== 'reclaimTask').map((c) => c.call + tag(c))).toEqual(['suspendRun', 'createArtifact log', 'createArtifact link']);
    expect(q.calls.find((c) => c.call === 'suspendRun')!.body).toEqual({ continuation: { step: 1 }, resumeAt: new Date(resumeAt).toJSON() });
    const log = putBody(BACKING).at(-1)!;
    expect(log).toContain('continuation: none');
    expect(log).toContain('exception/suspended; the task resumes at');
  });

  test('a resumed claim hands the continuation to the command; resumeAt and resumeAfter in the request win', async () => {
    const q = fakeQueue();
    const at = new Date(Date.now() + 600_000).toJSON();
    const claim = {
      ...claimFor({ command: suspending(JSON.stringify({ continuation: 'next', resumeAt: at })), maxRunTime: 30, suspend: {} }),
      continuation: { n: [1, 2] },
    };
    expect(await runTask(claim, new AbortController().signal, deps(q.queueFor))).toEqual({ kind: 'suspended', resumeAt: at });
    expect(putBody(BACKING).at(-1)).toContain('continuation: {"n":[1,2]}');

    const q2 = fakeQueue();
    const o = await runTask(
      claimFor({ command: suspending('{"continuation": null, "resumeAfter": 0}'), maxRunTime: 30, suspend: { resumeAfter: 999 } }),
      new AbortController().signal,
      deps(q2.queueFor),
    );
    expect(Date.parse((o as { resumeAt: string }).resumeAt)).toBeLessThanOrEqual(Date.now());
    expect(q2.calls.find((c) => c.call === 'suspendRun')!.body.continuation).toBeNull();
  });

  test('without payload.suspend the command gets no request file and the run completes', async () => {
    const q = fakeQueue();
    expect(await runTask(claimFor({ command: suspending('{"continuation": 1}'), maxRunTime: 30 }), new AbortController().signal, deps(q.queueFor))).toEqual({
      kind: 'completed',
    });
    expect(q.calls.map((c) => c.call)).not.toContain('suspendRun');
  });

  test('a request with a non-zero exit is ignored: failed', async () => {
    const q = fakeQueue();
    const command = [...suspending('{"continuation": 1}')];
    command[2] += '; process.exit(3)';
    expect(await runTask(claimFor({ command, maxRunTime: 30, suspend: {} }), new AbortController().signal, deps(q.queueFor))).toEqual({ kind: 'failed' });
    expect(q.calls.map((c) => c.call)).not.toContain('suspendRun');
  });

  test('an invalid request is failed, with the problem in the log', async () => {
    const q = fakeQueue();
    expect(
      await runTask(claimFor({ command: suspending('{"state": 1}'), maxRunTime: 30, suspend: {} }), new AbortController().signal, deps(q.queueFor)),
    ).toEqual({
      kind: 'failed',
    });
    expect(q.calls.map((c) => c.call)).not.toContain('suspendRun');
    expect(putBody(BACKING).at(-1)).toContain('must be a JSON object with a `continuation` property');
  });

  test('a suspension the queue refuses (4xx) is failed with its message; a 5xx is exception/resource-unavailable', async () => {
    const q = fakeQueue({ suspendRun: () => Object.assign(new Error('resumeAt must not be after the task deadline'), { statusCode: 400 }) });
    expect(
      await runTask(claimFor({ command: suspending('{"continuation": 1}'), maxRunTime: 30, suspend: {} }), new AbortController().signal, deps(q.queueFor)),
    ).toEqual({
      kind: 'failed',
    });
    expect(q.calls.filter((c) => c.call !== 'reclaimTask').map((c) => c.call + tag(c))).toEqual([
      'suspendRun',
      'createArtifact log',
      'createArtifact link',
      'reportFailed',
    ]);
    expect(putBody(BACKING).at(-1)).toContain('The queue refused the suspension (400): resumeAt must not be after the task deadline');

    const q2 = fakeQueue({ suspendRun: () => Object.assign(new Error('busy'), { statusCode: 503 }) });
    expect(
      await runTask(claimFor({ command: suspending('{"continuation": 1}'), maxRunTime: 30, suspend: {} }), new AbortController().signal, deps(q2.queueFor)),
    ).toEqual({
      kind: 'exception',
      reason: 'resource-unavailable',
    });
  });
});
