/**
 * The cost model: dollars per million lifecycles and per idle worker-month on Azure, from what the
 * bench measured (storage calls by op, the service's CPU per lifecycle, requests per lifecycle) and
 * the list prices in bench/prices.ts. Pure functions: known inputs give known dollars.
 */
import { AZURE_PRICES, SECONDS_PER_MONTH } from './prices';
import { TABLES, EVENT_TABLES } from '../shared/storage/port';
import type { OpCounts } from './stats';
import type { Row } from './report';

export type Prices = { readonly [K in keyof typeof AZURE_PRICES]: number };
export type TxKind = 'table' | 'queue' | 'blobWrite' | 'blobRead';

const TABLE_LABELS = new Set<string>([...TABLES, ...EVENT_TABLES]);
/** Blob operations Azure bills as writes; the rest (reads, properties, exists) as reads. */
const BLOB_WRITES = new Set(['putBlock', 'commit', 'setHeaders', 'upload', 'delete']);

/** The billing kind of a metered op (`<label>.<op>`): table labels are table names, `artifacts` is the blob container, the rest are queues. */
export function txKind(op: string): TxKind {
  const dot = op.indexOf('.');
  const label = dot < 0 ? op : op.slice(0, dot);
  if (TABLE_LABELS.has(label)) return 'table';
  if (label === 'artifacts') return BLOB_WRITES.has(op.slice(dot + 1)) ? 'blobWrite' : 'blobRead';
  return 'queue';
}

export function byKind(ops: OpCounts): Record<TxKind, number> {
  const out: Record<TxKind, number> = { table: 0, queue: 0, blobWrite: 0, blobRead: 0 };
  for (const [op, n] of Object.entries(ops)) out[txKind(op)] += n;
  return out;
}

/** Dollars for `counts` transactions of each kind. */
export function storageDollars(counts: Record<TxKind, number>, p: Prices = AZURE_PRICES): Record<TxKind, number> {
  return {
    table: (counts.table * p.tableTxPer10k) / 10_000,
    queue: (counts.queue * p.queueOpPer10k) / 10_000,
    blobWrite: (counts.blobWrite * p.blobWritePer10k) / 10_000,
    blobRead: (counts.blobRead * p.blobReadPer10k) / 10_000,
  };
}

export interface LifecycleCost {
  /** Storage transactions per lifecycle by kind. */
  txPerLifecycle: Record<TxKind, number>;
  storage: Record<TxKind, number>;
  /** Flex GB-s per million lifecycles: instance memory × the instance's execution time (its CPU time when busy). */
  gbS: number;
  compute: number;
  executions: number;
  total: number;
}

/**
 * Per million lifecycles. `opsPerLifecycle` is the measured storage mix (foreground and reaper);
 * `cpuMsPerLifecycle` the service's CPU; `requestsPerLifecycle` the HTTP calls (each one Flex
 * execution). A loaded instance is executing all the time, so its billed time is its CPU time;
 * the monthly free grant is left out (it matters only below a few million lifecycles a month).
 */
export function costPerMillionLifecycles(
  m: { opsPerLifecycle: OpCounts; cpuMsPerLifecycle: number; requestsPerLifecycle: number },
  p: Prices = AZURE_PRICES,
): LifecycleCost {
  const million = 1_000_000;
  const txPerLifecycle = byKind(m.opsPerLifecycle);
  const counts = Object.fromEntries(Object.entries(txPerLifecycle).map(([k, v]) => [k, v * million])) as Record<TxKind, number>;
  const storage = storageDollars(counts, p);
  const gbS = (p.flexInstanceMb / 1024) * (m.cpuMsPerLifecycle / 1000) * million;
  const compute = gbS * p.flexPerGbS;
  const executions = m.requestsPerLifecycle * p.flexPerMillionExecutions;
  const total = Object.values(storage).reduce((a, b) => a + b, 0) + compute + executions;
  return { txPerLifecycle, storage, gbS, compute, executions, total };
}

