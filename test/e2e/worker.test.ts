/**
 * The reference worker end to end: the compiled worker runs as its own process against the
 * service (in-process on a port, real Azurite), through both protocols, and everything is checked
 * the way a user would see it: task status, runs, the uploaded log and artifacts.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startTestService, TestService, taskDef, slugid } from '../helpers/service';
import { buildWorker, WorkerProcess, until, E2E_DIST } from './worker-process';
import { PRIORITIES } from '../../shared/tasks/vocabulary';
import { sdkQueue } from '../helpers/storage-sdk';
import hawk from 'hawk';

/** Short claims so reclaims (and a cancel noticed at reclaim) happen within seconds; reclaim at half. */
const CLAIM_TIMEOUT_S = 10;
/** The queue's claimWork poll time here. */
const POLL_S = 2;
const NODE = process.execPath;
const LOG = 'public/logs/live.log';
/** The complete log; LOG is a reference to the live log while the run runs, then a link to this. */
const BACKING = 'public/logs/live_backing.log';

let svc: TestService;
let creds: { clientId: string; accessToken: string };
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  buildWorker();
  svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: String(POLL_S), QUEUE_CLAIM_TIMEOUT_S: String(CLAIM_TIMEOUT_S) });
  // The worker gets exactly the scopes the interaction documents list, nothing more.
  const clientId = 'e2e/worker';
  const c = await svc.auth().createClient(clientId, {
    expires: new Date(Date.now() + 3600_000).toJSON(),
    description: 'e2e worker',
    scopes: ['queue:claim-work:e2e/*', 'queue:worker-id:e2e/*', 'queue:poll-task-urls:e2e/*', 'queue:claim-task:e2e/*'],
  });
  creds = { clientId, accessToken: c.accessToken };
}, 180_000);

afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop(5000)));
  await svc?.close();
});

const newQueue = () => `e2e/q${Math.random().toString(36).slice(2, 10)}`;

function startWorker(taskQueueId: string, protocol: string, opts: { workerId?: string; args?: string[]; env?: Record<string, string> } = {}): WorkerProcess {
  const w = new WorkerProcess(
    [
      '--root-url',
      svc.rootUrl,
      '--task-queue',
      taskQueueId,
      '--worker-group',
      'e2e',
      '--worker-id',
      opts.workerId ?? 'w1',
      '--protocol',
      protocol,
      ...(opts.args ?? []),
    ],
    opts.env ?? { TASKCLUSTER_CLIENT_ID: creds.clientId, TASKCLUSTER_ACCESS_TOKEN: creds.accessToken },
  );
  workers.push(w);
  return w;
}

async function createTask(taskQueueId: string, payload: unknown, overrides: Record<string, unknown> = {}): Promise<string> {
  const taskId = slugid();
  await svc.queue().createTask(taskId, taskDef(taskQueueId, { payload, ...overrides }));
  return taskId;
}

/** The task status once run `runId` is resolved. */
function resolved(taskId: string, runId = 0, timeoutMs = 40_000): Promise<any> {
  return until(
    async () => {
      const { status } = await svc.queue().status(taskId);
      const r = status.runs[runId];
      return r && r.state !== 'pending' && r.state !== 'running' ? status : undefined;
    },
    timeoutMs,
    `run ${runId} of ${taskId} to be resolved`,
  );
}

type Artifact = { storageType: 's3'; text: string; contentType: string | null } | { storageType: 'error'; reason: string; message: string };

/** An artifact as a consumer sees it: through getArtifact and its redirect. */
async function readArtifact(taskId: string, runId: number, name: string): Promise<Artifact | undefined> {
  try {
    const r = await svc.queue().getArtifact(taskId, runId, name);
    const res = await fetch(r.url);
    return { storageType: 's3', text: await res.text(), contentType: res.headers.get('content-type') };
  } catch (err: any) {
    if (err.statusCode === 424) return { storageType: 'error', reason: err.body.reason, message: err.body.message };
    if (err.statusCode === 404) return undefined;
    throw err;
  }
}

