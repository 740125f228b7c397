/**
 * What an idle `npm start` prints: the local host on in-memory storage, its reaper run by hand as
 * a minute of its schedule would (every 5 s), on a clock the test moves. No real time passes.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { start } from '../../shared/local/main';
import { freePort } from '../../shared/local/azurite';
import type { LogSink } from '../../shared/local/human-log';
import { taskDef, slugid } from '../helpers/service';

/** npm start's reaper schedule (`*\/5 * * * * *`): passes in a minute. */
const PASSES_PER_MINUTE = 12;
const PASS_INTERVAL_MS = 5_000;

let root: string;
beforeEach(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'idle-log-'));
});
afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

/** Collects the lines and the latest status line. */
function capture(): LogSink & { lines: string[]; last: string } {
  const c = { lines: [] as string[], last: '', line: (t: string) => void c.lines.push(t), status: (t: string) => void (c.last = t) };
  return c;
}

/** Starts npm start's service on in-memory storage, runs a minute of reaper passes, and returns what it printed. */
async function idleMinute(argv: string[], act?: (rootUrl: string, accessToken: string) => Promise<void>) {
  const out = capture();
  // Starts now (Hawk checks request times against this clock), then moves only when the test says.
  let t = Date.now();
  const s = await start({
    argv,
    env: { PORT: String(await freePort()), QUEUE_STORAGE_CONNECTION: 'memory:', QUEUE_LOCAL_ANONYMOUS_ROLE: 'false' },
    root,
    out,
    now: () => new Date(t),
    runTimers: false,
  });
  try {
    await act?.(s.host.url, s.config.rootAccessToken);
    for (let i = 0; i < PASSES_PER_MINUTE; i++) {
      t += PASS_INTERVAL_MS;
      await s.host.runTimer('reaper');
    }
  } finally {
    await s.stop();
  }
  return { ...out, end: new Date(t) };
}

test('log line count over a minute of idle npm start: none (it was one JSON line per reaper pass)', async () => {
  const human = await idleMinute([]);
  expect(human.lines).toEqual([]);
  expect(human.last).toBe(`0 requests · 0 transitions · 0 warnings · 0 errors · reaper ${human.end.toISOString().slice(11, 19)}`);

  // `--json` keeps what npm start printed before: a reaper-pass line every 5 s.
  const json = await idleMinute(['--json']);
  expect(json.lines.map((l) => JSON.parse(l).event)).toEqual(Array(PASSES_PER_MINUTE).fill('reaper-pass'));
});

test('a task created on idle npm start: a line per transition, none for its request or the reaper', async () => {
  const taskId = slugid();
  const out = await idleMinute([], async (rootUrl, accessToken) => {
    const tc = (await import('taskcluster-client')).default;
    const queue = new tc.Queue({ rootUrl, credentials: { clientId: 'static/root', accessToken } });
    await queue.createTask(taskId, taskDef('proj/idle', { created: new Date().toJSON(), deadline: new Date(Date.now() + 3600_000).toJSON() }));
  });
  expect(out.lines.map((l) => l.replace(/^\d\d:\d\d:\d\d /, ''))).toEqual([
    `info  task ${taskId}: unscheduled (created) proj/idle`,
    `info  task ${taskId} run 0: pending (scheduled) proj/idle`,
  ]);
  expect(out.last).toMatch(/^1 requests · 2 transitions · 0 warnings · 0 errors · reaper /);
});

test('QUEUE_LOG_FORMAT takes human or json; anything else stops start-up naming it', async () => {
  const err = await start({ env: { PORT: String(await freePort()), QUEUE_STORAGE_CONNECTION: 'memory:', QUEUE_LOG_FORMAT: 'xml' }, root }).catch((e) => e);
  expect(err.message).toBe("QUEUE_LOG_FORMAT must be human or json, got 'xml'");
});
