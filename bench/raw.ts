/**
 * (f) The raw Azurite ceiling: the 7 storage calls of a minimal lifecycle, one after another, with
 * no HTTP service, no auth and no domain logic, so the service's throughput and drain read as
 * fractions of what the storage emulator itself allows. The same sequence as the side-by-side
 * measurement against Taskcluster (docs/performance.md). It runs through the storage SDKs' default
 * clients (`clients: 'sdk'`, that measurement's loop and the targets' ceiling) or through the
 * storage port (`'port'`, the service's own storage code, lighter per call).
 */
import crypto from 'node:crypto';
import { fork } from 'node:child_process';
import { dropPrefix } from '../shared/local/azurite';
import { StorageConflict, StorageTimeout } from '../shared/storage/storage';
import { encodeTask, taskRowKey, TaskRecord } from '../shared/tasks/model';
import { newTaskId, runLoops, sleep, taskDef } from './client';
import { portRawCalls, RawCalls } from './raw-calls';
import { sdkRawCalls } from './raw-sdk';
import { cpuWindow, CpuMs, round } from './stats';

export type RawClients = 'sdk' | 'port';

/** Insert the task entity, put its message, receive one, merge the entity, delete the message, read the entity, merge it. */
export const RAW_SEQUENCE = ['Tasks.insert', 'pending.put', 'pending.get', 'Tasks.merge', 'pending.delete', 'Tasks.get', 'Tasks.merge'];

/** A raw call that timed out is tried this many times in all before the lifecycle is given up. */
const RAW_ATTEMPTS = 3;

export interface RawResult {
  clients: RawClients;
  concurrency: number;
  /** Messages waiting in the account meanwhile (see `rawCeiling`). */
  resident: number;
  lifecycles: number;
  seconds: number;
  perSecond: number;
  callsPerLifecycle: number;
  transactionsPerSecond: number;
  /** Calls that hit the storage deadline and were tried again (Azurite stalls now and then). */
  timeoutRetries: number;
  /** Lifecycles abandoned after RAW_ATTEMPTS timeouts of one call (not counted as done). */
  abandoned: number;
}

/**
 * Runs a raw call, again after a StorageTimeout. The timed-out attempt may have been applied, so
 * on a retry a conflict (the row exists, the ETag moved on) means the first attempt went through.
 */
async function retried<T>(counts: { timeoutRetries: number }, call: () => Promise<T>): Promise<T | undefined> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      if (attempt > 1 && err instanceof StorageConflict) return undefined;
      if (!(err instanceof StorageTimeout) || attempt >= RAW_ATTEMPTS) throw err;
      counts.timeoutRetries++;
    }
  }
}

function record(taskId: string, taskQueueId: string): TaskRecord {
  const d: any = taskDef(taskQueueId);
  return {
    taskId,
    definition: {
      provisionerId: 'bench',
      workerType: 'raw',
      taskQueueId,
      schedulerId: '-',
      projectId: 'none',
      taskGroupId: taskId,
      dependencies: [],
      requires: 'all-completed',
      routes: [],
      priority: 'lowest',
      retries: 5,
      created: d.created,
      deadline: d.deadline,
      expires: new Date(Date.now() + 365 * 86400_000).toJSON(),
      scopes: [],
      payload: d.payload,
      metadata: d.metadata,
      tags: {},
      extra: {},
    },
    runs: [{ runId: 0, state: 'pending', reasonCreated: 'scheduled', scheduled: d.created, hintId: newTaskId() }],
    retriesLeft: 5,
    takenUntil: '',
    hasDependents: false,
    dependentsNotified: -1,
  };
}

/** Puts side by side while filling the resident queue. */
const RESIDENT_PUT_CONCURRENCY = 16;

/**
 * `resident`: messages left invisible in another queue of the account while the loops run. Azurite
 * scans every message of the account on each receive and delete, so a backlog's waiting messages
 * slow each queue call; this measures the same sequence with as many messages waiting.
 */
