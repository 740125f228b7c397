/**
 * The scale model: from the storage calls one phase measured per table partition and per queue,
 * the lifecycles/s at which the first partition, queue and account would reach its Azure limit,
 * with one data account and with several (shared/storage/accounts.ts decides where each lands).
 */
import { tableHome, queueHome } from '../shared/storage/accounts';
import { TRIGGER_QUEUES, TRIGGER_SHARDS, type TableName } from '../shared/storage/port';
import { triggerShardNames } from '../shared/storage/trigger-shards';
import { EXPIRY_BUCKETS, TRIGGER_LANE } from '../shared/tasks/expiry';
import { round } from './stats';
import type { Row } from './report';

/** Azure Storage scalability targets (azure-conventions.md): per table partition, per queue, per account. */
export const AZURE_LIMITS = { partitionEntitiesPerS: 2_000, queueMessagesPerS: 2_000, accountTxPerS: 20_000 };
/**
 * Below half a call per lifecycle a partition or queue is touched by a few tasks only (e.g. one
 * day's expiry shard of one run), so its rate barely grows with throughput; it is not listed.
 */
const SHARED_MIN_PER_LIFECYCLE = 0.5;

export interface Hotspot {
  where: string;
  /** Entities (tables) or messages (queues) per lifecycle. */
  perLifecycle: number;
  kind: 'partition' | 'queue';
  /** `task-queue`: one per task queue (more task queues add more); `deployment`: one for everything; `spread`: one per account. */
  scope: 'task-queue' | 'deployment' | 'spread';
  /** Lifecycles/s at which it reaches its limit with one account. */
  limitOne: number;
  limitMany: number;
}

export interface ScaleModel {
  lifecycles: number;
  /** The storage prefix (names the trigger queues). */
  prefix: string;
  accounts: number;
  pendingShards: number;
  /** Each trigger queue's messages per lifecycle: in all its shards, and in the busiest. */
  triggers: { queue: string; perLifecycle: number; busiestPerLifecycle: number }[];
  txPerLifecycle: number;
  /** Transactions per lifecycle that always land on the first account (global tables, untracked calls). */
  globalTxPerLifecycle: number;
  hotspots: Hotspot[];
  first: { one: { what: string; perSecond: number }; many: { what: string; perSecond: number } };
}

/**
 * `partitions` as StorageMeter tracks them; `taskQueueMarks` are substrings that name the phase's
 * task queue in a key (its encoded id, its pending queues' base name); `prefix` the storage prefix.
 */
export function scaleModel(input: {
  lifecycles: number;
  totalTx: number;
  partitions: Map<string, { calls: number; entities: number }>;
  taskQueueMarks: string[];
  prefix: string;
  accounts: number;
  /** Pending storage queues per priority of the phase's task queue (each one is a separate queue below); default 1. */
  pendingShards?: number;
}): ScaleModel {
  const n = Math.max(1, input.lifecycles);
  const shardOf = new Map<string, string>(TRIGGER_QUEUES.flatMap((q) => triggerShardNames(input.prefix, q).map((name) => [name, q] as const)));
  const triggers = new Map<string, { perLifecycle: number; busiestPerLifecycle: number }>();
  let spreadTx = 0;
  const hotspots: Hotspot[] = [];
  for (const [key, t] of laneSpread(input.partitions, input.prefix)) {
    const [kind, name, ...rest] = key.split(' ');
    const pk = rest.join(' ');
    const isQueue = kind === 'queue';
    const home = isQueue ? queueHome(name) : tableHome(stripPrefix(name, input.prefix) as TableName, pk);
    const trigger = isQueue ? shardOf.get(name) : undefined;
    if (trigger) {
      const t0 = triggers.get(trigger) ?? { perLifecycle: 0, busiestPerLifecycle: 0 };
      triggers.set(trigger, { perLifecycle: t0.perLifecycle + t.calls / n, busiestPerLifecycle: Math.max(t0.busiestPerLifecycle, t.calls / n) });
    }
    const spread = !!trigger || home.kind === 'task';
    if (spread || home.kind === 'queue') spreadTx += t.calls;
    const perLifecycle = (isQueue ? t.calls : t.entities) / n;
    // A task's or group's own partition only sees that task's calls, whatever the throughput.
    if (home.kind === 'task' || perLifecycle < SHARED_MIN_PER_LIFECYCLE || pk === '(range)') continue;
    const limit = isQueue ? AZURE_LIMITS.queueMessagesPerS : AZURE_LIMITS.partitionEntitiesPerS;
    const scope = spread ? 'spread' : input.taskQueueMarks.some((m) => key.includes(m)) ? 'task-queue' : 'deployment';
    hotspots.push({
      where: isQueue ? name : `${name} ${pk}`,
      perLifecycle: round(perLifecycle),
      kind: isQueue ? 'queue' : 'partition',
      scope,
      limitOne: Math.floor(limit / perLifecycle),
      limitMany: Math.floor((limit * (scope === 'spread' ? input.accounts : 1)) / perLifecycle),
    });
  }
  hotspots.sort((a, b) => a.limitOne - b.limitOne);
  const txPerLifecycle = input.totalTx / n;
  // Untracked calls (blobs) are counted on the first account: the conservative side.
  const globalTxPerLifecycle = (input.totalTx - spreadTx) / n;
  const accountLimit = (accounts: number) =>
    Math.floor(AZURE_LIMITS.accountTxPerS / (globalTxPerLifecycle + (txPerLifecycle - globalTxPerLifecycle) / accounts));
  // A deployment-wide or spread hot spot limits everyone; a task-queue one only that task queue.
  const firstOf = (accounts: number) => {
    const candidates = [
      {
        what: `account (${round(accounts === 1 ? txPerLifecycle : globalTxPerLifecycle + (txPerLifecycle - globalTxPerLifecycle) / accounts)} tx/lifecycle on the busiest)`,
        perSecond: accountLimit(accounts),
      },
      ...hotspots
        .filter((h) => h.scope !== 'task-queue')
        .map((h) => ({ what: `${h.kind} ${h.where} (${h.perLifecycle}/lifecycle)`, perSecond: accounts === 1 ? h.limitOne : h.limitMany })),
    ];
    return candidates.sort((a, b) => a.perSecond - b.perSecond)[0];
  };
  return {
    lifecycles: input.lifecycles,
    prefix: input.prefix,
    accounts: input.accounts,
    pendingShards: input.pendingShards ?? 1,
    triggers: [...triggers].map(([queue, t]) => ({ queue, perLifecycle: round(t.perLifecycle), busiestPerLifecycle: round(t.busiestPerLifecycle) })),
    txPerLifecycle: round(txPerLifecycle),
    globalTxPerLifecycle: round(globalTxPerLifecycle),
    hotspots,
    first: { one: firstOf(1), many: firstOf(input.accounts) },
  };
}

