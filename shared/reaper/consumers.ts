/**
 * The reaper's consumer step: the Index and Hooks as consumers of the event stream. Events reach
 * them through the system subscription (shared/events/subscriptions.ts), whose bindings are
 * `task-completed` with `route.index.#` plus every hook's bindings. Each pass receives batches of
 * its queue and applies every message:
 *   - index: a completion with an `index.` route is indexed (indexCompletedTask);
 *   - hooks: every hook whose binding matches fires (fireForEvent).
 * A message is deleted only after it was applied; a failure or a crash leaves it to come back
 * after its lease. Both appliers are idempotent (rank/order rules; taskIds derived from the event
 * id), so a message applied twice changes nothing.
 */
import type { Services } from '../services';
import { decodeMessage, MAX_DEQUEUE, QueueMessage } from '../storage/storage';
import { subscriptionQueue } from '../storage/subscription-queues';
import { SYSTEM_SUBSCRIPTION_ID, INDEX_BINDING } from '../events/subscriptions';
import { bindingMatches as topicBindingMatches, anyBindingMatches } from '../events/topic';
import type { QueueEvent } from '../events/exchanges';
import { indexCompletedTask } from '../index/index';
import { HookStore } from '../hooks/store';
import { bindingMatches, eventTime, fireForEvent } from '../hooks/bindings';
import type { TaskRecord, TaskStatus } from '../tasks/model';

/** Bound one pass so a timer invocation ends well inside the Functions timeout. */
const MAX_CONSUMER_BATCHES = 20;

export interface ConsumerStats {
  consumed: number;
  failed: number;
}

/** The task an event is about, read at most once per message. */
function taskOf(svc: Services, e: QueueEvent): () => Promise<TaskRecord | undefined> {
  let loaded: Promise<TaskRecord | undefined> | undefined;
  const taskId = (e.payload.status as TaskStatus | undefined)?.taskId;
  return () => (loaded ??= taskId ? svc.tasks.load(taskId) : Promise.resolve(undefined));
}

/** Index: a completion with `index.` routes. The runs are the event's (a rerun since does not hide this completion). */
async function applyIndex(svc: Services, e: QueueEvent, task: () => Promise<TaskRecord | undefined>): Promise<void> {
  if (!topicBindingMatches(INDEX_BINDING, e)) return;
  const t = await task();
  if (!t) return; // expired meanwhile: nothing to index
  const { status, runId } = e.payload as { status: TaskStatus; runId: number };
  await indexCompletedTask(svc, { taskId: t.taskId, definition: t.definition, runs: status.runs.slice(0, runId + 1) });
}

/** Hooks: every hook whose binding matches, by the binding rows; each is re-read and re-matched. */
async function applyHooks(svc: Services, e: QueueEvent, task: () => Promise<TaskRecord | undefined>, m: QueueMessage): Promise<void> {
  const subs = svc.events.dispatcher.subscriptions;
  const candidates = (await subs.hookBindings()).filter((h) => anyBindingMatches(h.bindings, e));
  if (!candidates.length) return;
  const store = new HookStore(svc.storage);
  let time = eventTime(e);
  if (!time) time = (await task())?.definition.created ?? m.insertedOn?.toJSON() ?? svc.now().toJSON();
  for (const c of candidates) {
    const h = await store.get(c.hookGroupId, c.hookId);
    if (!h || !bindingMatches(h.definition, e)) {
      // Bindings a crash left wider than the hook's (or of a removed hook): make them exact.
      await subs.syncHookBindings(c.hookGroupId, c.hookId, async () => (await store.get(c.hookGroupId, c.hookId))?.definition);
      continue;
    }
    await fireForEvent(svc, h.definition, e, new Date(time));
  }
}

async function apply(svc: Services, m: QueueMessage): Promise<void> {
  const e = decodeMessage<QueueEvent>(m);
  if (!e || typeof e.exchange !== 'string' || !Array.isArray(e.routes)) return; // not an event: nothing to apply
  const task = taskOf(svc, e);
  await applyIndex(svc, e, task);
  await applyHooks(svc, e, task, m);
}

/**
 * One consumer step: up to MAX_CONSUMER_BATCHES batches of the system queue. An idle pass costs
 * one receive. `retryDelayS` is the reaper's backoff for a message whose application failed.
 */
export async function consumeEvents(svc: Services, retryDelayS: (dequeueCount: number, leaseS: number) => number): Promise<ConsumerStats> {
  const stats: ConsumerStats = { consumed: 0, failed: 0 };
  const q = subscriptionQueue(svc.storage, SYSTEM_SUBSCRIPTION_ID);
  const leaseS = svc.tuning.triggerLeaseS;
  for (let batch = 0; batch < MAX_CONSUMER_BATCHES; batch++) {
    const msgs = await q.receive(MAX_DEQUEUE, leaseS);
    if (!msgs.length) break;
    // A hook created a moment ago on another instance is matched too.
    await svc.events.dispatcher.subscriptions.refresh();
    await Promise.all(
      msgs.map(async (m) => {
        try {
          await apply(svc, m);
          await q.delete(m.messageId, m.popReceipt); // last: a crash before this line re-applies the message
          stats.consumed++;
        } catch (err) {
          stats.failed++;
          svc.log.error('consumer-failed', { messageId: m.messageId, dequeueCount: m.dequeueCount, error: String((err as Error)?.message ?? err) });
          await q.release(m.messageId, m.popReceipt, retryDelayS(m.dequeueCount, leaseS)).catch(() => undefined);
        }
      }),
    );
    if (msgs.length < MAX_DEQUEUE) break;
  }
  return stats;
}
