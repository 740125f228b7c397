/**
 * A run's log while it runs: the worker asks for an append URL (createLiveLog), creates an append
 * blob there and appends to it as the task writes; the dashboard reads it from an offset (liveLog)
 * and follows it. Once the run is resolved, the `public/logs/live.log` artifact the worker uploads
 * is read instead (the same bytes, complete), and the live blob goes when that artifact expires.
 */
import type { Storage } from '../storage/storage';
import type { TaskRecord } from '../tasks/model';
import { conflict, inputError, notFound } from '../errors';
import { LIVE_LOG_NAME, blobNameFor, liveLogBlob } from './blobs';

export { LIVE_LOG_NAME, liveLogBlob };
/** Bytes returned per read at most, so a long log comes in pages the page can render. */
export const LIVE_LOG_MAX_READ = 256 * 1024;

/** An append URL for a running run's live log, valid until the task's deadline (a run ends by then). */
export function liveLogUrl(storage: Storage, task: TaskRecord | undefined, runId: number, now: Date): { url: string; expires: string } {
  if (!task) throw inputError('Task not found');
  const run = task.runs[runId];
  if (!run) throw inputError('Run not found');
  if (run.state !== 'running') throw conflict(`Run ${runId} is ${run.state}: only a running run streams its log`);
  const expires = new Date(Math.max(now.getTime(), Date.parse(task.definition.deadline)));
  return { url: storage.artifacts.appendUrl(liveLogBlob(task.taskId, runId), expires), expires: expires.toJSON() };
}

export interface LogChunk {
  taskId: string;
  runId: number;
  /** The run's state: the log may grow while it is `running`. */
  state: string;
  offset: number;
  /** The offset to ask for next. */
  next: number;
  /** Bytes stored so far. */
  size: number;
  text: string;
  /** Where the bytes came from: the live blob, or the uploaded artifact. */
  source: 'live' | 'artifact' | 'none';
}

/**
 * Up to LIVE_LOG_MAX_READ bytes of a run's log from `offset`, cut after the last whole line unless
 * the chunk reaches the end (so no UTF-8 character is split), and where to continue.
 */
export async function readLog(storage: Storage, task: TaskRecord | undefined, runId: number, offset: number): Promise<LogChunk> {
  if (!task) throw notFound('Task not found');
  const run = task.runs[runId];
  if (!run) throw notFound('Run not found');
  const resolved = run.state !== 'running' && run.state !== 'pending';
  const live = () => storage.artifacts.readRange(liveLogBlob(task.taskId, runId), offset, LIVE_LOG_MAX_READ);
  const uploaded = () => storage.artifacts.readRange(blobNameFor(task.taskId, runId, LIVE_LOG_NAME), offset, LIVE_LOG_MAX_READ);
  let source: LogChunk['source'] = 'none';
  let got: { body: Buffer; size: number } | undefined;
  if (resolved) {
    got = await uploaded();
    if (got) source = 'artifact';
  }
  if (!got) {
    got = await live();
    if (got) source = 'live';
  }
  const base = { taskId: task.taskId, runId, state: run.state, offset, source };
  if (!got) return { ...base, next: offset, size: 0, text: '' };
  let body = got.body;
  if (offset + body.length < got.size) {
    const nl = body.lastIndexOf(0x0a);
    if (nl >= 0) body = body.subarray(0, nl + 1);
  }
  return { ...base, next: offset + body.length, size: got.size, text: body.toString('utf8') };
}
