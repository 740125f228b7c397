/**
 * One hook flooded with catastrophic triggers: what it does to other hooks (issue 34, item 1).
 * While FLOOD_CALLS triggerHookWithToken calls on one hook each make a `^(a+)+$` pattern use its
 * whole time budget (a new call as each answer comes back), this measures another hook's trigger
 * latency and a 5-second schedule's punctuality, on real time with the reaper run as its timer
 * would. In-memory storage: the figures are the sandbox's, not Azure's.
 *
 *   npm run bench:hook-flood [-- label]
 */
import crypto from 'node:crypto';
import os from 'node:os';
import { loadConfig } from '../shared/config';
import { startApp } from '../shared/app';
import { startHost } from '../shared/local/host';
import { freePort } from '../shared/local/ports';
import { generateAccessToken } from '../shared/auth/clients';
import { benchLogger } from './harness';
import { sleep, taskcluster } from './client';
import { latencySummary } from './stats';

/** Concurrent calls of the flood, as in the issue. */
const FLOOD_CALLS = 20;
/** How long the flood lasts: six ticks of the schedule. */
const FLOOD_MS = 30_000;
/** The schedule's period (a 6-field cron pattern with seconds). */
const TICK_S = 5;
/** The reaper's timer period (the tests' QUEUE_REAPER_SCHEDULE); a tick is fired at the first pass after it. */
const REAPER_MS = 1_000;
/** A tick fired this long after its time is late: one reaper period plus the poll's own lag. */
const ON_TIME_MS = REAPER_MS + 500;
/** The other hook is triggered this often, one call at a time. */
const OTHER_EVERY_MS = 250;
/** Client timeout: above the longest wait the flood caused on the FIFO pool (~40 s). */
const CALL_TIMEOUT_MS = 120_000;
/** How often the schedule's last fire is read. */
const POLL_MS = 100;
/** A refused flood call (409) waits this long before the next, so the flood stays ~FLOOD_CALLS calls and not a hot loop of 409s. */
const REFUSED_PAUSE_MS = 100;

async function main(): Promise<void> {
  const label = process.argv[2] ?? 'this build';
  const [load1, load5] = os.loadavg();
  const port = await freePort();
  const rootUrl = `http://localhost:${port}`;
  const rootAccessToken = generateAccessToken();
  const config = loadConfig({
    QUEUE_STORAGE_CONNECTION: 'memory:bench',
    QUEUE_STORAGE_PREFIX: 'b' + crypto.randomBytes(3).toString('hex'),
    QUEUE_PUBLIC_URL: rootUrl,
    QUEUE_ROOT_ACCESS_TOKEN: rootAccessToken,
    QUEUE_TOKEN_ENCRYPTION_KEY: crypto.randomBytes(32).toString('base64'),
  });
  const app = await startApp(config, { log: benchLogger('hook-flood') });
  const host = await startHost({ app, port, quiet: true });
  const tc = await taskcluster();
  const root = { clientId: config.rootClientId, accessToken: rootAccessToken };
  // No retries, and a timeout longer than any wait the flood causes: each call's latency is its own.
  const hooks = new tc.Hooks({ rootUrl, credentials: root, retries: 0, timeout: CALL_TIMEOUT_MS });
  const anonymous = new tc.Hooks({ rootUrl, retries: 0, timeout: CALL_TIMEOUT_MS });
  await new tc.Auth({ rootUrl, credentials: root, retries: 0 }).createRole('hook-id:flood/*', {
    description: 'bench hooks',
    scopes: ['queue:create-task:*', 'queue:scheduler-id:*'],
  });
  const task = {
    taskQueueId: 'bench/hook-flood',
    payload: {},
    metadata: { name: 'hook task', description: 'made by a hook', owner: 'bench@example.com', source: 'https://example.com/bench' },
  };
  const meta = { name: 'flood', description: 'bench', owner: 'bench@example.com' };
  await hooks.createHook('flood', 'a', { metadata: meta, task, triggerSchema: { type: 'object', properties: { s: { type: 'string', pattern: '^(a+)+$' } } } });
  await hooks.createHook('flood', 'b', { metadata: meta, task });
  await hooks.createHook('flood', 'sched', { metadata: meta, task, schedule: [`*/${TICK_S} * * * * *`] });
  const token = (await hooks.getTriggerToken('flood', 'a')).token;
  await hooks.triggerHook('flood', 'b', {}); // warm

  // The flood and the other hook stop at `stop`; the reaper and the poller at `done`, once the
  // flood's last calls were answered (on the FIFO pool a tick's fire waits behind them).
  let stop = false;
  let done = false;
  // The reaper, as its timer runs it: one pass at a time.
  const reaper = (async () => {
    while (!done) {
      const started = Date.now();
      await host.runTimer('reaper').catch(() => undefined);
      await sleep(Math.max(0, REAPER_MS - (Date.now() - started)));
    }
  })();
  const started = Date.now();
  const flood = { overBudget: 0, refused: 0, other: 0 };
  const flooders = Array.from({ length: FLOOD_CALLS }, async () => {
    while (!stop) {
      try {
        await anonymous.triggerHookWithToken('flood', 'a', token, { s: 'a'.repeat(40) + '!' });
        flood.other++;
      } catch (e: any) {
        if (e.statusCode === 409) {
          flood.refused++;
          await sleep(REFUSED_PAUSE_MS);
        } else if (e.statusCode === 400) flood.overBudget++;
        else flood.other++;
      }
    }
  });
  const otherLatencies: number[] = [];
  let otherErrors = 0;
  const other = (async () => {
    while (!stop) {
      const t = performance.now();
      await hooks.triggerHook('flood', 'b', {}).catch(() => otherErrors++);
      otherLatencies.push(performance.now() - t);
      await sleep(OTHER_EVERY_MS);
    }
  })();
  // Each new fire of the schedule: how long after its tick it was seen.
  const lateness: number[] = [];
  let lastTaskId: string | undefined;
  const poller = (async () => {
    while (!done) {
      const fire = (await hooks.getHookStatus('flood', 'sched')).lastFire;
      if (fire.result === 'success' && fire.taskId !== lastTaskId) {
        lastTaskId = fire.taskId;
        const tick = new Date(fire.time).getTime();
        if (tick >= started && tick < started + FLOOD_MS) lateness.push(Date.now() - tick);
      }
      await sleep(POLL_MS);
    }
  })();
  await sleep(FLOOD_MS);
  stop = true;
  await Promise.all([other, ...flooders]);
  await sleep(2 * REAPER_MS);
  done = true;
  await Promise.all([reaper, poller]);

  const ticks = Math.floor(FLOOD_MS / (TICK_S * 1000));
  const otherSummary = latencySummary(otherLatencies);
  const late = latencySummary(lateness);
  console.log(
    JSON.stringify(
      {
        label,
        loadAverage: { at1min: load1, at5min: load5, cores: os.cpus().length },
        floodCalls: FLOOD_CALLS,
        floodMs: FLOOD_MS,
        flood,
        otherHookTrigger: { calls: otherSummary.samples, errors: otherErrors, p50Ms: Math.round(otherSummary.p50Ms), maxMs: Math.round(otherSummary.maxMs) },
        schedule: {
          periodS: TICK_S,
          ticksInFlood: ticks,
          fired: lateness.length,
          onTime: lateness.filter((ms) => ms <= ON_TIME_MS).length,
          latenessP50Ms: Math.round(late.p50Ms),
          latenessMaxMs: Math.round(late.maxMs),
        },
      },
      null,
      2,
    ),
  );
  await app.close();
  await host.close();
  await app.svc.sandbox.close();
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
