/**
 * Preloads finished tasks straight through the storage port, laid out exactly as the service
 * leaves a completed task (task row with its history, operator index rows, expiry index row, group
 * membership), so a later phase measures the service on a store that already holds them. Rows that
 * share a partition (indexes, expiry day, group) go 100 to a transaction; task rows are one call
 * each, in parallel.
 */
import type { Services } from '../shared/services';
import { Entity, MAX_TRANSACTION_ACTIONS, TableAction, TableName } from '../shared/storage/storage';
import { encodeTask, TaskRecord } from '../shared/tasks/model';
import { createdEntry, historyRowsOf, holdHistory, numberHistory, resolvedEntry } from '../shared/ops/history';
import { indexOps } from '../shared/ops/indexes';
import { ExpiryIndex } from '../shared/tasks/expiry';
import { GROUP_PREFIX, groupRowKey } from '../shared/tasks/groups';
import { mapLimit } from '../shared/limit';
import { Instance, newTaskId } from './harness';
import { meterWindow, round } from './stats';
import { closedLoop, ThroughputResult } from './phases';
import { runReaper } from '../shared/reaper/reaper';
import { stalePending } from '../shared/ops/indexes';
import { MAX_DEQUEUE, StorageTimeout } from '../shared/storage/storage';
import { rawCeiling, RawResult } from './raw';

/** Tasks built and written per round (bounds the memory the preload itself holds). */
const CHUNK = 1000;
/** Parallel storage calls while preloading (more only queues up at Azurite and risks call deadlines). */
const CONCURRENCY = 12;
/** A preload write that passes the storage deadline is made this many times in all before the phase fails. */
const PRELOAD_ATTEMPTS = 4;
/** One task group per this many tasks, as a scheduler's decision task would make. */
const GROUP_SIZE = 100;

function finishedTask(taskQueueId: string, taskGroupId: string, at: number): TaskRecord {
  const iso = (ms: number) => new Date(ms).toJSON();
  const [provisionerId, workerType] = taskQueueId.split('/');
  return {
    taskId: newTaskId(),
    definition: {
      provisionerId,
      workerType,
      taskQueueId,
      schedulerId: '-',
      projectId: 'none',
      taskGroupId,
      dependencies: [],
      requires: 'all-completed',
      routes: [],
      priority: 'lowest',
      retries: 5,
      created: iso(at),
      deadline: iso(at + 3600_000),
      expires: iso(at + 366 * 24 * 3600_000),
      scopes: [],
      payload: { command: ['echo', 'hello'] },
      metadata: { name: 'preloaded task', description: 'a finished task', owner: 'bench@example.com', source: 'https://example.com/bench' },
      tags: {},
      extra: {},
    },
    runs: [
      {
        runId: 0,
        state: 'completed',
        reasonCreated: 'scheduled',
        reasonResolved: 'completed',
        workerGroup: 'bench',
        workerId: 'w',
        takenUntil: iso(at + 1_200_000),
        scheduled: iso(at),
        started: iso(at + 5),
        resolved: iso(at + 10),
      },
    ],
    retriesLeft: 5,
    takenUntil: '',
    hasDependents: false,
    dependentsNotified: -1,
  };
}

/** Groups `rows` by partition into transactions of at most 100 upserts. */
function batches(table: TableName, rows: Entity[]): { table: TableName; actions: TableAction[] }[] {
  const byPk = new Map<string, Entity[]>();
  for (const r of rows) byPk.set(r.partitionKey, [...(byPk.get(r.partitionKey) ?? []), r]);
  const out: { table: TableName; actions: TableAction[] }[] = [];
  for (const list of byPk.values()) {
    for (let i = 0; i < list.length; i += MAX_TRANSACTION_ACTIONS) {
      out.push({ table, actions: list.slice(i, i + MAX_TRANSACTION_ACTIONS).map((entity) => ({ op: 'upsert' as const, entity })) });
    }
  }
  return out;
}

