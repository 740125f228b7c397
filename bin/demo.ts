/**
 * `npm run demo`: the whole product on one machine in a minute. Starts embedded Azurite and the
 * service, runs the reference worker as a separate process (least-privilege credentials, two
 * slots, the task proxy on), submits a small task graph with dependencies and artifacts, waits
 * for it, and prints the results with the dashboard and artifact URLs (bin/demo-report.ts). Keeps
 * serving until Ctrl-C so the URLs can be opened; `--exit` stops at the end instead, and so prints no
 * URLs (exit code 1 if any task ended differently than planned).
 */
import crypto from 'node:crypto';
import path from 'node:path';
import { spawn, ChildProcess } from 'node:child_process';
import { parseArgs } from 'node:util';
import { loadConfig } from '../shared/config';
import { startApp } from '../shared/app';
import { startHost } from '../shared/local/host';
import { startAzurite, freePort } from '../shared/local/azurite';
import { jsonLogger } from '../shared/log';
import { generateAccessToken } from '../shared/auth/clients';
import { linkLines, taskLines } from './demo-report';

const TASK_QUEUE = 'demo/runner';
const WORKER_GROUP = 'demo';
/** Short long-polls so the worker stops promptly at the end of the demo. */
const DEMO_CLAIM_WORK_POLL_S = '5';
/** Reaper every few seconds so expiry and dependency resolution are visible quickly. */
const DEMO_REAPER_SCHEDULE = '*/2 * * * * *';
/** The graph takes seconds; give up well after that. */
const DEMO_TIMEOUT_MS = 3 * 60_000;
/** Read access for anyone, so the printed URLs open in a browser (as on most Taskcluster deployments). */
const ANONYMOUS_SCOPES = [
  'queue:get-artifact:public/*',
  'queue:get-task:*',
  'queue:status:*',
  'queue:list-task-group:*',
  'queue:list-artifacts:*',
  'queue:list-dependent-tasks:*',
];

const NODE = process.execPath;

interface Planned {
  key: string;
  deps: string[];
  expect: 'completed' | 'failed';
  payload: Record<string, unknown>;
  scopes?: string[];
  description: string;
}

