/**
 * The task log: the command's stdout and stderr interleaved, plus the worker's own notes (prefixed
 * so readers can tell them apart). Written to a file outside the task directory, so the task
 * cannot overwrite it, and uploaded as `public/logs/live_backing.log` (worker/live-log-artifact.ts).
 */
import fs from 'node:fs';
import { once } from 'node:events';

export const WORKER_PREFIX = '[taskcluster-worker]';

export class TaskLog {
  private closed = false;
  /** The first write error (e.g. ENOSPC); the log is then incomplete and must not pass as the task's log. */
  error: NodeJS.ErrnoException | undefined;

  private constructor(
    readonly file: string,
    readonly stream: fs.WriteStream,
  ) {
    stream.on('error', (err) => (this.error ??= err));
  }

  static async open(file: string): Promise<TaskLog> {
    const stream = fs.createWriteStream(file, { flags: 'a' });
    await once(stream, 'open');
    return new TaskLog(file, stream);
  }

  /** A worker note, one line per line of `text`. */
  note(text: string, now = new Date()): void {
    if (this.closed) return;
    for (const l of text.split('\n')) this.stream.write(`${WORKER_PREFIX} ${now.toISOString()} ${l}\n`);
  }

  /** Flushes and closes the file (idempotent). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.stream.destroyed) return;
    await new Promise<void>((resolve) => {
      this.stream.once('error', () => resolve());
      this.stream.end(() => resolve());
    });
  }
}