export interface PreloadResult {
  tasks: number;
  seconds: number;
  perSecond: number;
  /** Writes made again after passing the storage deadline. */
  timeouts: number;
}

export async function preloadFinished(svc: Services, taskQueueId: string, count: number): Promise<PreloadResult> {
  const t0 = performance.now();
  let timeouts = 0;
  const start = Date.now() - count * 20;
  for (let done = 0; done < count; done += CHUNK) {
    const n = Math.min(CHUNK, count - done);
    const tasks: TaskRecord[] = [];
    for (let i = 0; i < n; i++) tasks.push(finishedTask(taskQueueId, `group-${Math.floor((done + i) / GROUP_SIZE)}`, start + (done + i) * 20));
    const indexRows: Entity[] = [];
    const expiryRows: Entity[] = [];
    const groupRows: Entity[] = [];
    const taskWrites = tasks.map((t) => {
      // Written as one write that created the task with run 0 already resolved.
      const changes = [createdEntry(), resolvedEntry(t, 0, null)];
      const entries = numberHistory(changes, t, t.runs[0].resolved!, 'bench');
      // As the planner does (without the events: nobody listened); the row holds them.
      const rows = historyRowsOf(t.taskId, holdHistory(t, entries, []).entries);
      for (const ops of indexOps(changes, t).values()) for (const o of ops) indexRows.push(o.row);
      const d = t.definition;
      expiryRows.push({
        ...ExpiryIndex.keys('task', t.taskId, d.expires),
        kind: 'task',
        id: t.taskId,
        expires: d.expires,
        data: JSON.stringify({ taskGroupId: d.taskGroupId, dependencies: [] }),
      });
      // Where groups live (shared/tasks/groups.ts): the Tasks partition of the group's id.
      groupRows.push({ partitionKey: d.taskGroupId, rowKey: GROUP_PREFIX + t.taskId, expires: d.expires });
      groupRows.push({ partitionKey: d.taskGroupId, rowKey: GROUP_PREFIX + groupRowKey(d.taskGroupId), schedulerId: '-', expires: d.expires, sealed: '' });
      return { table: 'Tasks' as TableName, actions: [encodeTask(t), ...rows].map((entity): TableAction => ({ op: 'upsert', entity })) };
    });
    const uniqueGroups = [...new Map(groupRows.map((r) => [`${r.partitionKey}/${r.rowKey}`, r])).values()];
    const writes = [...taskWrites, ...batches('Indexes', indexRows), ...batches('Expiry', expiryRows), ...batches('Tasks', uniqueGroups)];
    await mapLimit(writes, CONCURRENCY, async (w) => {
      // Upserts only, so a write that timed out (Azurite stalls as it fills) is simply made again.
      for (let attempt = 1; ; attempt++) {
        try {
          return await svc.storage.table(w.table).transact(w.actions);
        } catch (err) {
          if (!(err instanceof StorageTimeout) || attempt >= PRELOAD_ATTEMPTS) throw err;
          timeouts++;
        }
      }
    });
    if (process.env.BENCH_VERBOSE) console.error(`[preload] ${done + n} tasks, ${round((performance.now() - t0) / 1000, 1)} s`);
    // The preload's garbage (request bodies, SDK pipelines) would otherwise grow the heap, and the
    // process's RSS peak, far past what the service itself holds (~35 MB live).
    (globalThis as { gc?: () => void }).gc?.();
  }
  const seconds = (performance.now() - t0) / 1000;
  return { tasks: count, seconds: round(seconds, 1), perSecond: round(count / seconds, 0), timeouts };
}

export interface ReaperPassCost {
  ms: number;
  calls: number;
  /** Why the pass failed, if it did. */
  failed?: string;
}

