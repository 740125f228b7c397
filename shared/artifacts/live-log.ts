/**
 * A run's log while it runs: the worker asks for an append URL (createLiveLog) and appends to the
 * blob there as the task writes, until the run ends (then the blob is sealed) or LIVE_LOG_MAX_BYTES; the dashboard reads it from an offset (liveLog)
 * and follows it. Once the run is resolved, the `public/logs/live.log` artifact the worker uploads
 * is read instead (the same bytes, complete), and the live blob goes when that artifact expires.
 */
import type { Storage } from '../storage/storage';
import type { TaskRecord } from '../tasks/model';
import type { LifecycleDeps } from '../lifecycle/ports';
import { execute } from '../lifecycle/executor';
import { markUploads } from '../lifecycle/transitions';
import { conflict, inputError, notFound } from '../errors';
import { LIVE_BACKING_LOG_NAME, LIVE_LOG_NAME, blobNameFor, liveLogBlob } from './blobs';

export { LIVE_LOG_NAME, liveLogBlob };
/** Bytes returned per read at most, so a long log comes in pages the page can render. */
export const LIVE_LOG_MAX_READ = 256 * 1024;
/**
 * The most a live log streams: readers get no byte past it, and a log found longer is sealed. A
 * live log is for following a run; the complete log is the artifact its worker uploads at the end.
 */
export const LIVE_LOG_MAX_BYTES = 64 * 1024 * 1024;
const LOG_CONTENT_TYPE = 'text/plain; charset=utf-8';

/**
 * An append URL for a running run's live log, valid until the task's deadline. The app creates
 * the blob and the URL may only append, so no URL can create it again or empty it; the run is
 * marked first, so its resolution seals the log (no append after the run ends). A run that ended
 * before the mark gets its log sealed here and a 409.
 */
export async function createLiveLog(d: LifecycleDeps, taskId: string, runId: number): Promise<{ url: string; expires: string; maxBytes: number }> {
  const task = await d.tasks.load(taskId);
  if (!task) throw inputError('Task not found');
  const run = task.runs[runId];
  if (!run) throw inputError('Run not found');
  if (run.state !== 'running') throw conflict(`Run ${runId} is ${run.state}: only a running run streams its log`);
  const blob = liveLogBlob(taskId, runId);
  await d.storage.artifacts.createAppend(blob, LOG_CONTENT_TYPE);
  const r = run.liveLog ? undefined : await execute(d, taskId, (t) => markUploads(t, { runId, liveLog: true }), task);
  const marked = r && 'task' in r ? r.task.runs[runId] : run;
  if (!marked?.liveLog) {
    await d.storage.artifacts.seal(blob);
    throw conflict(`Run ${runId} is ${marked?.state}: only a running run streams its log`);
  }
  const expires = new Date(Math.max(d.now().getTime(), Date.parse(task.definition.deadline)));
  return { url: d.storage.artifacts.appendUrl(blob, expires), expires: expires.toJSON(), maxBytes: LIVE_LOG_MAX_BYTES };
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
  // At least a byte: a count of 0 reads to the end on Azure.
  const count = Math.max(1, Math.min(LIVE_LOG_MAX_READ, LIVE_LOG_MAX_BYTES - offset));
  const live = () => storage.artifacts.readRange(liveLogBlob(task.taskId, runId), offset, count);
  // The complete log a worker uploaded (s3): under Taskcluster's backing name, or as live.log itself.
  const uploadedAs = (name: string) => storage.artifacts.readRange(blobNameFor(task.taskId, runId, name), offset, LIVE_LOG_MAX_READ);
  const uploaded = async () => (await uploadedAs(LIVE_BACKING_LOG_NAME)) ?? uploadedAs(LIVE_LOG_NAME);
  let source: LogChunk['source'] = 'none';
  let got: { body: Buffer; size: number } | undefined;
  if (resolved) {
    got = await uploaded();
    if (got) source = 'artifact';
  }
  if (!got) {
    got = await live();
    if (got) source = 'live';
    // Past the cap: no more appends, and readers stop at the cap.
    if (got && got.size > LIVE_LOG_MAX_BYTES) {
      await storage.artifacts.seal(liveLogBlob(task.taskId, runId));
      got = { body: got.body.subarray(0, Math.max(0, LIVE_LOG_MAX_BYTES - offset)), size: LIVE_LOG_MAX_BYTES };
    }
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
