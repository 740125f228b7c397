/**
 * `npm run chaos -- --seed N --lifecycles N`: a repeatable chaos run of the faithful storage mode.
 *
 * Two app instances share one in-memory store with Azure's faults on (short and empty pages,
 * ambiguous writes, throttling), their clocks off storage's in opposite directions. Creators and
 * workers at concurrency 16 drive a fixed number of lifecycles (createTask, claimWork,
 * reportCompleted) through the unmodified taskcluster-client, each call on either instance. A
 * subscription collects the task-completed events; the Index indexes each task by a route. Every
 * other task has no route: nobody listens to its events, so its claim expiries are rows of the
 * expiry index rather than messages (shared/tasks/triggers.ts `claim`); both kinds go through the
 * same faults. At the end it prints what a user would notice and exits non-zero on any loss.
 *
 *   --seed N          the faults' seed (default 1)     --lifecycles N   (default 500)
 *   --concurrency N   creators and workers each (16)   --faults "..."   QUEUE_STORAGE_FAULTS without seed/instance
 *   --claim-timeout-s N   how soon a claim whose answer was lost comes back (30)
 */
import crypto from 'node:crypto';
import { parseArgs } from 'node:util';
import { loadConfig } from '../shared/config';
import { startApp } from '../shared/app';
import { startHost } from '../shared/local/host';
import { freePort } from '../shared/local/azurite';
import { memoryLogger } from '../shared/log';
import { generateAccessToken } from '../shared/auth/clients';
import { eventsApiReference } from '../shared/api/routes/events';
import { EXCHANGE_PREFIX, QueueEvent } from '../shared/events/exchanges';
import { FaultyStorage } from '../shared/storage/faults';
import { decodeMessage } from '../shared/storage/port';

/** Faults of a run unless --faults says otherwise: the rates of the documented example. */
const DEFAULT_FAULTS = 'pages=0.3 ambiguous=0.05 throttle=0.02 skew-ms=2000 backoff-ms=20';
/**
 * Creators keep at most this many lifecycles open per worker, so that a lifecycle's time is its
 * own and not a backlog's: one not done 60 s after its creation is stuck, not queued.
 */
const OPEN_PER_WORKER = 2;
/** A lifecycle not done this long after its creation counts as stuck. */
const STUCK_MS = 60_000;
/** A reaper pass every 2 s on each instance. */
const REAPER_SCHEDULE = '*/2 * * * * *';
/** Undelivered events are swept after this (production: 60 s). */
const EVENT_SWEEP_S = 10;
/** A trigger leased by a pass whose answer was lost shows again after this (production: 5 min). */
const TRIGGER_LEASE_S = 15;
/** How long the run waits for the last lifecycles and events after the creators finish. */
const DRAIN_MS = 180_000;