/** A triggers' lane partition of the expiry index: `t~<day>~<bucket>`. */
const LANE_PARTITION = new RegExp(`^${TRIGGER_LANE}([^~]+)~\\d+$`);

/**
 * The triggers' lane of each day as its EXPIRY_BUCKETS buckets carry it under sustained load: each
 * an even share of the day's rows. An instance fills one bucket for up to a transaction's worth of
 * rows before its turn moves on (shared/tasks/expiry.ts `laneBucket`), so a short run leaves most of
 * them in one or two buckets, which says more about the run's length than about the partition.
 */
function laneSpread(partitions: Map<string, { calls: number; entities: number }>, prefix: string): [string, { calls: number; entities: number }][] {
  const out: [string, { calls: number; entities: number }][] = [];
  const days = new Map<string, { calls: number; entities: number }>();
  for (const [key, t] of partitions) {
    const [kind, name, ...rest] = key.split(' ');
    const day = kind === 'table' && stripPrefix(name, prefix) === 'Expiry' ? LANE_PARTITION.exec(rest.join(' '))?.[1] : undefined;
    if (!day) {
      out.push([key, t]);
      continue;
    }
    const lane = `${kind} ${name} ${TRIGGER_LANE}${day}~*`;
    const sum = days.get(lane) ?? { calls: 0, entities: 0 };
    days.set(lane, { calls: sum.calls + t.calls, entities: sum.entities + t.entities });
  }
  for (const [lane, t] of days) out.push([lane, { calls: t.calls / EXPIRY_BUCKETS, entities: t.entities / EXPIRY_BUCKETS }]);
  return out;
}

function stripPrefix(tableName: string, prefix: string): string {
  return tableName.startsWith(prefix) ? tableName.slice(prefix.length) : tableName;
}

/** The task queue's pending queues (a queue hot spot of task-queue scope): how far its busiest shard carries it. */
function pendingRows(m: ScaleModel): Row[] {
  const shards = m.hotspots.filter((h) => h.kind === 'queue' && h.scope === 'task-queue');
  if (!shards.length) return [];
  const busiest = shards.reduce((a, b) => (a.limitOne <= b.limitOne ? a : b));
  const total = shards.reduce((n, h) => n + h.perLifecycle, 0);
  return [
    {
      metric: `one task queue's pending queues, ${m.pendingShards} shard(s): busiest shard (${busiest.perLifecycle} of ${round(total)} msg/lifecycle)`,
      value: `${busiest.limitOne} lifecycles/s`,
      target: `1 shard: ${Math.floor(AZURE_LIMITS.queueMessagesPerS / total)}`,
    },
  ];
}

/** The trigger queues (spread over TRIGGER_SHARDS storage queues each): how far the busiest shard carries one account. */
function triggerRows(m: ScaleModel): Row[] {
  return m.triggers
    .filter((t) => t.perLifecycle >= SHARED_MIN_PER_LIFECYCLE)
    .map((t) => ({
      metric: `trigger queue ${t.queue}, ${TRIGGER_SHARDS} shard(s): busiest (${t.busiestPerLifecycle} of ${t.perLifecycle} msg/lifecycle), 1 account`,
      value: `${Math.floor(AZURE_LIMITS.queueMessagesPerS / t.busiestPerLifecycle)} lifecycles/s`,
      target: `1 queue: ${Math.floor(AZURE_LIMITS.queueMessagesPerS / t.perLifecycle)}`,
    }));
}

