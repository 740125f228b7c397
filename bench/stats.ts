/**
 * Small helpers for figures: percentiles and storage-meter deltas.
 */
import fs from 'node:fs';
import type { StorageMeter } from '../shared/storage/counter';

export type OpCounts = Record<string, number>;
export interface MeterDelta {
  total: number;
  byOp: OpCounts;
}

/** Nearest-rank percentile of unsorted samples. */
export function percentile(samples: number[], p: number): number {
  if (!samples.length) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

export function round(x: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** Starts counting now; `stop()` returns what the meter counted since. */
export function meterWindow(meter: StorageMeter): { stop(): MeterDelta } {
  const before = meter.snapshot();
  return {
    stop() {
      const after = meter.snapshot();
      const byOp: OpCounts = {};
      for (const [op, n] of Object.entries(after.byOp)) {
        const d = n - (before.byOp[op] ?? 0);
        if (d) byOp[op] = d;
      }
      return { total: after.total - before.total, byOp };
    },
  };
}

/** Divides every count by `n` (e.g. per lifecycle), sorted by op name. */
export function perUnit(d: MeterDelta, n: number, digits = 2): MeterDelta {
  const byOp: OpCounts = {};
  for (const op of Object.keys(d.byOp).sort()) byOp[op] = round(d.byOp[op] / n, digits);
  return { total: round(d.total / n, digits), byOp };
}

export function addDeltas(a: MeterDelta, b: MeterDelta): MeterDelta {
  const byOp: OpCounts = { ...a.byOp };
  for (const [op, n] of Object.entries(b.byOp)) byOp[op] = (byOp[op] ?? 0) + n;
  return { total: a.total + b.total, byOp };
}

/** Sample count and p50/p95/max of latencies in ms, rounded to 0.1 ms. */
export function latencySummary(latencies: number[]): { samples: number; p50Ms: number; p95Ms: number; maxMs: number } {
  return {
    samples: latencies.length,
    p50Ms: round(percentile(latencies, 50), 1),
    p95Ms: round(percentile(latencies, 95), 1),
    maxMs: round(Math.max(...latencies), 1),
  };
}

/** CPU ms of another process (utime + stime from /proc; Linux only, else undefined). */
export function processCpuMs(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / CLOCK_TICKS_PER_S;
  } catch {
    return undefined;
  }
}
/** Linux's USER_HZ (clock ticks per second in /proc/<pid>/stat), 100 on every usual kernel. */
const CLOCK_TICKS_PER_S = 100;

export interface CpuMs {
  /** This process: the service alone when the load runs in its own process (bench/load.ts). */
  selfMs: number;
  /** The load generator's process. */
  loadMs?: number;
  /** Azurite's process. */
  childMs?: number;
}

/** CPU ms spent by this process (process.cpuUsage), the load process and Azurite, over a window. */
export function cpuWindow(childPid?: number, loadPid?: number): { stop(): CpuMs } {
  const self0 = process.cpuUsage();
  const child0 = childPid === undefined ? undefined : processCpuMs(childPid);
  const load0 = loadPid === undefined ? undefined : processCpuMs(loadPid);
  const since = (pid: number | undefined, before: number | undefined) => {
    const after = pid === undefined ? undefined : processCpuMs(pid);
    return before !== undefined && after !== undefined ? after - before : undefined;
  };
  return {
    stop() {
      const d = process.cpuUsage(self0);
      return { selfMs: (d.user + d.system) / 1000, childMs: since(childPid, child0), loadMs: since(loadPid, load0) };
    },
  };
}