interface Tally {
  created: Map<string, number>;
  claims: Map<string, number>;
  completedCalls: Map<string, number>;
  done: Map<string, number>;
  unexpected5xx: string[];
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seed: { type: 'string', default: '1' },
      lifecycles: { type: 'string', default: '500' },
      concurrency: { type: 'string', default: '16' },
      faults: { type: 'string', default: DEFAULT_FAULTS },
      'claim-timeout-s': { type: 'string', default: '30' },
    },
  });
  const seed = Number(values.seed);
  const lifecycles = Number(values.lifecycles);
  const concurrency = Number(values.concurrency);
  const started = Date.now();

  // Two instances of one deployment on one store, each with its own faults and clock.
  const prefix = 'chaos' + crypto.randomBytes(3).toString('hex');
  const rootAccessToken = generateAccessToken();
  const key = crypto.randomBytes(32).toString('base64');
  const instances = await Promise.all(
    [0, 1].map(async (instance) => {
      const port = await freePort();
      const rootUrl = `http://localhost:${port}`;
      const config = loadConfig({
        QUEUE_STORAGE_CONNECTION: 'memory:chaos',
        QUEUE_STORAGE_FAULTS: `seed=${seed} instance=${instance} ${values.faults}`,
        QUEUE_STORAGE_PREFIX: prefix,
        QUEUE_PUBLIC_URL: rootUrl,
        QUEUE_ROOT_ACCESS_TOKEN: rootAccessToken,
        QUEUE_TOKEN_ENCRYPTION_KEY: key,
        QUEUE_CLAIM_TIMEOUT_S: values['claim-timeout-s'],
        QUEUE_CLAIM_WORK_POLL_S: '2',
        QUEUE_DEADLINE_DELAY_S: '0',
        QUEUE_REAPER_SCHEDULE: REAPER_SCHEDULE,
      });
      // Shorter than production's delays, so that the run shows recovery within its drain.
      const app = await startApp(config, { log: memoryLogger(), tuning: { eventSweepDelayS: EVENT_SWEEP_S, triggerLeaseS: TRIGGER_LEASE_S } });
      const host = await startHost({ app, port, quiet: true, runTimers: true, settings: { QUEUE_REAPER_SCHEDULE: REAPER_SCHEDULE } });
      return { rootUrl, app, host };
    }),
  );
  const tc = (await import('taskcluster-client')).default;
  const credentials = { clientId: 'static/root', accessToken: rootAccessToken };
  const queues = instances.map((i) => new tc.Queue({ rootUrl: i.rootUrl, credentials }));
  const indexes = instances.map((i) => new tc.Index({ rootUrl: i.rootUrl, credentials }));
  const Subscriptions = tc.createClient(eventsApiReference());
  const events = new Subscriptions({ rootUrl: instances[0].rootUrl, credentials });
  const pick = <T>(xs: T[], n: number) => xs[n % xs.length];

  const tag = `s${seed}${crypto.randomBytes(2).toString('hex')}`;
  const sub = await events.createSubscription(`chaos-${tag}`, {
    bindings: [{ exchange: `${EXCHANGE_PREFIX}task-completed`, routingKeyPattern: `route.chaos.${tag}` }],
    expires: new Date(Date.now() + 24 * 3600_000).toJSON(),
  });
  const pollPath = new URL(sub.signedPollUrl).pathname.split('/');
  const subQueueName = decodeURIComponent(pollPath[pollPath.indexOf('messages') - 1]);
  const store = (instances[0].app.svc.storage as FaultyStorage).inner;
  const subQueue = store.queueNamed(subQueueName, 'chaos');

  const t: Tally = { created: new Map(), claims: new Map(), completedCalls: new Map(), done: new Map(), unexpected5xx: [] };
  const note5xx = (what: string, err: any) => {
    if ((err?.statusCode ?? 0) >= 500) t.unexpected5xx.push(`${what}: ${err.statusCode} ${err.code ?? ''} ${String(err.message).split('\n')[0]}`);
  };
  const taskQueues = ['chaos/a', 'chaos/b'];
  /** Tasks with the routes (their events and index entries are checked); the others have none. */
  const routed = new Set<string>();

  // Creators: a fixed number of tasks, each created on one instance and retried by the client.
  let next = 0;
  const creators = Array.from({ length: concurrency }, async (_, c) => {
    for (let n = next++; n < lifecycles; n = next++) {
      while (t.created.size - t.done.size >= OPEN_PER_WORKER * concurrency) await new Promise((r) => setTimeout(r, 20));
      const taskId = tc.slugid();
      const now = Date.now();
      try {
        await pick(queues, n + c).createTask(taskId, {
          taskQueueId: pick(taskQueues, n),
          created: new Date(now).toJSON(),
          deadline: new Date(now + 3600_000).toJSON(),
          routes: n % 2 ? [] : [`chaos.${tag}`, `index.chaos.${tag}.t${taskId.replace(/[^A-Za-z0-9]/g, '')}`],
          payload: {},
          metadata: { name: 'chaos', description: 'chaos run', owner: 'chaos@example.com', source: 'https://example.com/chaos' },
        });
        t.created.set(taskId, now);
        if (n % 2 === 0) routed.add(taskId);
      } catch (err) {
        note5xx('createTask', err);
      }
    }
  });

  // Workers: claim one task at a time on either instance and complete it.
  let creating = true;
  let stop = false;
  const workers = Array.from({ length: concurrency }, async (_, w) => {
    for (let n = 0; !stop; n++) {
      const q = pick(queues, n + w);
      let claimed: any[] = [];
      try {
        claimed = (await q.claimWork(pick(taskQueues, n + w), { workerGroup: 'chaos', workerId: `w${w}`, tasks: 1 })).tasks;
      } catch (err) {
        note5xx('claimWork', err);
      }
      for (const c of claimed) {
        const key = `${c.status.taskId}/${c.runId}`;
        t.claims.set(key, (t.claims.get(key) ?? 0) + 1);
        try {
          await new tc.Queue({ rootUrl: pick(instances, n + w + 1).rootUrl, credentials: c.credentials }).reportCompleted(c.status.taskId, c.runId);
          t.completedCalls.set(c.status.taskId, (t.completedCalls.get(c.status.taskId) ?? 0) + 1);
          if (!t.done.has(c.status.taskId)) t.done.set(c.status.taskId, Date.now());
        } catch (err) {
          note5xx('reportCompleted', err);
        }
      }
      if (!creating && t.done.size >= t.created.size) return;
    }
  });

  await Promise.all(creators);
  creating = false;
  const drainEnd = Date.now() + DRAIN_MS;
  while (t.done.size < t.created.size && Date.now() < drainEnd) await new Promise((r) => setTimeout(r, 500));
  stop = true;
  await Promise.all(workers);

  // Recovery: event sweeps and index deliveries of the last lifecycles.
  await new Promise((r) => setTimeout(r, (EVENT_SWEEP_S + TRIGGER_LEASE_S) * 1000));
  // Events: drain the subscription's queue until it stays empty.
  const seen = new Map<string, number>();
  const completedEvents = new Map<string, number>();
  for (let idle = 0; idle < 10;) {
    const got = await subQueue.receive(32, 60);
    if (!got.length) {
      idle++;
      await new Promise((r) => setTimeout(r, 500));
      continue;
    }
    idle = 0;
    for (const m of got) {
      const e = decodeMessage<QueueEvent>(m);
      if (e) {
        seen.set(e.id, (seen.get(e.id) ?? 0) + 1);
        const taskId = (e.payload.status as { taskId: string }).taskId;
        completedEvents.set(taskId, (completedEvents.get(taskId) ?? 0) + 1);
      }
      await subQueue.delete(m.messageId, m.popReceipt);
    }
  }

  // The final state, as a user sees it.
  const created = [...t.created.keys()];
  const states = await Promise.all(created.map(async (id) => (await queues[1].status(id)).status));
  const lost = states.filter((s) => !s.runs.some((r: any) => r.state === 'completed'));
  const completedTwice = states.filter((s) => s.runs.filter((r: any) => r.state === 'completed').length > 1);
  const claimedTwice = [...t.claims.values()].filter((n) => n > 1).length;
  const stuck = created.filter((id) => (t.done.get(id) ?? Date.now()) - t.created.get(id)! > STUCK_MS);
  const eventsMissing = created.filter((id) => routed.has(id) && t.done.has(id) && !completedEvents.has(id));
  const eventsDuplicated = [...seen.values()].filter((n) => n > 1).length;
  const indexMissing = (
    await Promise.all(
      created
        .filter((id) => routed.has(id) && t.done.has(id))
        .map(async (id) => {
          try {
            await indexes[0].findTask(`chaos.${tag}.t${id.replace(/[^A-Za-z0-9]/g, '')}`);
            return false;
          } catch {
            return true;
          }
        }),
    )
  ).filter(Boolean).length;
  const taken = instances.map((i) => (i.app.svc.storage as FaultyStorage).plan.taken);
  const figures = {
    seed,
    lifecycles: t.created.size,
    'without routes': t.created.size - routed.size,
    completed: t.done.size,
    lost: lost.length,
    'claimed twice': claimedTwice,
    'completed twice': completedTwice.length,
    'events missing': eventsMissing.length,
    'events duplicated': eventsDuplicated,
    'index entries missing': indexMissing,
    'stuck > 60 s': stuck.length,
    'unexpected 5xx': t.unexpected5xx.length,
    'faults taken': taken.map((x) => `pages ${x.pages}, ambiguous ${x.ambiguous}, throttled ${x.throttled}, surfaced ${x.surfaced}`).join(' | '),
    seconds: Math.round((Date.now() - started) / 1000),
  };
  for (const [k, v] of Object.entries(figures)) console.log(`${k.padEnd(22)} ${v}`);
  const problems = instances.flatMap((i) =>
    (i.app.svc.log as ReturnType<typeof memoryLogger>).records.filter((r) => r.level !== 'info' && r.event !== 'request'),
  );
  const byEvent = new Map<string, number>();
  for (const r of problems) byEvent.set(`${r.level} ${r.event}`, (byEvent.get(`${r.level} ${r.event}`) ?? 0) + 1);
  for (const [k, n] of byEvent) console.log(`  log: ${k} x${n}`);
  for (const line of t.unexpected5xx.slice(0, 10)) console.log(`  5xx: ${line}`);
  for (const s of lost.slice(0, 10)) console.log(`  lost: ${s.taskId} ${JSON.stringify(s.runs.map((r: any) => `${r.state}/${r.reasonResolved ?? ''}`))}`);

  await Promise.all(instances.map(async (i) => (await i.app.close(), await i.host.close())));
  const failed = lost.length + claimedTwice + completedTwice.length + eventsMissing.length + t.unexpected5xx.length + indexMissing + stuck.length;
  process.exit(failed > 0 || t.created.size < lifecycles ? 1 : 0);
}

main().catch((err) => {
  console.error(err);
  process.exit(2);
});