/** Messages in the task queue's Azure pending queues, invisible (leased) ones included. */
async function pendingMessages(taskQueueId: string): Promise<number> {
  let n = 0;
  for (const p of PRIORITIES) {
    const props = await sdkQueue(svc.services, svc.services.pending.queueName(taskQueueId, p))
      .getProperties()
      .catch(() => undefined);
    n += props?.approximateMessagesCount ?? 0;
  }
  return n;
}

async function logOf(taskId: string, runId = 0): Promise<string> {
  const a = await until(() => readArtifact(taskId, runId, BACKING), 10_000, `the log of ${taskId}/${runId}`);
  if (a.storageType !== 's3') throw new Error(`log is an ${a.storageType} artifact`);
  return a.text;
}

/** The queue's liveLog call (an extension taskcluster-client does not know), signed with the root credentials. */
async function liveLog(taskId: string, runId: number, offset = 0): Promise<any> {
  const url = `${svc.rootUrl}/api/queue/v1/task/${taskId}/runs/${runId}/live-log?offset=${offset}`;
  const { header } = hawk.client.header(url, 'GET', { credentials: { id: svc.root.clientId, key: svc.root.accessToken, algorithm: 'sha256' } });
  const res = await fetch(url, { headers: { authorization: header } });
  if (!res.ok) throw new Error(`liveLog answered ${res.status}: ${await res.text()}`);
  return res.json();
}