/** A task queue's operator index partition: `Indexes q~<id>` (bucket 0) or `Indexes q~<id>~<b>`. */
const INDEX_PARTITION = /Indexes q~[^~]+(~\d+)?$/;

/** The task queue's index partitions (hash buckets, as many as its pending shards): how far its busiest carries it. */
function indexRows(m: ScaleModel): Row[] {
  const buckets = m.hotspots.filter((h) => h.kind === 'partition' && h.scope === 'task-queue' && INDEX_PARTITION.test(h.where));
  if (!buckets.length) return [];
  const busiest = buckets.reduce((a, b) => (a.limitOne <= b.limitOne ? a : b));
  const total = buckets.reduce((n, h) => n + h.perLifecycle, 0);
  return [
    {
      metric: `one task queue's index partitions, ${buckets.length} bucket(s): busiest (${busiest.perLifecycle} of ${round(total)} entities/lifecycle)`,
      value: `${busiest.limitOne} lifecycles/s`,
      target: `1 bucket: ${Math.floor(AZURE_LIMITS.partitionEntitiesPerS / total)}`,
    },
  ];
}

/** Rows of the model for the report; `measuredPerSecond` turns per-lifecycle figures into rates at the measured throughput. */
export function scaleRows(m: ScaleModel, measuredPerSecond: number): { model: Row[]; rates: Row[] } {
  const many = `${m.accounts} accounts`;
  const busiest = (accounts: number) =>
    round(accounts === 1 ? m.txPerLifecycle : m.globalTxPerLifecycle + (m.txPerLifecycle - m.globalTxPerLifecycle) / accounts);
  const model: Row[] = [
    { metric: 'storage tx per lifecycle (all accounts)', value: String(m.txPerLifecycle) },
    { metric: 'pending storage queues per priority of the task queue (QUEUE_PENDING_SHARDS)', value: String(m.pendingShards) },
    { metric: 'of which always on the first account', value: String(m.globalTxPerLifecycle) },
    { metric: `account limit (${AZURE_LIMITS.accountTxPerS} tx/s), 1 account`, value: `${Math.floor(AZURE_LIMITS.accountTxPerS / busiest(1))} lifecycles/s` },
    {
      metric: `account limit, ${many} (busiest: ${busiest(m.accounts)} tx/lifecycle)`,
      value: `${Math.floor(AZURE_LIMITS.accountTxPerS / busiest(m.accounts))} lifecycles/s`,
    },
    ...(['deployment', 'spread', 'task-queue'] as const).flatMap((scope) => {
      const h = m.hotspots.find((x) => x.scope === scope);
      if (!h) return [];
      const label = scope === 'task-queue' ? 'one task queue' : scope === 'spread' ? 'per account' : 'deployment-wide';
      return [{ metric: `first ${h.kind}, ${label}: ${h.where}`, value: `${h.limitOne} / ${h.limitMany} lifecycles/s`, target: `1 / ${m.accounts} accounts` }];
    }),
    ...pendingRows(m),
    ...triggerRows(m),
    ...indexRows(m),
    { metric: 'first limit reached, 1 account', value: `${m.first.one.perSecond} lifecycles/s`, target: m.first.one.what },
    { metric: `first limit reached, ${many}`, value: `${m.first.many.perSecond} lifecycles/s`, target: m.first.many.what },
  ];
  const rates: Row[] = m.hotspots.map((h) => ({
    metric: `${h.kind} ${h.where} [${h.scope}]`,
    value: `${h.perLifecycle}/lc, ${round(h.perLifecycle * measuredPerSecond, 1)}/s`,
    target: `limit at ${h.limitOne} lc/s`,
  }));
  return { model, rates };
}

/**
 * The busiest table partitions and queues of a measured window, by calls per second (tables also
 * entities per second, what Azure's partition limit counts), against their Azure limit.
 */
export function busiestRates(partitions: Map<string, { calls: number; entities: number }>, seconds: number, top: number): Row[] {
  const s = Math.max(0.001, seconds);
  return [...partitions.entries()]
    .sort((a, b) => b[1].entities - a[1].entities)
    .slice(0, top)
    .map(([key, t]) => {
      const isQueue = key.startsWith('queue ');
      const limit = isQueue ? AZURE_LIMITS.queueMessagesPerS : AZURE_LIMITS.partitionEntitiesPerS;
      const perS = t.entities / s;
      return {
        metric: key,
        value: isQueue ? `${round(perS, 1)} calls/s` : `${round(t.calls / s, 1)} calls/s, ${round(perS, 1)} entities/s`,
        target: `${round((perS / limit) * 100, 1)}% of ${limit}/s`,
      };
    });
}
