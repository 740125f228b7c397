/**
 * Storage operations of event subscriptions: one Azure queue per subscription, created and
 * deleted with it, and SAS URLs that let a consumer receive and delete messages of that queue only.
 * Minting a SAS is local HMAC work, not a storage call.
 */
import crypto from 'node:crypto';
import type { Queue, Storage } from './port';

/** Counted as `subscription.<op>` in the storage meter. */
const LABEL = 'subscription';

/**
 * A valid Azure queue name (3-63 lowercase letters, digits, hyphens) for any queue id. A
 * subscription's queue id names its id and the generation it was created with
 * (shared/events/subscriptions.ts queueIdOf), so a re-created subscription gets a new queue.
 */
export function subscriptionQueueName(prefix: string, queueId: string): string {
  return `${prefix}-sub-${crypto.createHash('sha256').update(queueId, 'utf8').digest('hex').slice(0, 32)}`;
}

export function subscriptionQueue(storage: Storage, queueId: string): Queue {
  return storage.queueNamed(subscriptionQueueName(storage.prefix, queueId), LABEL);
}

export async function createSubscriptionQueue(storage: Storage, queueId: string): Promise<void> {
  await subscriptionQueue(storage, queueId).create();
}

/** Deletes the queue and whatever it still holds; a missing queue is fine. */
export async function deleteSubscriptionQueue(storage: Storage, queueId: string): Promise<void> {
  await subscriptionQueue(storage, queueId).deleteQueue();
}

/** Puts one event message; its text is base64 JSON, like every other message of this queue service. */
export async function putSubscriptionMessage(storage: Storage, queueId: string, body: unknown, ttlS: number): Promise<void> {
  await subscriptionQueue(storage, queueId).put(body, { ttlS });
}

export interface SignedQueueUrls {
  signedPollUrl: string;
  signedDeleteUrl: string;
}

/**
 * Poll and delete URLs of one subscription queue, as pollTaskUrls gives them for pending queues:
 * the delete URL keeps `{{messageId}}` and `{{popReceipt}}` for the consumer to fill in.
 */
export function signedSubscriptionUrls(
  storage: Storage,
  queueId: string,
  opts: { endpoint: string; startsOn: Date; expiresOn: Date; httpAllowed: boolean; visibilityS: number },
): SignedQueueUrls {
  const queueName = subscriptionQueueName(storage.prefix, queueId);
  // The pending queues' poll SAS: process permission only (receive and delete), this queue only.
  const sas = storage.pollSas(queueName, { startsOn: opts.startsOn, expiresOn: opts.expiresOn, protocol: opts.httpAllowed ? 'https,http' : 'https' });
  const base = `${opts.endpoint.replace(/\/+$/, '')}/${queueName}/messages`;
  return {
    signedPollUrl: `${base}?visibilitytimeout=${opts.visibilityS}&${sas}`,
    signedDeleteUrl: `${base}/{{messageId}}?popreceipt={{popReceipt}}&${sas}`,
  };
}
