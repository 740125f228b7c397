/**
 * claimWork with `xmlMessage` (the draft worker protocol): the worker polled its queue through a
 * poll URL and hands us the raw response; we claim the runs its hints name. Every hint must carry
 * this queue's HMAC, so a forged or edited message claims nothing.
 */
import type { Services } from '../services';
import type { Worker } from '../lifecycle/resolve';
import { claimRun } from '../lifecycle/resolve';
import type { Hint } from '../tasks/pending';
import type { TaskRecord } from '../tasks/model';
import { inputError } from '../errors';
import { parseQueueMessages, XmlQueueMessage } from './queue-xml';
import { Claim, claimResponse } from './claim';

/** Seed 000: a message dequeued more often than this points at a worker that never deletes. */
export const MANY_DEQUEUES = 10;

/** The shard a hint says it was put in; anything else is shard 0 (a wrong one only makes the delete a no-op). */
const shardOf = (hint: Hint): number => (Number.isInteger(hint.shard) && hint.shard! > 0 ? hint.shard! : 0);

function decodeHint(text: string): Partial<Hint> | undefined {
  try {
    const v = JSON.parse(Buffer.from(text, 'base64').toString('utf8'));
    return typeof v === 'object' && v !== null ? v : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Claims the runs named by the messages of `xml`. Refuses the whole request (400, nothing claimed)
 * if any message is not a hint signed by this queue or names a task of another task queue.
 * Storage calls: one task read per distinct task, then claimRun's (trigger put + row update) per
 * claimable run, plus one message delete per settled message when the worker sent its pop receipt.
 */
export async function claimFromXml(svc: Services, taskQueueId: string, worker: Worker, xml: string): Promise<Claim[]> {
  const messages = parseQueueMessages(xml);
  const hinted: { message: XmlQueueMessage; hint: Hint }[] = [];
  for (const message of messages) {
    const hint = decodeHint(message.messageText);
    if (!hint || !svc.pending.verify(hint)) {
      svc.log.warn('xml-hint-forged', { taskQueueId, messageId: message.messageId, ...worker });
      throw inputError(`xmlMessage: message ${message.messageId} is not a pending-task message signed by this queue`);
    }
    if (message.dequeueCount > MANY_DEQUEUES) {
      svc.log.warn('hint-dequeued-many-times', { taskQueueId, dequeueCount: message.dequeueCount, taskId: hint.taskId, runId: hint.runId });
    }
    hinted.push({ message, hint });
  }

  const ids = [...new Set(hinted.map((h) => h.hint.taskId))];
  const loaded = new Map<string, TaskRecord | undefined>(await Promise.all(ids.map(async (id) => [id, await svc.tasks.load(id)] as const)));
  for (const [taskId, t] of loaded) {
    if (t && t.definition.taskQueueId !== taskQueueId) {
      throw inputError(`xmlMessage: task ${taskId} belongs to task queue ${t.definition.taskQueueId}, not ${taskQueueId}`);
    }
  }

  const claims: Claim[] = [];
  const claimed = new Set<string>();
  for (const { message, hint } of hinted) {
    const key = `${hint.taskId}/${hint.runId}`;
    const known = loaded.get(hint.taskId);
    // A missing task may still be racing its createTask: leave the message to reappear.
    if (!known) continue;
    try {
      if (!claimed.has(key)) {
        const outcome = await claimRun(svc, hint.taskId, hint.runId, worker, { hintId: hint.hintId, replayWithinS: 0 }, known);
        if (outcome.kind === 'task-not-found') continue;
        if (outcome.kind === 'claimed') {
          claimed.add(key);
          claims.push(claimResponse(svc, outcome.task, outcome.run));
        }
      }
      // Claimed or stale: the message is spent. Workers delete it too; a second delete is a 404.
      if (message.popReceipt) {
        await svc.pending.queue(taskQueueId, known.definition.priority, shardOf(hint)).delete(message.messageId, message.popReceipt);
      }
    } catch (err) {
      svc.log.error('claim-failed', { taskId: hint.taskId, runId: hint.runId, error: String((err as Error)?.message ?? err) });
      if (claims.length === 0) throw err;
    }
  }
  return claims;
}