export async function rawCeiling(
  connection: string,
  opts: { clients: RawClients; concurrency: number; durationMs: number; resident?: number },
): Promise<RawResult> {
  const prefix = `raw${crypto.randomBytes(3).toString('hex')}`;
  const raw: RawCalls = opts.clients === 'sdk' ? sdkRawCalls(connection, prefix) : portRawCalls(connection, prefix);
  await raw.create(!!opts.resident);
  let left = opts.resident ?? 0;
  await runLoops(RESIDENT_PUT_CONCURRENCY, async () => {
    if (left-- <= 0) return false;
    await raw.park();
    return true;
  });
  try {
    return await measure();
  } finally {
    // Its table and queue would slow every later phase (Azurite's queue calls scan the account).
    await dropPrefix(connection, prefix);
  }

  async function measure(): Promise<RawResult> {
    const before = raw.calls;
    const counts = { timeoutRetries: 0, abandoned: 0 };
    const r = <T>(call: () => Promise<T>) => retried(counts, call);
    let lifecycles = 0;
    const stopAt = Date.now() + opts.durationMs;
    const t0 = performance.now();
    const one = async () => {
      const taskId = newTaskId();
      const rec = record(taskId, 'bench/raw');
      await r(() => raw.insert(encodeTask(rec)));
      await r(() => raw.put({ taskId, runId: 0, hintId: rec.runs[0].hintId, sig: 'x'.repeat(43) }));
      // The worker side: take any message (another loop's is as good), and work that task.
      let msg;
      for (;;) {
        msg = await r(() => raw.receive());
        if (msg) break;
        await sleep(1);
      }
      const claimedId = msg.body.taskId;
      const rk = taskRowKey(claimedId);
      const takenUntil = new Date(Date.now() + 1200_000).toJSON();
      await r(() => raw.merge(claimedId, rk, { takenUntil, state: 'running' }));
      await r(() => raw.delete(msg));
      const row = (await r(() => raw.get(claimedId, rk)))!;
      await r(() => raw.merge(claimedId, rk, { state: 'completed' }, row.etag));
    };
    await runLoops(opts.concurrency, async () => {
      if (Date.now() >= stopAt) return false;
      try {
        await one();
        lifecycles++;
      } catch (err) {
        if (!(err instanceof StorageTimeout || err instanceof StorageConflict)) throw err;
        // A call timed out RAW_ATTEMPTS times (or a retried update met a concurrent one): drop this lifecycle.
        counts.abandoned++;
      }
      return true;
    });
    const calls = raw.calls - before;
    const seconds = (performance.now() - t0) / 1000;
    return {
      clients: opts.clients,
      concurrency: opts.concurrency,
      resident: opts.resident ?? 0,
      lifecycles,
      seconds: round(seconds),
      perSecond: round(lifecycles / seconds, 1),
      callsPerLifecycle: round(calls / Math.max(1, lifecycles)),
      transactionsPerSecond: round(calls / seconds),
      ...counts,
    };
  }
}

type RawOptions = Parameters<typeof rawCeiling>[1];
/** The loop's process answers with its result and its own CPU over the run. */
type RawReply = { ok: true; result: RawResult; cpuMs: number } | { ok: false; error: string };

/**
 * `rawCeiling` in a process of its own, so the loop's clients and entities never count in the
 * bench process's memory peak (the service's). `cpu`: the loop's process (`selfMs`) and the
 * Azurite at `azuritePid` (`childMs`) over the run.
 */
export async function rawCeilingApart(connection: string, opts: RawOptions, azuritePid: number): Promise<RawResult & { cpu: CpuMs }> {
  const azurite = cpuWindow(azuritePid);
  const child = fork(__filename, [], { execArgv: [], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  try {
    const reply = await new Promise<RawReply>((resolve, reject) => {
      child.once('message', resolve);
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`raw loop process exited (${code})`)));
      child.send({ connection, opts });
    });
    if (!reply.ok) throw new Error(reply.error);
    return { ...reply.result, cpu: { selfMs: reply.cpuMs, childMs: azurite.stop().childMs } };
  } finally {
    if (child.exitCode === null) child.kill();
  }
}

if (require.main === module) {
  process.once('message', ({ connection, opts }: { connection: string; opts: RawOptions }) => {
    const cpu = cpuWindow();
    rawCeiling(connection, opts).then(
      (result) => process.send!({ ok: true, result, cpuMs: cpu.stop().selfMs } satisfies RawReply, () => process.exit(0)),
      (err) => process.send!({ ok: false, error: String((err as Error)?.stack ?? err) } satisfies RawReply, () => process.exit(1)),
    );
  });
}