/** One reaper pass with nothing due: its time and storage calls (the second of two; the first may find leftovers). */
async function idlePass(svc: Services): Promise<ReaperPassCost> {
  // A pass that fails (a call past the storage deadline on a stalling Azurite) is reported, not fatal.
  await runReaper(svc).catch(() => undefined);
  const meter = meterWindow(svc.storage.meter);
  const t0 = performance.now();
  const failed = await runReaper(svc).then(
    () => undefined,
    (err) => String((err as Error)?.message ?? err),
  );
  return { ms: round(performance.now() - t0, 1), calls: meter.stop().total, failed };
}

/** The hint-repair check's per-queue query (every few minutes per instance), timed. */
async function staleQueryMs(svc: Services, taskQueueId: string): Promise<number> {
  const now = svc.now();
  const t0 = performance.now();
  await stalePending(svc.storage, taskQueueId, new Date(now.getTime() - 60_000).toJSON(), now, MAX_DEQUEUE);
  return round(performance.now() - t0, 1);
}

/** Memory after a full collection where `--expose-gc` allows it (npm run bench passes it). */
function settledMemory(): NodeJS.MemoryUsage {
  (globalThis as { gc?: () => void }).gc?.();
  return process.memoryUsage();
}

export interface AccumulationResult {
  fresh: ThroughputResult;
  loaded: ThroughputResult;
  /** The raw storage ceiling on the same Azurite right after each loop: its drop is Azurite's own. */
  raw?: { fresh: RawResult; loaded: RawResult; ratio: number };
  preload: PreloadResult;
  /** loaded / fresh lifecycles per second. */
  ratio: number;
  reaper: { fresh: ReaperPassCost; loaded: ReaperPassCost };
  staleQueryMs: { fresh: number; loaded: number };
  heapUsedBytes: { fresh: number; loaded: number };
  rssBytes: { fresh: number; loaded: number };
}

/**
 * (g) throughput as tasks accumulate: a closed loop on a fresh store, then `count` finished tasks
 * preloaded into the same task queue, then the same loop again; idle reaper passes and memory
 * after each loop.
 */
export async function accumulation(
  inst: Instance,
  taskQueueId: string,
  opts: { count: number; concurrency: number; durationMs: number; rawConnection?: string; rawMs?: number },
): Promise<AccumulationResult> {
  const svc = inst.services;
  const raw = (): Promise<RawResult | undefined> =>
    opts.rawConnection
      ? rawCeiling(opts.rawConnection, { clients: 'port', concurrency: opts.concurrency, durationMs: opts.rawMs ?? opts.durationMs })
      : Promise.resolve(undefined);
  const fresh = await closedLoop(inst, taskQueueId, { concurrency: opts.concurrency, durationMs: opts.durationMs });
  const rawFresh = await raw();
  const reaperFresh = await idlePass(svc);
  const staleFresh = await staleQueryMs(svc, taskQueueId);
  const mem0 = settledMemory();
  const preload = await preloadFinished(svc, taskQueueId, opts.count);
  const loaded = await closedLoop(inst, taskQueueId, { concurrency: opts.concurrency, durationMs: opts.durationMs });
  const rawLoaded = await raw();
  const reaperLoaded = await idlePass(svc);
  const staleLoaded = await staleQueryMs(svc, taskQueueId);
  const mem1 = settledMemory();
  return {
    fresh,
    loaded,
    preload,
    ratio: fresh.perSecond > 0 ? round(loaded.perSecond / fresh.perSecond, 3) : NaN,
    raw: rawFresh &&
      rawLoaded && { fresh: rawFresh, loaded: rawLoaded, ratio: rawFresh.perSecond > 0 ? round(rawLoaded.perSecond / rawFresh.perSecond, 3) : NaN },
    reaper: { fresh: reaperFresh, loaded: reaperLoaded },
    staleQueryMs: { fresh: staleFresh, loaded: staleLoaded },
    heapUsedBytes: { fresh: mem0.heapUsed, loaded: mem1.heapUsed },
    rssBytes: { fresh: mem0.rss, loaded: mem1.rss },
  };
}
