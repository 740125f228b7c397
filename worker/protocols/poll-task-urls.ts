/**
 * The deprecated protocol of the original queue–worker interaction document:
 *   pollTaskUrls(provisionerId, workerType) → signed poll/delete URLs, one per priority, highest
 *   first; GET each poll URL in order; for each message claimTask(taskId, runId) and then DELETE
 *   the message (also when claimTask fails with a 4xx, never on other failures); after a pass
 *   over every queue with nothing found, sleep a second and start again.
 * Delete failures are logged (they cause over-provisioning and wasted claims), and so are messages
 * dequeued more than DEQUEUE_WARN_COUNT times.
 */
import type { Claim, WorkerLog } from '../types';
import { messageOf, statusOf } from '../types';
import { sleep as defaultSleep } from '../sleep';
import { WorkSource, MAX_BATCH, ERROR_BACKOFF_MS, CredentialsRejected } from './source';
import { parseQueueMessages, decodeTaskMessage, deleteUrlFor, pollUrlFor, QueueMessage } from './azure-queue';

/** Refresh the signed URLs this long before they expire. */
const URL_REFRESH_MARGIN_MS = 5 * 60_000;
/** Pause after a full pass over every queue found nothing ("a second or so"). */
const IDLE_PASS_MS = 1_000;
/** A message dequeued more often than this is probably stuck: the operator should know. */
export const DEQUEUE_WARN_COUNT = 10;
/** Attempts to delete a message before giving up (and logging it). */
const DELETE_ATTEMPTS = 3;

export interface SignedQueue {
  signedPollUrl: string;
  signedDeleteUrl: string;
}

/** taskcluster-client v10 Queue. */
export interface LegacyQueue {
  pollTaskUrls(provisionerId: string, workerType: string): Promise<{ queues: SignedQueue[]; expires: string }>;
  claimTask(taskId: string, runId: number, payload: { workerGroup: string; workerId: string }): Promise<Claim>;
}

export interface HttpClient {
  request(method: 'GET' | 'DELETE', url: string, signal?: AbortSignal): Promise<{ status: number; text: string }>;
}

export const fetchHttp: HttpClient = {
  async request(method, url, signal) {
    const r = await fetch(url, { method, signal });
    return { status: r.status, text: await r.text() };
  },
};

/** A URL without its query (the SAS signature must not reach the logs). */
const bare = (url: string) => {
  const u = new URL(url);
  return `${u.origin}${u.pathname}`;
};

export interface PollTaskUrlsDeps {
  queue: LegacyQueue;
  provisionerId: string;
  workerType: string;
  workerGroup: string;
  workerId: string;
  log: WorkerLog;
  http?: HttpClient;
  sleep?: typeof defaultSleep;
  now?: () => Date;
}

export class PollTaskUrlsSource implements WorkSource {
  private urls: { queues: SignedQueue[]; refreshAt: number } | undefined;
  private readonly http: HttpClient;
  private readonly sleep: typeof defaultSleep;
  private readonly now: () => Date;

  constructor(private readonly deps: PollTaskUrlsDeps) {
    this.http = deps.http ?? fetchHttp;
    this.sleep = deps.sleep ?? defaultSleep;
    this.now = deps.now ?? (() => new Date());
  }

  private async signedQueues(): Promise<SignedQueue[]> {
    if (this.urls && this.now().getTime() < this.urls.refreshAt) return this.urls.queues;
    const r = await this.deps.queue.pollTaskUrls(this.deps.provisionerId, this.deps.workerType);
    this.urls = { queues: r.queues, refreshAt: new Date(r.expires).getTime() - URL_REFRESH_MARGIN_MS };
    return r.queues;
  }