/** The graph: build → (test, docs) → release, plus an independent lint that fails. */
function plan(ids: Record<string, string>): Planned[] {
  const js = (lines: string[]) => lines.join('\n');
  return [
    {
      key: 'build',
      deps: [],
      expect: 'completed',
      description: 'compiles the app and publishes it as an artifact',
      payload: {
        command: [
          NODE,
          '-e',
          js([
            "const fs = require('fs');",
            "console.log('compiling 3 modules...');",
            "fs.mkdirSync('dist');",
            "fs.writeFileSync('dist/hello.txt', 'Hello from the build task ' + process.env.TASK_ID + '\\n');",
            "fs.writeFileSync('dist/info.json', JSON.stringify({ builtBy: process.env.TASKCLUSTER_WORKER_ID, at: new Date() }, null, 2));",
            "console.log('build finished');",
          ]),
        ],
        maxRunTime: 60,
        artifacts: [
          { type: 'file', path: 'dist/hello.txt', name: 'public/build/hello.txt' },
          { type: 'file', path: 'dist/info.json', name: 'public/build/info.json' },
        ],
      },
    },
    {
      key: 'test',
      deps: ['build'],
      expect: 'completed',
      description: "downloads build's artifact through the task proxy and checks it",
      scopes: ['queue:get-artifact:public/build/*'],
      payload: {
        command: [
          NODE,
          '-e',
          js([
            '(async () => {',
            "  const url = process.env.TASKCLUSTER_PROXY_URL + '/api/queue/v1/task/' + process.env.BUILD_TASK_ID + '/runs/0/artifacts/public%2Fbuild%2Fhello.txt';",
            "  console.log('fetching', url);",
            '  const res = await fetch(url);',
            '  const text = await res.text();',
            "  console.log('got', res.status, JSON.stringify(text));",
            "  if (!text.startsWith('Hello from the build task')) { console.log('test FAILED'); process.exit(1); }",
            "  console.log('1 test passed');",
            '})();',
          ]),
        ],
        env: { BUILD_TASK_ID: ids.build },
        maxRunTime: 60,
      },
    },
    {
      key: 'docs',
      deps: ['build'],
      expect: 'completed',
      description: 'renders documentation (runs in parallel with test)',
      payload: {
        command: [
          NODE,
          '-e',
          js([
            "const fs = require('fs');",
            "fs.mkdirSync('site');",
            "fs.writeFileSync('site/index.html', '<!doctype html><title>Demo docs</title><h1>Demo docs</h1><p>Built by task ' + process.env.TASK_ID + '</p>');",
            "setTimeout(() => console.log('docs rendered'), 1000);",
          ]),
        ],
        maxRunTime: 60,
        artifacts: [{ type: 'file', path: 'site/index.html', name: 'public/docs/index.html' }],
      },
    },
    {
      key: 'release',
      deps: ['test', 'docs'],
      expect: 'completed',
      description: 'runs once test and docs completed; writes a release manifest',
      payload: {
        command: [
          NODE,
          '-e',
          js([
            "const fs = require('fs');",
            "const manifest = { version: '1.0.0', build: process.env.BUILD_TASK_ID, releasedBy: process.env.TASK_ID };",
            "fs.writeFileSync('release.json', JSON.stringify(manifest, null, 2));",
            "console.log('released', JSON.stringify(manifest));",
          ]),
        ],
        env: { BUILD_TASK_ID: ids.build },
        maxRunTime: 60,
        artifacts: [{ type: 'file', path: 'release.json', name: 'public/release.json', required: true }],
      },
    },
    {
      key: 'lint',
      deps: [],
      expect: 'failed',
      description: 'an independent check that finds problems (exit 1 → failed)',
      payload: {
        command: [
          NODE,
          '-e',
          "console.log('src/app.js:3 unused variable x'); console.log('src/app.js:9 missing semicolon'); console.log('lint: 2 problems'); process.exit(1)",
        ],
        maxRunTime: 60,
      },
    },
  ];
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { exit: { type: 'boolean' }, port: { type: 'string' } } });
  const port = Number(values.port ?? process.env.DEMO_PORT ?? (await freePort()));
  const rootUrl = `http://localhost:${port}`;

  console.log('Starting embedded Azurite and the queue service...');
  const azurite = await startAzurite();
  const rootCreds = { clientId: 'static/root', accessToken: generateAccessToken() };
  const config = loadConfig({
    QUEUE_STORAGE_CONNECTION: azurite.connectionString,
    QUEUE_STORAGE_PREFIX: 'demo',
    QUEUE_PUBLIC_URL: rootUrl,
    QUEUE_ROOT_ACCESS_TOKEN: rootCreds.accessToken,
    QUEUE_TOKEN_ENCRYPTION_KEY: crypto.randomBytes(32).toString('base64'),
    QUEUE_CLAIM_WORK_POLL_S: DEMO_CLAIM_WORK_POLL_S,
    QUEUE_REAPER_SCHEDULE: DEMO_REAPER_SCHEDULE,
  });
  const app = await startApp(config, { log: jsonLogger(undefined, true) });
  const hasRoute = (name: string) => app.routes.some((r) => r.service === 'queue' && r.name === name);
  const settings = { QUEUE_REAPER_SCHEDULE: config.reaperSchedule };
  const host = await startHost({ app, port, host: '127.0.0.1', runTimers: true, quiet: true, settings });

  const tc = (await import('taskcluster-client')).default;
  const queue = new tc.Queue({ rootUrl, credentials: rootCreds });
  const auth = new tc.Auth({ rootUrl, credentials: rootCreds });
  await auth.createRole('anonymous', { description: 'read access for the demo', scopes: ANONYMOUS_SCOPES });
  // The worker gets only what the interaction documents require.
  const workerClientId = 'demo/worker';
  const workerClient = await auth.createClient(workerClientId, {
    expires: new Date(Date.now() + 24 * 3600_000).toJSON(),
    description: 'the demo worker',
    scopes: [`queue:claim-work:${TASK_QUEUE}`, `queue:worker-id:${WORKER_GROUP}/*`],
  });

  if (!hasRoute('createArtifact') || !hasRoute('getArtifact')) {
    console.log('\nWARNING: this build lacks the artifact endpoints (createArtifact/getArtifact): the worker cannot');
    console.log('         upload logs or artifacts and tasks cannot download them, so the graph will not go as planned.\n');
  }

  console.log(`Starting the worker (${TASK_QUEUE}, 2 slots, task proxy on)...`);
  const worker: ChildProcess = spawn(
    NODE,
    [
      path.join(__dirname, '..', 'worker', 'main.js'),
      '--root-url',
      rootUrl,
      '--task-queue',
      TASK_QUEUE,
      '--worker-group',
      WORKER_GROUP,
      '--worker-id',
      'demo-1',
      '--concurrency',
      '2',
      '--proxy',
    ],
    {
      env: { PATH: process.env.PATH ?? '', TASKCLUSTER_CLIENT_ID: workerClientId, TASKCLUSTER_ACCESS_TOKEN: workerClient.accessToken },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const prefix = (chunk: Buffer) => process.stdout.write(chunk.toString().replace(/^(?=.)/gm, '  worker | '));
  worker.stdout!.on('data', prefix);
  worker.stderr!.on('data', prefix);
  const workerExited = new Promise<number | null>((r) => worker.once('exit', (code) => r(code)));

  const taskGroupId = tc.slugid();
  const keys = ['build', 'test', 'docs', 'release', 'lint'];
  const ids: Record<string, string> = Object.fromEntries(keys.map((k) => [k, tc.slugid()]));
  const tasks = plan(ids);
  console.log(`Submitting ${tasks.length} tasks in task group ${taskGroupId}...`);
  for (const t of tasks) {
    await queue.createTask(ids[t.key], {
      taskQueueId: TASK_QUEUE,
      taskGroupId,
      schedulerId: 'demo',
      created: new Date().toJSON(),
      deadline: new Date(Date.now() + 3600_000).toJSON(),
      dependencies: t.deps.map((d) => ids[d]),
      scopes: t.scopes ?? [],
      payload: t.payload,
      metadata: { name: `demo ${t.key}`, description: t.description, owner: 'demo@example.com', source: 'https://example.com/demo' },
    });
  }

  const started = Date.now();
  const statuses: Record<string, any> = {};
  while (Date.now() - started < DEMO_TIMEOUT_MS) {
    for (const t of tasks) statuses[t.key] = (await queue.status(ids[t.key])).status;
    const final = (key: string): boolean => {
      const s = statuses[key].state;
      if (['completed', 'failed', 'exception'].includes(s)) return true;
      // Unscheduled behind a dependency that did not complete: it will never run.
      const t = tasks.find((x) => x.key === key)!;
      return s === 'unscheduled' && t.deps.some((d) => final(d) && statuses[d].state !== 'completed');
    };
    if (tasks.every((t) => final(t.key))) break;
    await new Promise((r) => setTimeout(r, 500));
  }

  // With --exit the service stops right after this report: its URLs would be dead when read.
  const live = !values.exit;
  const results = tasks.map((t) => {
    const s = statuses[t.key];
    const run = s.runs.at(-1);
    const took = run?.started && run?.resolved ? ((new Date(run.resolved).getTime() - new Date(run.started).getTime()) / 1000).toFixed(1) + 's' : '-';
    const artifacts = ['public/logs/live.log', ...((t.payload.artifacts as { name: string }[]) ?? []).map((a) => a.name)];
    return { key: t.key, taskId: ids[t.key], state: s.state as string, expect: t.expect, took, description: t.description, deps: t.deps, artifacts };
  });
  const asPlanned = results.every((r) => r.state === r.expect);
  const lines: string[] = ['', '=== Results ===', '', ...taskLines(rootUrl, results, live)];
  if (hasRoute('getArtifact') && statuses.release?.state === 'completed') {
    try {
      const r = await queue.getArtifact(ids.release, 0, 'public/release.json');
      lines.push('', 'public/release.json of the release task:', (await (await fetch(r.url)).text()).trim());
    } catch (err) {
      lines.push('', `(could not read public/release.json: ${(err as Error).message})`);
    }
  }
  lines.push(
    '',
    ...linkLines(rootUrl, taskGroupId, rootCreds, live),
    '',
    asPlanned ? 'All tasks ended as planned (lint is meant to fail).' : 'Some tasks did not end as planned; see the logs above.',
  );
  console.log(lines.join('\n'));

  const stop = async (alreadySignaled: boolean) => {
    // After Ctrl-C the worker got SIGINT too (same process group) and is shutting down by itself.
    if (alreadySignaled) await Promise.race([workerExited, new Promise((r) => setTimeout(r, 10_000))]);
    if (worker.exitCode === null && worker.signalCode === null) worker.kill('SIGTERM');
    await Promise.race([workerExited, new Promise((r) => setTimeout(r, 30_000))]);
    await app.close();
    await host.close();
    await azurite.stop();
  };
  if (values.exit) {
    await stop(false);
    return asPlanned ? 0 : 1;
  }
  console.log('\nThe service keeps running so the URLs work. Ctrl-C stops it.');
  const interactive = await new Promise<boolean>((resolve) => {
    process.once('SIGINT', () => resolve(true));
    process.once('SIGTERM', () => resolve(false));
  });
  console.log('stopping...');
  await stop(interactive);
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