describe.each(['claimWork', 'pollTaskUrls'])('with %s', (protocol) => {
  let tq: string;
  let worker: WorkerProcess;
  beforeAll(() => {
    tq = newQueue();
    worker = startWorker(tq, protocol, { args: ['--concurrency', '3'] });
  });
  afterAll(async () => {
    expect(await worker.stop()).toBe(0);
    // Every message it received was deleted (pollTaskUrls), and it never failed to delete one.
    expect(worker.matching('delete-message-failed')).toEqual([]);
  });

  test('exit 0 is completed; output, env and artifacts are uploaded; a missing file becomes an error artifact', async () => {
    const script = [
      "const fs = require('fs');",
      "fs.mkdirSync('out');",
      "fs.writeFileSync('out/result.txt', 'result of ' + process.env.TASK_ID);",
      "console.log('hello from ' + process.env.GREETING);",
      "console.error('a line on stderr');",
      "console.log('worker token visible: ' + (process.env.TASKCLUSTER_ACCESS_TOKEN !== undefined));",
    ].join('\n');
    const taskId = await createTask(tq, {
      command: [NODE, '-e', script],
      env: { GREETING: 'the task' },
      maxRunTime: 60,
      artifacts: [
        { type: 'file', path: 'out/result.txt', name: 'public/result.txt' },
        { type: 'file', path: 'never-written.txt', name: 'public/never-written.txt' },
      ],
    });
    const status = await resolved(taskId);
    expect(status.state).toBe('completed');
    expect(status.runs[0]).toMatchObject({ state: 'completed', workerGroup: 'e2e', workerId: 'w1' });

    const log = await logOf(taskId);
    expect(log).toContain('hello from the task');
    expect(log).toContain('a line on stderr');
    expect(log).toContain('worker token visible: false');
    expect(log).toContain('exited with code 0');
    expect(await readArtifact(taskId, 0, 'public/result.txt')).toEqual({
      storageType: 's3',
      text: `result of ${taskId}`,
      contentType: expect.stringMatching(/^text\/plain/),
    });
    expect(await readArtifact(taskId, 0, 'public/never-written.txt')).toMatchObject({ storageType: 'error', reason: 'file-missing-on-worker' });
    // No hint is left behind in the Azure pending queues (for pollTaskUrls: the worker deleted it).
    expect(await pendingMessages(tq)).toBe(0);
  });

  test('the log can be followed while the task runs (liveLog), then reads as the uploaded artifact', async () => {
    // The task writes its second line only once the test has seen the first (a file as the signal).
    const go = path.join(os.tmpdir(), `e2e-go-${slugid()}`);
    const script = [
      "const fs = require('fs');",
      "console.log('first line');",
      `const t = setInterval(() => { if (fs.existsSync(${JSON.stringify(go)})) { clearInterval(t); console.log('second line'); } }, 50);`,
    ].join('\n');
    const taskId = await createTask(tq, { command: [NODE, '-e', script], maxRunTime: 60 });
    const whileRunning = await until(
      async () => {
        const l = await liveLog(taskId, 0);
        return l.state === 'running' && /^first line$/m.test(l.text) ? l : undefined;
      },
      20_000,
      `the first line of ${taskId} while it runs`,
    );
    expect(whileRunning).toMatchObject({ source: 'live', offset: 0 });
    expect(whileRunning.text).not.toMatch(/^second line$/m); // the command, which the log names, contains it
    await fs.promises.writeFile(go, '');
    expect((await resolved(taskId)).state).toBe('completed');
    await fs.promises.rm(go);
    const after = await liveLog(taskId, 0);
    // Resolved: the complete log the worker uploaded (live_backing.log, which live.log links to).
    expect(after).toMatchObject({ state: 'completed', source: 'artifact', text: await logOf(taskId) });
    expect(await readArtifact(taskId, 0, LOG)).toMatchObject({ storageType: 's3', text: after.text }); // the link to the complete log
    expect(after.text).toMatch(/^second line$/m);
    // From an offset: the rest only.
    expect((await liveLog(taskId, 0, whileRunning.next)).text).toBe(after.text.slice(whileRunning.text.length));
  });

  test('a non-zero exit is failed, with the log and artifacts still uploaded', async () => {
    const taskId = await createTask(tq, {
      command: [NODE, '-e', "require('fs').writeFileSync('partial.txt', 'partial'); console.log('about to fail'); process.exit(3)"],
      maxRunTime: 60,
      artifacts: [{ type: 'file', path: 'partial.txt', name: 'public/partial.txt' }],
    });
    const status = await resolved(taskId);
    expect(status.runs[0]).toMatchObject({ state: 'failed', reasonResolved: 'failed' });
    const log = await logOf(taskId);
    expect(log).toContain('about to fail');
    expect(log).toContain('exited with code 3');
    expect(await readArtifact(taskId, 0, 'public/partial.txt')).toMatchObject({ storageType: 's3', text: 'partial' });
  });

  test('malformed payloads are exception/malformed-payload with every problem explained in the log', async () => {
    const marker = path.join(os.tmpdir(), `e2e-not-run-${slugid()}`);
    const invalid = await createTask(tq, {
      command: `touch ${marker}`,
      maxRunTime: 'soon',
      artifacts: [{ type: 'file', name: 'public/x.txt' }],
      comand: ['typo'],
    });
    const missingProgram = await createTask(tq, { command: ['definitely-not-a-program-e2e'], maxRunTime: 10 });
    const missingRequired = await createTask(tq, {
      command: [NODE, '-e', "console.log('produced nothing')"],
      maxRunTime: 10,
      artifacts: [{ type: 'file', path: 'build/app.bin', name: 'public/app.bin', required: true }],
    });
    for (const taskId of [invalid, missingProgram, missingRequired]) {
      const status = await resolved(taskId);
      expect(status.runs).toHaveLength(1); // not retried: a rerun would fail the same way
      expect(status.runs[0]).toMatchObject({ state: 'exception', reasonResolved: 'malformed-payload' });
    }
    const log = await logOf(invalid);
    expect(log).toContain('The task payload is invalid, so the command was not run');
    expect(log).toContain('payload.command must be a non-empty array');
    expect(log).toContain('payload.maxRunTime must be an integer number of seconds');
    expect(log).toContain('payload.artifacts[0].path is required');
    expect(log).toContain("unknown property 'comand'");
    expect(fs.existsSync(marker)).toBe(false);
    expect(await logOf(missingProgram)).toMatch(/"definitely-not-a-program-e2e" was not found/);
    const log3 = await logOf(missingRequired);
    expect(log3).toContain('produced nothing');
    expect(log3).toContain('required artifacts are missing');
    expect(log3).toContain("public/app.bin: expected file 'build/app.bin'");
    expect(await readArtifact(missingRequired, 0, 'public/app.bin')).toMatchObject({ storageType: 'error', reason: 'file-missing-on-worker' });
  });

  test('a command exceeding maxRunTime is stopped and reported failed', async () => {
    const taskId = await createTask(tq, {
      command: [NODE, '-e', "console.log('sleeping'); setTimeout(() => console.log('woke' + ' up'), 60000)"],
      maxRunTime: 2,
    });
    const status = await resolved(taskId, 0, 30_000);
    expect(status.runs[0]).toMatchObject({ state: 'failed' });
    const log = await logOf(taskId);
    expect(log).toContain('sleeping');
    expect(log).toContain('exceeded maxRunTime (2s)');
    expect(log).not.toContain('woke up');
  });

  test('a task that suspends itself twice resumes with its state and completes with all of it', async () => {
    // Each run adds its RUN_ID to the state; the first two ask to suspend, the third writes the result.
    const script = [
      "const fs = require('fs');",
      'const f = process.env.TASK_CONTINUATION_FILE;',
      "const state = f ? JSON.parse(fs.readFileSync(f, 'utf8')) : { runs: [] };",
      'state.runs.push(Number(process.env.RUN_ID));',
      "console.log('state ' + JSON.stringify(state));",
      'if (state.runs.length < 3) fs.writeFileSync(process.env.TASK_SUSPEND_FILE, JSON.stringify({ continuation: state }));',
      "else fs.writeFileSync('state.json', JSON.stringify(state));",
    ].join('\n');
    const taskId = await createTask(tq, {
      command: [NODE, '-e', script],
      maxRunTime: 60,
      suspend: { resumeAfter: 2 },
      artifacts: [{ type: 'file', path: 'state.json', name: 'public/state.json', required: true }],
    });
    const status = await resolved(taskId, 2, 60_000);
    expect(status.state).toBe('completed');
    expect(status.runs.map((r: any) => [r.reasonCreated, r.state, r.reasonResolved])).toEqual([
      ['scheduled', 'exception', 'suspended'],
      ['resumed', 'exception', 'suspended'],
      ['resumed', 'completed', 'completed'],
    ]);
    // The default delay (resumeAfter, counted by the worker from the command's end) made each
    // resumption wait: scheduled after its predecessor was suspended, and not started before.
    for (const i of [1, 2]) {
      expect(Date.parse(status.runs[i].scheduled)).toBeGreaterThan(Date.parse(status.runs[i - 1].resolved));
      expect(Date.parse(status.runs[i].started)).toBeGreaterThanOrEqual(Date.parse(status.runs[i].scheduled));
    }
    expect(await readArtifact(taskId, 2, 'public/state.json')).toMatchObject({ text: JSON.stringify({ runs: [0, 1, 2] }) });
    expect(await logOf(taskId, 0)).toContain('run 0 is exception/suspended; the task resumes at');
    expect(await logOf(taskId, 1)).toContain('state {"runs":[0,1]}');
    expect(worker.matching('task-suspended', taskId)).toHaveLength(2);
  });

  test('SIGTERM mid-task reports worker-shutdown once and claims nothing after; the retry is completed by a second worker', async () => {
    const own = newQueue();
    // A free slot keeps a claim request (long poll) in flight while the task runs: it must not pick up the retry.
    const first = startWorker(own, protocol, { workerId: 'first', args: ['--concurrency', '2'] });
    const taskId = await createTask(own, {
      command: [NODE, '-e', "console.log('run ' + process.env.RUN_ID); setTimeout(() => console.log('done'), 3000)"],
      maxRunTime: 60,
    });
    await first.waitForLine(30_000, 'task-running', taskId);
    first.signal('SIGTERM');
    expect(await first.exited).toBe(0);
    expect(first.matching('task-resolved', taskId, 'outcome=exception', 'reason=worker-shutdown')).toHaveLength(1);
    const stopping = first.lines.findIndex((l) => l.includes('worker-stopping'));
    expect(stopping).toBeGreaterThan(0);
    expect(first.lines.slice(stopping).filter((l) => l.includes('task-claimed'))).toEqual([]);

    const { status } = await svc.queue().status(taskId);
    expect(status.runs[0]).toMatchObject({ state: 'exception', reasonResolved: 'worker-shutdown', workerId: 'first' });
    expect(status.runs[1]).toMatchObject({ state: 'pending', reasonCreated: 'retry' });
    expect(await logOf(taskId, 0)).toContain('shutting down');

    const second = startWorker(own, protocol, { workerId: 'second' });
    const after = await resolved(taskId, 1);
    // Run 1 went to the second worker: no claim of it by the first one expired and burned a retry.
    expect(after.runs).toHaveLength(2);
    expect(after.runs[1]).toMatchObject({ state: 'completed', workerId: 'second' });
    expect(await logOf(taskId, 1)).toContain('run 1');
    expect(await second.stop()).toBe(0);
  });

  test('idle, SIGINT aborts the long poll and the worker exits before the poll would have ended', async () => {
    const tq = newQueue();
    const worker = startWorker(tq, protocol, { workerId: 'idle' });
    await worker.waitForLine(30_000, 'worker-started');
    // claimWork records the worker when its poll arrives: from then on, the poll is waiting.
    if (protocol === 'claimWork') await until(() => svc.queue().getWorker(...(tq.split('/') as [string, string]), 'e2e', 'idle'), 30_000, 'the poll to arrive');
    const t0 = Date.now();
    worker.signal('SIGINT');
    expect(await worker.exited).toBe(0);
    const elapsed = Date.now() - t0;
    expect(worker.matching('worker-stopping', 'reason=SIGINT')).toHaveLength(1);
    expect(worker.matching('worker-stopped')).toHaveLength(1);
    // The queue's poll here lasts 2 s; an un-aborted poll would hold the worker that long.
    expect(elapsed).toBeLessThan(POLL_S * 1000);
  });

  test('a wrong access token stops the worker with a message naming the client id', async () => {
    const worker = startWorker(newQueue(), protocol, {
      env: { TASKCLUSTER_CLIENT_ID: creds.clientId, TASKCLUSTER_ACCESS_TOKEN: 'wrong-token-wrong-token-wrong-token-x' },
    });
    expect(await worker.exited).toBe(1);
    expect(worker.matching(`rejected client '${creds.clientId}' (401`)).toHaveLength(1);
    expect(worker.matching('TASKCLUSTER_ACCESS_TOKEN')).not.toHaveLength(0);
  });
});