export interface IdleCost {
  /** Storage dollars per waiting worker per month. */
  storagePerWorker: number;
  /** Flex executions per waiting worker per month (claimWork: one per long poll; poll URLs: none). */
  executionsPerWorker: number;
  /** Flex dollars per waiting worker per month for those executions. */
  executionDollarsPerWorker: number;
  /**
   * Flex dollars per month for the instance kept executing by waiting long polls: billed once per
   * instance (its waiting requests share it), whatever the number of workers on it. 0 for poll URLs.
   */
  instancePerMonth: number;
}

/**
 * Idle workers per month. claimWork: `opsPerWorkerS` is the measured storage ops per second one more
 * waiting worker adds, and each long poll of `pollS` seconds is one execution that keeps an instance
 * executing. Poll URLs: the worker GETs each of its `queues` storage queues once per `passS` seconds
 * straight from Azure (queue ops, no Functions execution).
 */
export function idleWorkerMonth(
  w: { mode: 'claimWork'; opsPerWorkerS: OpCounts; pollS: number } | { mode: 'pollUrls'; queues: number; passS: number },
  p: Prices = AZURE_PRICES,
): IdleCost {
  if (w.mode === 'pollUrls') {
    const gets = (w.queues / w.passS) * SECONDS_PER_MONTH;
    return { storagePerWorker: (gets * p.queueOpPer10k) / 10_000, executionsPerWorker: 0, executionDollarsPerWorker: 0, instancePerMonth: 0 };
  }
  const perS = byKind(w.opsPerWorkerS);
  const month = Object.fromEntries(Object.entries(perS).map(([k, v]) => [k, v * SECONDS_PER_MONTH])) as Record<TxKind, number>;
  const storagePerWorker = Object.values(storageDollars(month, p)).reduce((a, b) => a + b, 0);
  const executionsPerWorker = SECONDS_PER_MONTH / w.pollS;
  return {
    storagePerWorker,
    executionsPerWorker,
    executionDollarsPerWorker: (executionsPerWorker / 1_000_000) * p.flexPerMillionExecutions,
    instancePerMonth: (p.flexInstanceMb / 1024) * SECONDS_PER_MONTH * p.flexPerGbS,
  };
}

const usd = (x: number, digits = 2) => `$${x.toFixed(digits)}`;
const fmt = (x: number) => (Math.abs(x) >= 100 ? x.toFixed(0) : x.toFixed(2));

export function costRows(c: LifecycleCost): Row[] {
  const t = c.txPerLifecycle;
  return [
    { metric: `table transactions (${fmt(t.table)}/lifecycle)`, value: usd(c.storage.table) },
    { metric: `queue operations (${fmt(t.queue)}/lifecycle)`, value: usd(c.storage.queue) },
    { metric: `blob operations (${fmt(t.blobWrite)} write, ${fmt(t.blobRead)} read /lifecycle)`, value: usd(c.storage.blobWrite + c.storage.blobRead) },
    { metric: `Flex execution time (${fmt(c.gbS)} GB-s)`, value: usd(c.compute) },
    { metric: 'Flex executions (requests)', value: usd(c.executions) },
    { metric: 'total per million lifecycles', value: usd(c.total) },
  ];
}

export function idleRows(label: string, c: IdleCost, workers: number[]): Row[] {
  const perWorker = c.storagePerWorker + c.executionDollarsPerWorker;
  return [
    { metric: `${label}: storage + executions per waiting worker-month`, value: usd(perWorker, 3) },
    ...(c.instancePerMonth ? [{ metric: `${label}: one instance kept executing by waiting long polls, per month`, value: usd(c.instancePerMonth) }] : []),
    ...workers.map((n) => ({ metric: `${label}: ${n} idle worker(s) for a month`, value: usd(c.instancePerMonth + n * perWorker) })),
  ];
}
