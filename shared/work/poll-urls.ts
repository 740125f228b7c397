/**
 * pollTaskUrls: SAS-signed URLs with which a worker polls its pending queues directly and deletes
 * the messages it consumed. The storage port mints the SAS (process permission only: dequeue and
 * delete, no peek, add or update, nothing outside the queue); that is local HMAC work, not a storage call.
 */
import type { Services } from '../services';
import type { SasProtocol } from '../config';
import { PRIORITIES } from '../tasks/vocabulary';

/** Start backdated so workers with a slow clock can use the URLs at once (as Taskcluster did). */
export const SAS_BACKDATE_MS = 15 * 60 * 1000;
/** Lifetime of the URLs; workers call pollTaskUrls again before `expires`. */
export const SAS_LIFETIME_MS = 30 * 60 * 1000;
/** A polled message stays invisible this long while the worker claims and deletes it. */
export const POLL_VISIBILITY_S = 300;

export interface PollTaskUrls {
  queues: { signedPollUrl: string; signedDeleteUrl: string }[];
  expires: string;
}

/**
 * The queue endpoint workers reach (the public one if configured), without a trailing '/'. With
 * several data accounts, a queue on another than the first is reached at its own account's endpoint.
 */
export function publicQueueEndpoint(svc: Services, queueName?: string): string {
  const own = queueName === undefined ? svc.storage.queueEndpoint : svc.storage.queueEndpointOf(queueName);
  return (own === svc.storage.queueEndpoint ? svc.config.publicQueueEndpoint || own : own).replace(/\/+$/, '');
}

/** The configured SAS protocol, or https only unless the endpoint itself is http (Azurite). */
export function sasProtocol(svc: Services, endpoint = publicQueueEndpoint(svc)): SasProtocol {
  return svc.config.sasProtocol ?? (endpoint.startsWith('http:') ? 'https,http' : 'https');
}

/**
 * One {signedPollUrl, signedDeleteUrl} per pending storage queue: per priority, highest first, and
 * within a priority one per shard (QUEUE_PENDING_SHARDS), shard 0 first. A worker that polls them
 * in order, and stops at the first that gives messages, takes the highest priority there is.
 * Creates missing queues.
 */
export async function pollTaskUrls(svc: Services, taskQueueId: string): Promise<PollTaskUrls> {
  const now = svc.now().getTime();
  const startsOn = new Date(now - SAS_BACKDATE_MS);
  // Whole seconds, as the SAS `se` field carries it, so `expires` is exactly when the URLs stop working.
  const expiresOn = new Date(Math.floor((now + SAS_LIFETIME_MS) / 1000) * 1000);
  const protocol = sasProtocol(svc);
  const shards = Array.from({ length: svc.pending.shardCount(taskQueueId) }, (_, shard) => shard);
  const all = PRIORITIES.flatMap((priority) => shards.map((shard) => ({ priority, shard })));
  // A worker polling a queue that does not exist gets 404 from Azure, so create them all now.
  await Promise.all(all.map((q) => svc.pending.ensureQueue(taskQueueId, q.priority, q.shard)));
  const queues = all.map(({ priority, shard }) => {
    const queueName = svc.pending.queueName(taskQueueId, priority, shard);
    const endpoint = publicQueueEndpoint(svc, queueName);
    const sas = svc.storage.pollSas(queueName, { startsOn, expiresOn, protocol });
    const base = `${endpoint}/${queueName}/messages`;
    return {
      signedPollUrl: `${base}?visibilitytimeout=${POLL_VISIBILITY_S}&${sas}`,
      // The placeholders stay literal: workers substitute the URI-encoded id and pop receipt.
      signedDeleteUrl: `${base}/{{messageId}}?popreceipt={{popReceipt}}&${sas}`,
    };
  });
  return { queues, expires: expiresOn.toJSON() };
}