test('a cancel noticed at reclaim stops the command, reports nothing, and the worker carries on', async () => {
  const tq = newQueue();
  const worker = startWorker(tq, 'claimWork');
  const marker = path.join(os.tmpdir(), `e2e-ticks-${slugid()}`);
  const taskId = await createTask(tq, {
    command: [NODE, '-e', "setInterval(() => require('fs').appendFileSync(process.env.MARKER, 'x'), 100)"],
    env: { MARKER: marker },
    maxRunTime: 120,
  });
  await until(() => fs.existsSync(marker) && fs.statSync(marker).size > 0, 30_000, 'the command to start ticking');
  await svc.queue().cancelTask(taskId);
  // The next reclaim (half way through the claim) answers 409.
  await worker.waitForLine(CLAIM_TIMEOUT_S * 1000 + 15_000, 'task-lost', taskId, 'reason=conflict');
  const size = fs.statSync(marker).size;
  await new Promise((r) => setTimeout(r, 1000));
  expect(fs.statSync(marker).size).toBe(size); // the command is gone
  fs.rmSync(marker, { force: true });

  const { status } = await svc.queue().status(taskId);
  expect(status.runs).toHaveLength(1);
  expect(status.runs[0]).toMatchObject({ state: 'exception', reasonResolved: 'canceled' });
  expect(worker.matching('task-resolved', taskId)).toEqual([]);
  expect(await readArtifact(taskId, 0, BACKING)).toBeUndefined();

  const next = await createTask(tq, { command: [NODE, '-e', "console.log('next')"], maxRunTime: 10 });
  expect((await resolved(next)).state).toBe('completed');
  expect(await worker.stop()).toBe(0);
});

