/**
 * Streams the task log to the queue's live-log append blob as it is written, so the dashboard can
 * follow a running task: the queue's `createLiveLog` creates the append blob and gives a URL that
 * appends to it; every LIVE_LOG_INTERVAL_MS the bytes added to the log file since the last append go
 * in one Append Block (at most 4 MiB, Azure's limit), up to the queue's `maxBytes`. Each append names the position it expects,
 * so an append repeated after a lost answer cannot write twice. Best effort: the complete log is
 * uploaded as an artifact at the end anyway, so a failure only stops the streaming.
 */
import fs from 'node:fs';
import type { WorkerLog } from './types';

/** How often new log bytes go out: what a reader following the log waits at most, besides its own poll. */
export const LIVE_LOG_INTERVAL_MS = 1000;
/** Azure's largest Append Block. */
export const MAX_APPEND_BYTES = 4 * 1024 * 1024;
/** Azure's limit of blocks per append blob: streaming stops there (the uploaded log is still complete). */
export const MAX_APPEND_BLOCKS = 50_000;
/** Consecutive failed appends before streaming gives up. */
const MAX_FAILURES = 5;

/** One HTTP request to the blob URL; the answer's status. */
export type BlobSend = (method: 'PUT', url: string, body: Buffer, headers: Record<string, string>) => Promise<number>;

export const fetchSend: BlobSend = async (method, url, body, headers) => {
  const res = await fetch(url, { method, body: new Uint8Array(body), headers: { ...headers, 'content-length': String(body.length) } });
  await res.arrayBuffer();
  return res.status;
};

export interface LiveLogDeps {
  /** The task log file, as it is being written. */
  file: string;
  /** Asks the queue for the append URL (createLiveLog) and the most it takes. */
  createUrl: () => Promise<{ url: string; maxBytes?: number }>;
  send?: BlobSend;
  log: WorkerLog;
  ids: Record<string, unknown>;
  intervalMs?: number;
}

export class LiveLogStream {
  private url: string | undefined;
  /** The queue's cap on the streamed log (none from an older queue). */
  private maxBytes = Infinity;
  /** An append whose answer did not come: sent again exactly, so a 412 means it landed. */
  private pending: Buffer | undefined;
  private offset = 0;
  private blocks = 0;
  private failures = 0;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private busy: Promise<void> = Promise.resolve();
  private readonly send: BlobSend;

  constructor(private readonly deps: LiveLogDeps) {
    this.send = deps.send ?? fetchSend;
  }

  /** Starts streaming (returns at once; failures are logged, never thrown). */
  start(): void {
    this.timer = setInterval(() => void this.flush(), this.deps.intervalMs ?? LIVE_LOG_INTERVAL_MS);
    this.timer.unref();
    void this.flush();
  }

  /** Sends what is left and stops (call once the log file is closed). */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.flush();
    this.stopped = true;
  }

  /** Bytes appended so far. */
  get streamed(): number {
    return this.offset;
  }

  /** Sends the bytes written since the last append (what the timer calls). */
  flush(): Promise<void> {
    this.busy = this.busy.then(() => this.step()).catch((err) => this.failed(err));
    return this.busy;
  }

  private failed(err: unknown): void {
    this.failures++;
    // 404: the queue has no createLiveLog (another Taskcluster queue): nothing to retry.
    const missing = (err as { statusCode?: number })?.statusCode === 404 && !this.url;
    if (this.failures === MAX_FAILURES || missing) {
      this.stopped = true;
      if (this.timer) clearInterval(this.timer);
    }
    this.deps.log.warn('live-log-failed', { ...this.deps.ids, failures: this.failures, message: String((err as Error)?.message ?? err).split('\n')[0] });
  }

  private async step(): Promise<void> {
    if (this.stopped || this.blocks >= MAX_APPEND_BLOCKS) return;
    if (!this.url) {
      const { url, maxBytes } = await this.deps.createUrl();
      this.url = url;
      this.maxBytes = maxBytes ?? Infinity;
    }
    for (;;) {
      const room = Math.min(MAX_APPEND_BYTES, this.maxBytes - this.offset);
      if (room <= 0) return;
      const chunk = this.pending ?? (await readFrom(this.deps.file, this.offset, room));
      if (!chunk.length) return;
      this.pending = chunk;
      const u = new URL(this.url);
      u.searchParams.set('comp', 'appendblock');
      const status = await this.send('PUT', u.toString(), chunk, { 'x-ms-blob-condition-appendpos': String(this.offset) });
      // 412: the blob is not `offset` long, which only an earlier attempt of this same append can have done.
      if (status !== 201 && status !== 412) throw new Error(`appending to the live log answered ${status}`);
      this.pending = undefined;
      this.offset += chunk.length;
      this.blocks++;
      this.failures = 0;
      if (this.blocks >= MAX_APPEND_BLOCKS) return;
    }
  }
}

async function readFrom(file: string, offset: number, max: number): Promise<Buffer> {
  const fh = await fs.promises.open(file, 'r');
  try {
    const buf = Buffer.alloc(max);
    const { bytesRead } = await fh.read(buf, 0, max, offset);
    return buf.subarray(0, bytesRead);
  } finally {
    await fh.close();
  }
}
