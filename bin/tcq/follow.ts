/**
 * `tcq task log`: a running run's log followed to its end through the queue's `liveLog` reader
 * (what `public/logs/live.log` refers to while the run runs), exiting when the run resolves; a
 * resolved run's log from the artifact (a link to the complete `public/logs/live_backing.log`).
 */
import { clientFor } from './services';
import { Settings, UsageError } from './settings';

/** The log every Taskcluster worker keeps under this name. */
export const LOG_NAME = 'public/logs/live.log';
/** Between reads of a log with nothing new: new lines show within a second; an idle follow costs a request a second. */
const FOLLOW_POLL_MS = 1000;
/** Run states whose log still grows. */
const UNRESOLVED = new Set(['pending', 'running']);

interface Chunk {
  state: string;
  next: number;
  size: number;
  text: string;
}

export interface LogSource {
  runId: number;
  follow: boolean;
}

/** Which run's log to read, and whether it must be followed (running, or no complete log was left). */
export async function logSource(settings: Settings, taskId: string, runFlag: number | undefined): Promise<LogSource> {
  const queue = await clientFor('queue', settings);
  const { status } = await queue.status(taskId);
  const runs: { state: string }[] = status.runs ?? [];
  const runId = runFlag ?? runs.length - 1;
  const run = runs[runId];
  if (!run)
    throw new UsageError(
      runs.length
        ? `task ${taskId} has no run ${runId} (runs 0 to ${runs.length - 1})`
        : `task ${taskId} is ${status.state}: no run has started, so there is no log yet`,
    );
  if (run.state === 'pending') throw new UsageError(`run ${runId} of task ${taskId} is pending: its log starts when a worker claims it`);
  if (run.state === 'running') return { runId, follow: true };
  // Resolved: the complete log, unless the worker left only the reference to the live log (it died) or nothing.
  try {
    const a = await queue.artifact(taskId, runId, LOG_NAME);
    return { runId, follow: a?.storageType === 'reference' };
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 404) return { runId, follow: true };
    return { runId, follow: false }; // the artifact read says why (an error artifact, a refusal)
  }
}

/**
 * Reads the run's log through `liveLog` from the start until the run is resolved and the log read
 * to its end, handing each complete line to `write` as it comes (the last, unterminated one at the
 * end). Returns the whole text.
 */
export async function followLog(
  settings: Settings,
  taskId: string,
  runId: number,
  write: ((lines: string) => void) | undefined,
  stop?: AbortSignal,
): Promise<string> {
  const queue = await clientFor('queue', settings);
  let text = '';
  let partial = '';
  let next = 0;
  while (!stop?.aborted) {
    const c: Chunk = await queue.liveLog(taskId, runId, { offset: String(next) });
    text += c.text;
    partial += c.text;
    const nl = partial.lastIndexOf('\n');
    if (write && nl >= 0) {
      write(partial.slice(0, nl));
      partial = partial.slice(nl + 1);
    }
    next = c.next;
    const atEnd = c.next >= c.size;
    if (atEnd && !UNRESOLVED.has(c.state)) break;
    if (atEnd) await pause(FOLLOW_POLL_MS, stop);
  }
  if (write && partial) write(partial);
  return text;
}

function pause(ms: number, stop?: AbortSignal): Promise<void> {
  return new Promise<void>((r) => {
    const t = setTimeout(r, ms);
    stop?.addEventListener('abort', () => (clearTimeout(t), r()), { once: true });
  });
}
