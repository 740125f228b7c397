/**
 * Pending queues: one Azure queue per (task queue, priority). Messages are hints
 * `{taskId, runId, hintId, sig}`; a claim always re-checks the task row, so a hint may be stale.
 */
import crypto from 'node:crypto';
import { CountedQueue, Storage, MAX_VISIBILITY_S } from '../storage/storage';
import { encodeKey } from '../storage/keys';
import { PRIORITIES, Priority } from './vocabulary';
import { priorityLevel } from './model';

export interface Hint {
  taskId: string;
  runId: number;
  hintId: string;
  /** HMAC by the queue over taskId/runId/hintId, so forged messages cannot claim anything. */
  sig: string;
}

/** How long a process trusts that a queue exists and its priority is recorded. */
const ENSURED_TTL_MS = 60 * 60 * 1000;
/** How long pollers trust the list of priorities a task queue uses (another instance may add one). */
export const USED_PRIORITIES_TTL_MS = 5 * 1000;
/** An empty list is trusted only briefly, so the first task of a new task queue is seen fast. */
export const NO_PRIORITIES_TTL_MS = 1000;

function base32(buf: Buffer): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
  let bits = 0;
  let value = 0;
  let out = '';
  for (const b of buf) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  return out;
}

export class PendingQueues {
  private readonly ensured = new Map<string, number>();
  /** Queues this process created without recording their priority as used (poll URLs). */
  private readonly created = new Map<string, number>();
  private readonly usedCache = new Map<string, { at: number; priorities: Priority[] }>();

  constructor(
    private readonly storage: Storage,
    private readonly hintKey: string,
  ) {}

  /** Valid Azure queue name: `<prefix>-<26 chars of base32(sha256(taskQueueId))>-<1..7>`. */
  queueName(taskQueueId: string, priority: Priority): string {
    const h = base32(crypto.createHash('sha256').update(taskQueueId).digest()).slice(0, 26);
    return `${this.storage.prefix}-${h}-${priorityLevel(priority)}`;
  }

  queue(taskQueueId: string, priority: Priority): CountedQueue {
    return this.storage.queueNamed(this.queueName(taskQueueId, priority), 'pending');
  }

  sign(taskId: string, runId: number, hintId: string): string {
    return crypto.createHmac('sha256', this.hintKey).update(`${taskId}/${runId}/${hintId}`).digest('base64url');
  }

  verify(h: Partial<Hint>): h is Hint {
    if (typeof h.taskId !== 'string' || typeof h.runId !== 'number' || typeof h.hintId !== 'string' || typeof h.sig !== 'string') return false;
    const expected = Buffer.from(this.sign(h.taskId, h.runId, h.hintId));
    const got = Buffer.from(h.sig);
    return expected.length === got.length && crypto.timingSafeEqual(expected, got);
  }

  /** Creates the queue and records the priority as used, once per process per hour. */
  async ensure(taskQueueId: string, priority: Priority): Promise<void> {
    const key = `${taskQueueId}\n${priority}`;
    const at = this.ensured.get(key);
    if (at !== undefined && Date.now() - at < ENSURED_TTL_MS) return;
    await this.queue(taskQueueId, priority).create();
    await this.storage.table('TaskQueues').upsert({
      partitionKey: encodeKey(taskQueueId),
      rowKey: `p${priorityLevel(priority)}`,
      taskQueueId,
      priority,
      queueName: this.queueName(taskQueueId, priority),
    });
    this.ensured.set(key, Date.now());
    this.usedCache.delete(taskQueueId);
  }

  /**
   * Creates the queue (once per process per hour) without recording the priority as used, so
   * handing out poll URLs for all seven priorities does not make the claimWork pollers poll them.
   */
  async ensureQueue(taskQueueId: string, priority: Priority): Promise<void> {
    const key = `${taskQueueId}\n${priority}`;
    const fresh = (m: Map<string, number>) => {
      const at = m.get(key);
      return at !== undefined && Date.now() - at < ENSURED_TTL_MS;
    };
    if (fresh(this.ensured) || fresh(this.created)) return;
    await this.queue(taskQueueId, priority).create();
    this.created.set(key, Date.now());
  }

  /** Puts a hint that lives until the task's deadline. */
  async put(taskQueueId: string, priority: Priority, taskId: string, runId: number, hintId: string, deadline: string): Promise<void> {
    await this.ensure(taskQueueId, priority);
    const ttlS = Math.min(MAX_VISIBILITY_S, Math.max(1, Math.ceil((new Date(deadline).getTime() - Date.now()) / 1000)));
    const hint: Hint = { taskId, runId, hintId, sig: this.sign(taskId, runId, hintId) };
    await this.queue(taskQueueId, priority).put(hint, { ttlS });
  }

  /** Priorities with a pending queue for this task queue, highest first (cached briefly). */
  async usedPriorities(taskQueueId: string, fresh = false): Promise<Priority[]> {
    const hit = this.usedCache.get(taskQueueId);
    const ttl = hit && hit.priorities.length ? USED_PRIORITIES_TTL_MS : NO_PRIORITIES_TTL_MS;
    if (!fresh && hit && Date.now() - hit.at < ttl) return hit.priorities;
    const page = await this.storage.table('TaskQueues').page({ partitionKey: encodeKey(taskQueueId), rowKey: { ge: 'p', lt: 'q' } }, 10);
    const set = new Set(page.items.map((r) => r.priority as Priority));
    const priorities = PRIORITIES.filter((p) => set.has(p));
    this.usedCache.set(taskQueueId, { at: Date.now(), priorities });
    return priorities;
  }

  /** Forget cached priorities (after this process created a task in a new priority). */
  invalidate(taskQueueId: string): void {
    this.usedCache.delete(taskQueueId);
  }
}