test('a claim outliving several reclaims keeps running and completes', async () => {
  const tq = newQueue();
  const worker = startWorker(tq, 'claimWork');
  // The command runs until the test has seen two reclaims (a file as the signal), not for a fixed time.
  const go = path.join(os.tmpdir(), `e2e-go-${slugid()}`);
  const script = `const t = setInterval(() => { if (require('fs').existsSync(${JSON.stringify(go)})) clearInterval(t); }, 50);`;
  const taskId = await createTask(tq, { command: [NODE, '-e', script], maxRunTime: 60 });
  await until(() => worker.matching('task-reclaimed', taskId).length >= 2, 4 * CLAIM_TIMEOUT_S * 1000, 'two reclaims');
  await fs.promises.writeFile(go, '');
  const status = await resolved(taskId);
  await fs.promises.rm(go);
  expect(status.runs[0].state).toBe('completed');
  expect(await worker.stop()).toBe(0);
});

test('temporary credentials from TASKCLUSTER_CERTIFICATE work', async () => {
  const tq = newQueue();
  const temp = svc.tc.createTemporaryCredentials({
    start: new Date(Date.now() - 60_000),
    expiry: new Date(Date.now() + 3600_000),
    scopes: [`queue:claim-work:${tq}`, 'queue:worker-id:e2e/temp'],
    credentials: creds,
  });
  const worker = startWorker(tq, 'claimWork', {
    workerId: 'temp',
    env: { TASKCLUSTER_CLIENT_ID: temp.clientId, TASKCLUSTER_ACCESS_TOKEN: temp.accessToken, TASKCLUSTER_CERTIFICATE: temp.certificate },
  });
  const taskId = await createTask(tq, { command: [NODE, '-e', "console.log('ok')"], maxRunTime: 10 });
  expect((await resolved(taskId)).runs[0]).toMatchObject({ state: 'completed', workerId: 'temp' });
  expect(await worker.stop()).toBe(0);
});

