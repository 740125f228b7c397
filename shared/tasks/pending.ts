/**
 * Pending queues: one or more Azure queues (shards) per (task queue, priority). Messages are hints
 * `{taskId, runId, hintId, sig, shard}`; a claim always re-checks the task row, so a hint may be stale.
 *
 * Shards: one storage queue carries about 2,000 messages/s, so a busy task queue may spread its
 * hints over N queues (QUEUE_PENDING_SHARDS), placed by a jump-consistent hash of the taskId.
 * Shard 0 keeps the unsharded name; every shard a hint was ever put in has its TaskQueues row
 * (`p<level>` for shard 0, `p<level>-<shard>` for the others), so pollers keep draining a shard
 * after N shrinks.
 */
import crypto from 'node:crypto';
import { CountedQueue, Storage, MAX_VISIBILITY_S, allRows } from '../storage/storage';
import { encodeKey } from '../storage/keys';
import { jumpHash } from '../storage/accounts';
import { MAX_PENDING_SHARDS, type PendingShards } from '../config';
import { PRIORITIES, Priority } from './vocabulary';
import { priorityLevel } from './model';

export interface Hint {
  taskId: string;
  runId: number;
  hintId: string;
  /** HMAC by the queue over taskId/runId/hintId, so forged messages cannot claim anything. */
  sig: string;
  /** The shard the hint was put in (absent: 0); unsigned, it only says where to delete the message. */
  shard?: number;
}

/** A pending storage queue in use: a priority and one of its shards. */
export interface UsedQueue {
  priority: Priority;
  shard: number;
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
  private readonly usedCache = new Map<string, { at: number; used: UsedQueue[] }>();

  constructor(
    private readonly storage: Storage,
    private readonly hintKey: string,
    private readonly shards: PendingShards = { default: 1, byQueue: {} },
    /** The service's clock: a hint's lifetime and delay run to the task's deadline and start on it. */
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** How many shards new hints of this task queue are spread over. */
  shardCount(taskQueueId: string): number {
    return this.shards.byQueue[taskQueueId] ?? this.shards.default;
  }

  /** The shard a task's hints go to (every run of a task lands in the same one while N holds). */
  shardOf(taskQueueId: string, taskId: string): number {
    const n = this.shardCount(taskQueueId);
    return n === 1 ? 0 : jumpHash(taskId, n);
  }

  /** `<prefix>-<26 chars of base32(sha256(taskQueueId))>`: what every pending queue of the task queue starts with. */
  baseName(taskQueueId: string): string {
    const h = base32(crypto.createHash('sha256').update(taskQueueId).digest()).slice(0, 26);
    return `${this.storage.prefix}-${h}`;
  }

  /** Valid Azure queue name: `<base>-<1..7>` for shard 0 (the unsharded name), `<base>-<1..7>-<shard>` for the others. */
  queueName(taskQueueId: string, priority: Priority, shard = 0): string {
    const name = `${this.baseName(taskQueueId)}-${priorityLevel(priority)}`;
    return shard === 0 ? name : `${name}-${shard}`;
  }

  queue(taskQueueId: string, priority: Priority, shard = 0): CountedQueue {
    return this.storage.queueNamed(this.queueName(taskQueueId, priority, shard), 'pending');
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

  /** Creates the queue and records the priority (and shard) as used, once per process per hour. */
  async ensure(taskQueueId: string, priority: Priority, shard = 0): Promise<void> {
    const key = `${taskQueueId}\n${priority}\n${shard}`;
    const at = this.ensured.get(key);
    if (at !== undefined && Date.now() - at < ENSURED_TTL_MS) return;
    await this.queue(taskQueueId, priority, shard).create();
    await this.storage.table('TaskQueues').upsert({
      partitionKey: encodeKey(taskQueueId),
      rowKey: `p${priorityLevel(priority)}${shard === 0 ? '' : `-${shard}`}`,
      taskQueueId,
      priority,
      shard,
      queueName: this.queueName(taskQueueId, priority, shard),
    });
    this.ensured.set(key, Date.now());
    this.usedCache.delete(taskQueueId);
  }

  /**
   * Creates the queue (once per process per hour) without recording the priority as used, so
   * handing out poll URLs for all seven priorities does not make the claimWork pollers poll them.
   */
  async ensureQueue(taskQueueId: string, priority: Priority, shard = 0): Promise<void> {
    const key = `${taskQueueId}\n${priority}\n${shard}`;
    const fresh = (m: Map<string, number>) => {
      const at = m.get(key);
      return at !== undefined && Date.now() - at < ENSURED_TTL_MS;
    };
    if (fresh(this.ensured) || fresh(this.created)) return;
    await this.queue(taskQueueId, priority, shard).create();
    this.created.set(key, Date.now());
  }

  /**
   * Puts a hint that lives until the task's deadline; with `visibleAt` (delayed start), the storage
   * queue keeps it invisible until then, so nobody polls for it.
   */
  async put(taskQueueId: string, priority: Priority, taskId: string, runId: number, hintId: string, deadline: string, visibleAt?: string): Promise<void> {
    const shard = this.shardOf(taskQueueId, taskId);
    await this.ensure(taskQueueId, priority, shard);
    const ttlS = Math.min(MAX_VISIBILITY_S, Math.max(1, Math.ceil((new Date(deadline).getTime() - this.now().getTime()) / 1000)));
    const hint: Hint = { taskId, runId, hintId, sig: this.sign(taskId, runId, hintId), ...(shard === 0 ? {} : { shard }) };
    const delayS = visibleAt ? Math.ceil((new Date(visibleAt).getTime() - this.now().getTime()) / 1000) : 0;
    await this.queue(taskQueueId, priority, shard).put(hint, delayS > 0 ? { ttlS, visibilityS: Math.min(delayS, ttlS - 1) } : { ttlS });
  }

  /** Priorities with a pending queue for this task queue, highest first (cached briefly). */
  async usedPriorities(taskQueueId: string, fresh = false): Promise<Priority[]> {
    return [...new Set((await this.usedQueues(taskQueueId, fresh)).map((q) => q.priority))];
  }

  /** Pending queues of this task queue that hints were put in: highest priority first, then by shard (cached briefly). */
  async usedQueues(taskQueueId: string, fresh = false): Promise<UsedQueue[]> {
    const hit = this.usedCache.get(taskQueueId);
    const ttl = hit && hit.used.length ? USED_PRIORITIES_TTL_MS : NO_PRIORITIES_TTL_MS;
    if (!fresh && hit && Date.now() - hit.at < ttl) return hit.used;
    const queues = await allRows(
      this.storage.table('TaskQueues'),
      { partitionKey: encodeKey(taskQueueId), rowKey: { ge: 'p', lt: 'q' } },
      {
        pageSize: PRIORITIES.length * MAX_PENDING_SHARDS,
      },
    );
    const rank = (p: Priority) => PRIORITIES.indexOf(p);
    const used = queues
      .map((r) => ({ priority: r.priority as Priority, shard: typeof r.shard === 'number' ? r.shard : 0 }))
      .filter((q) => rank(q.priority) >= 0)
      .sort((a, b) => rank(a.priority) - rank(b.priority) || a.shard - b.shard);
    this.usedCache.set(taskQueueId, { at: Date.now(), used });
    return used;
  }

  /** Forget cached priorities (after this process created a task in a new priority). */
  invalidate(taskQueueId: string): void {
    this.usedCache.delete(taskQueueId);
  }
}
