/**
 * Delivery of recorded events: one message per event into the queue of every subscription with a
 * matching binding, and to each extra sink (Event Grid) where configured. Delivery is
 * at-least-once: the same event can arrive twice (a sweep after a slow dispatch), never zero times.
 */
import type { Storage } from '../storage/storage';
import type { QueueEvent } from './exchanges';
import { anyBindingMatches } from './topic';
import { queueIdOf, SYSTEM_SUBSCRIPTION_ID, type Subscription, type Subscriptions } from './subscriptions';
import { putSubscriptionMessage } from '../storage/subscription-queues';
import { mapLimit } from '../limit';

/** Azure queue messages hold 64 KiB of text, and ours are base64 (4 characters per 3 bytes). */
export const MAX_MESSAGE_JSON_BYTES = Math.floor((64 * 1024 * 3) / 4);

/**
 * The message for a subscription queue: the event, or, if it is too large for one queue message
 * (huge tags), the event without `payload.task` and with `truncated: true`; the whole event stays
 * readable through `taskEvents`.
 */
export function queueMessageOf(e: QueueEvent): QueueEvent & { truncated?: true } {
  if (Buffer.byteLength(JSON.stringify(e)) <= MAX_MESSAGE_JSON_BYTES) return e;
  const { task: _task, ...payload } = e.payload;
  void _task;
  return { ...e, payload, truncated: true };
}

/**
 * Subscriptions a request delivers to itself (in parallel: one round trip). When more match its
 * events, the request delivers only to the system subscription and the sinks, and hands the
 * subscriptions to one fan-out message (shared/events/recorder.ts) that the reaper expands, so
 * a request's cost does not grow with the number of subscribers.
 */
export const INLINE_FANOUT = 4;
/** Subscription queue puts at once when a fan-out message is expanded: a round trip's worth, few enough to leave sockets to the rest of the reaper pass. */
const FANOUT_CONCURRENCY = 16;

/** Another delivery target besides subscription queues (Event Grid). */
export interface EventSink {
  name: string;
  publish(events: QueueEvent[]): Promise<void>;
}

export class EventDispatcher {
  constructor(
    private readonly storage: Storage,
    readonly subscriptions: Subscriptions,
    private readonly sinks: EventSink[],
    readonly now: () => Date,
  ) {}

  /** Whether anything could receive events now (a sink or any subscription). */
  async anyTarget(): Promise<boolean> {
    return this.sinks.length > 0 || (await this.subscriptions.active()).length > 0;
  }

  /**
   * Whether any of `events` would be delivered now (a sink takes everything; a subscription what
   * its bindings match). A write whose events interest nobody costs no storage call for them, even
   * while subscriptions for other events exist.
   */
  async interested(events: Pick<QueueEvent, 'exchange' | 'routingKey' | 'routes'>[]): Promise<boolean> {
    if (!events.length) return false;
    if (this.sinks.length > 0) return true;
    const subs = await this.subscriptions.active();
    return subs.some((s) => events.some((e) => anyBindingMatches(s.bindings, e)));
  }

  /** Delivers `events` (in order within each subscription queue); throws if any delivery failed. */
  async deliver(events: QueueEvent[]): Promise<void> {
    if (!events.length) return;
    const subs = await this.subscriptions.active();
    await Promise.all([...subs.map((s) => this.toSubscription(s, events)), ...this.sinks.map((k) => k.publish(events))]);
  }

  /**
   * Delivers `events` to the system subscription and the sinks, and to the subscriptions they
   * match if there are at most INLINE_FANOUT. True when more match: those are left out, for a
   * fan-out message (`deliverToSubscriptions`). Throws if a delivery failed.
   */
  async deliverBounded(events: QueueEvent[]): Promise<boolean> {
    if (!events.length) return false;
    const subs = await this.subscriptions.active();
    const wide = subs.filter((s) => s.subscriptionId !== SYSTEM_SUBSCRIPTION_ID && events.some((e) => anyBindingMatches(s.bindings, e))).length > INLINE_FANOUT;
    const inline = wide ? subs.filter((s) => s.subscriptionId === SYSTEM_SUBSCRIPTION_ID) : subs;
    await Promise.all([...inline.map((s) => this.toSubscription(s, events)), ...this.sinks.map((k) => k.publish(events))]);
    return wide;
  }

  /**
   * A fan-out message's delivery: `events` into the queue of every subscription they match that
   * existed when the message was handed off (`at`), a bounded number at once; not the system
   * subscription's or the sinks, which had them from the request. The list is this instance's,
   * read at most SUBSCRIPTION_CACHE_MS ago. Throws if any delivery failed.
   */
  async deliverToSubscriptions(events: QueueEvent[], at: Date): Promise<void> {
    if (!events.length) return;
    const existed = (s: Subscription) => !s.created || new Date(s.created) <= at;
    const subs = (await this.subscriptions.active()).filter(
      (s) => s.subscriptionId !== SYSTEM_SUBSCRIPTION_ID && existed(s) && events.some((e) => anyBindingMatches(s.bindings, e)),
    );
    await mapLimit(subs, FANOUT_CONCURRENCY, (s) => this.toSubscription(s, events));
  }

  private async toSubscription(s: Subscription, events: QueueEvent[]): Promise<void> {
    // Messages live no longer than their subscription (whose queue is deleted then anyway).
    const ttlS = Math.max(1, Math.floor((new Date(s.expires).getTime() - this.now().getTime()) / 1000));
    for (const e of events) {
      if (!anyBindingMatches(s.bindings, e)) continue;
      try {
        await putSubscriptionMessage(this.storage, queueIdOf(s), queueMessageOf(e), ttlS);
      } catch (err) {
        // Deleted on another instance since our list was read: nothing to deliver to.
        if ((err as { statusCode?: number }).statusCode === 404) return;
        throw err;
      }
    }
  }
}