test('--proxy lets the task call the queue with task.scopes, and not with the run credentials', async () => {
  const tq = newQueue();
  const worker = startWorker(tq, 'claimWork', { args: ['--proxy'] });
  const script = `(async () => {
    const base = process.env.TASKCLUSTER_PROXY_URL + '/api/queue/v1/task/' + process.env.TASK_ID;
    const s = await fetch(base + '/status');
    console.log('status call', s.status, (await s.json()).status.state);
    const c = await fetch(base + '/runs/' + process.env.RUN_ID + '/completed', { method: 'POST' });
    console.log('report call', c.status);
    process.exit(s.status === 200 && c.status === 403 ? 0 : 1);
  })()`;
  const taskId = slugid();
  await svc.queue().createTask(taskId, taskDef(tq, { scopes: [`queue:status:${taskId}`], payload: { command: [NODE, '-e', script], maxRunTime: 30 } }));
  const status = await resolved(taskId);
  const log = await logOf(taskId);
  expect(log).toContain('status call 200 running');
  expect(log).toContain('report call 403');
  expect(status.runs[0].state).toBe('completed');
  expect(await worker.stop()).toBe(0);
});

test("a task reads a secret through the worker's proxy (legacy /secrets/v1 path) with its own scopes", async () => {
  const tq = newQueue();
  const name = `project/e2e/${slugid()}`;
  const secrets = new svc.tc.Secrets({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
  await secrets.set(name, { secret: { password: 'open sesame' }, expires: new Date(Date.now() + 3600_000).toJSON() });
  const worker = startWorker(tq, 'claimWork', { args: ['--proxy'] });
  const script = `(async () => {
    const r = await fetch(process.env.TASKCLUSTER_PROXY_URL + '/secrets/v1/secret/' + encodeURIComponent(${JSON.stringify(name)}));
    const body = await r.json();
    console.log('secret call', r.status, body.secret && body.secret.password);
    const other = await fetch(process.env.TASKCLUSTER_PROXY_URL + '/secrets/v1/secret/elsewhere');
    console.log('other secret', other.status);
    process.exit(r.status === 200 && other.status === 403 ? 0 : 1);
  })()`;
  const taskId = slugid();
  await svc.queue().createTask(taskId, taskDef(tq, { scopes: [`secrets:get:${name}`], payload: { command: [NODE, '-e', script], maxRunTime: 30 } }));
  const status = await resolved(taskId);
  const log = await logOf(taskId);
  expect(log).toContain('secret call 200 open sesame');
  expect(log).toContain('other secret 403');
  expect(status.runs[0].state).toBe('completed');
  expect(await worker.stop()).toBe(0);
});

test('artifacts are downloadable through getArtifact; error artifacts answer 424', async () => {
  // Skipped until the artifact endpoints (issue 5) are in the route table.
  const tq = newQueue();
  const worker = startWorker(tq, 'claimWork');
  const taskId = await createTask(tq, {
    command: [NODE, '-e', "require('fs').writeFileSync('data.json', JSON.stringify({answer: 42}))"],
    maxRunTime: 10,
    artifacts: [
      { type: 'file', path: 'data.json', name: 'public/data.json' },
      { type: 'file', path: 'nope.txt', name: 'public/nope.txt' },
    ],
  });
  expect((await resolved(taskId)).state).toBe('completed');
  const { url } = await svc.queue().getArtifact(taskId, 0, 'public/data.json');
  const res = await fetch(url);
  expect(res.status).toBe(200);
  expect(await res.json()).toEqual({ answer: 42 });
  const err = await svc
    .queue()
    .getArtifact(taskId, 0, 'public/nope.txt')
    .catch((e: any) => e);
  expect(err.statusCode).toBe(424);
  expect(err.body).toMatchObject({ reason: 'file-missing-on-worker' });
  const log = await fetch((await svc.queue().getLatestArtifact(taskId, LOG)).url);
  expect(await log.text()).toContain('exited with code 0');
  expect(await worker.stop()).toBe(0);
});

test('--object-artifacts uploads the artifacts and the log as object artifacts, downloadable with downloadArtifact', async () => {
  const tq = newQueue();
  const worker = startWorker(tq, 'claimWork', { args: ['--object-artifacts'] });
  const big = 'x'.repeat(20_000); // over the 8 KiB dataInline limit: goes through putUrl
  const taskId = await createTask(tq, {
    command: [NODE, '-e', `require('fs').writeFileSync('small.txt', 'tiny'); require('fs').writeFileSync('big.txt', '${big}')`],
    maxRunTime: 10,
    artifacts: [
      { type: 'file', path: 'small.txt', name: 'public/small.txt' },
      { type: 'file', path: 'big.txt', name: 'public/big.txt' },
    ],
  });
  expect((await resolved(taskId)).state).toBe('completed');
  const { artifacts } = await svc.queue().listArtifacts(taskId, 0);
  expect(artifacts.map((a: any) => [a.name, a.storageType]).sort()).toEqual([
    ['public/big.txt', 'object'],
    [LOG, 'link'],
    [BACKING, 'object'],
    ['public/small.txt', 'object'],
  ]);
  const read = async (name: string) => {
    const chunks: Buffer[] = [];
    const { Writable } = await import('node:stream');
    await svc.tc.downloadArtifact({
      taskId,
      name,
      queue: svc.queue(),
      streamFactory: async () => new Writable({ write: (c: Buffer, _e: string, cb: () => void) => (chunks.push(Buffer.from(c)), cb()) }),
    });
    return Buffer.concat(chunks).toString();
  };
  expect(await read('public/small.txt')).toBe('tiny');
  expect(await read('public/big.txt')).toBe(big);
  expect(await read(LOG)).toContain('exited with code 0');
  expect(await worker.stop()).toBe(0);
});

/**
 * The demo bounds its own phases (bin/demo.ts): Azurite's start (30 s), the graph (3 min, then it
 * reports what it got) and the worker's stop (30 s). Its graph takes seconds and the rest is process
 * start-up (Azurite, the service, the worker, a sandbox per task), which a loaded machine slows
 * several times over, so the test waits as long as the demo may take, plus a minute for the rest.
 */
const DEMO_BOUND_MS = 30_000 + 3 * 60_000 + 30_000 + 60_000;

test(
  'the demo runs its task graph as planned',
  async () => {
    const { spawnSync } = await import('node:child_process');
    const r = spawnSync(NODE, [path.join(E2E_DIST, 'bin', 'demo.js'), '--exit'], {
      encoding: 'utf8',
      timeout: DEMO_BOUND_MS,
      env: { PATH: process.env.PATH ?? '' },
    });
    expect(r.stdout).toContain('All tasks ended as planned');
    expect(r.stdout).toMatch(/✔ release\s+completed/);
    expect(r.stdout).toMatch(/✘ lint\s+failed/);
    // --exit stops the service as it reports: no URL that would be dead.
    expect(r.stdout).not.toContain('/api/dashboard');
    expect(r.stdout).toContain('--exit: the service stops now, so no URLs');
    expect(r.status).toBe(0);
  },
  DEMO_BOUND_MS + 10_000,
);