  async claim(max: number, signal: AbortSignal): Promise<Claim[]> {
    const { log, provisionerId, workerType } = this.deps;
    let queues: SignedQueue[];
    try {
      queues = await this.signedQueues();
    } catch (err) {
      if (statusOf(err) === 401) throw new CredentialsRejected(messageOf(err).split('\n')[0]);
      log.error('poll-task-urls-failed', { provisionerId, workerType, status: statusOf(err), message: messageOf(err).split('\n')[0] });
      await this.sleep(ERROR_BACKOFF_MS, signal);
      return [];
    }
    let failed = false;
    for (const q of queues) {
      if (signal.aborted) return [];
      let res: { status: number; text: string };
      try {
        res = await this.http.request('GET', pollUrlFor(q.signedPollUrl, Math.min(MAX_BATCH, max)), signal);
      } catch (err) {
        if (signal.aborted) return [];
        log.error('poll-queue-failed', { queue: bare(q.signedPollUrl), message: messageOf(err) });
        failed = true;
        continue;
      }
      if (res.status !== 200) {
        log.error('poll-queue-failed', { queue: bare(q.signedPollUrl), status: res.status, body: res.text.slice(0, 300) });
        if (res.status === 403) this.urls = undefined; // signature expired or revoked: fetch fresh URLs
        failed = true;
        continue;
      }
      const messages = parseQueueMessages(res.text);
      if (!messages.length) continue;
      const claims = await this.claimMessages(q, messages, signal);
      if (claims.length) return claims;
    }
    await this.sleep(failed ? ERROR_BACKOFF_MS : IDLE_PASS_MS, signal);
    return [];
  }

  private async claimMessages(q: SignedQueue, messages: QueueMessage[], signal: AbortSignal): Promise<Claim[]> {
    const { log, queue, workerGroup, workerId } = this.deps;
    const claims: Claim[] = [];
    for (const m of messages) {
      // After shutdown, nothing more is claimed: the messages left reappear for other workers.
      if (signal.aborted) break;
      if (m.dequeueCount > DEQUEUE_WARN_COUNT) {
        log.warn('message-dequeued-often', {
          queue: bare(q.signedPollUrl),
          messageId: m.messageId,
          dequeueCount: m.dequeueCount,
          threshold: DEQUEUE_WARN_COUNT,
        });
      }
      const ref = decodeTaskMessage(m.messageText);
      if (!ref) {
        // It can never be claimed; leaving it would only bring it back again and again.
        log.warn('message-unreadable', { queue: bare(q.signedPollUrl), messageId: m.messageId });
        await this.deleteMessage(q, m);
        continue;
      }
      try {
        const claim = await queue.claimTask(ref.taskId, ref.runId, { workerGroup, workerId });
        claims.push(claim);
      } catch (err) {
        const status = statusOf(err);
        if (status === undefined || status >= 500) {
          // The queue may not have seen the claim: leave the message to reappear for another try.
          log.warn('claim-task-failed', { ...ref, status, message: messageOf(err).split('\n')[0] });
          continue;
        }
        // 4xx: not created, not pending any more, or claimed by someone else. Either way, done.
        log.info('claim-task-rejected', { ...ref, status, code: (err as { code?: string }).code });
      }
      await this.deleteMessage(q, m);
    }
    return claims;
  }

  private async deleteMessage(q: SignedQueue, m: QueueMessage): Promise<void> {
    const url = deleteUrlFor(q.signedDeleteUrl, m.messageId, m.popReceipt);
    let problem: Record<string, unknown> = {};
    for (let attempt = 1; attempt <= DELETE_ATTEMPTS; attempt++) {
      try {
        const r = await this.http.request('DELETE', url);
        if (r.status === 204 || r.status === 200) return;
        problem = { status: r.status, body: r.text.slice(0, 300) };
        if (r.status < 500) break; // 404: gone or re-leased (pop receipt stale); 403: bad signature. Retrying won't help.
      } catch (err) {
        problem = { message: messageOf(err) };
      }
      await this.sleep(200 * attempt);
    }
    this.deps.log.error('delete-message-failed', { queue: bare(q.signedDeleteUrl), messageId: m.messageId, dequeueCount: m.dequeueCount, ...problem });
  }
}
