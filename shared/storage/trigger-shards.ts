/**
 * A trigger queue spread over TRIGGER_SHARDS storage queues: one storage queue carries about 2,000
 * messages/s, below what an account carries, so each trigger queue is several. A message goes to
 * the shard of its task (a hash of the taskId), receiving takes from every shard, and the shard
 * rides in the message id (`<id>~<n>`; shard 0 untagged) so delete, release and rearm find it.
 */
import { jumpHash } from './accounts';
import { Queue, QueueMessage, TRIGGER_SHARDS } from './port';

/** The storage queue names of a trigger queue: shard 0 keeps the plain name. */
export function triggerShardNames(prefix: string, name: string, shards = TRIGGER_SHARDS): string[] {
  return Array.from({ length: shards }, (_, i) => (i === 0 ? `${prefix}-${name}` : `${prefix}-${name}-${i}`));
}

/** The key a trigger body is placed by: its taskId (a batch: its first member's), else its text. */
function placementKey(body: unknown): string {
  const b = body as { taskId?: unknown; batch?: { taskId?: unknown }[] } | undefined;
  const taskId = typeof b?.taskId === 'string' ? b.taskId : b?.batch?.[0]?.taskId;
  // Salted: accounts place the same taskIds by jumpHash too, and an unsalted hash would correlate.
  return `trigger:${typeof taskId === 'string' ? taskId : JSON.stringify(body)}`;
}

/** The shard of a trigger body (exported for tests and the scale model). */
export function triggerShardOf(body: unknown, shards = TRIGGER_SHARDS): number {
  return shards === 1 ? 0 : jumpHash(placementKey(body), shards);
}

function tag(messageId: string, shard: number): string {
  return shard === 0 ? messageId : `${messageId}~${shard}`;
}
function untag(messageId: string): [number, string] {
  const m = /^(.*)~(\d+)$/.exec(messageId);
  return m ? [Number(m[2]), m[1]] : [0, messageId];
}

export class ShardedTriggerQueue implements Queue {
  readonly name: string;
  constructor(private readonly shards: Queue[]) {
    this.name = shards[0].name;
  }
  private at(shard: number): Queue | undefined {
    return this.shards[shard];
  }
  async create(): Promise<void> {
    await Promise.all(this.shards.map((q) => q.create()));
  }
  async deleteQueue(): Promise<void> {
    await Promise.all(this.shards.map((q) => q.deleteQueue()));
  }
  async put(body: unknown, opts?: { visibilityS?: number; ttlS?: number }): Promise<{ messageId: string; popReceipt: string }> {
    const shard = triggerShardOf(body, this.shards.length);
    const r = await this.shards[shard].put(body, opts);
    return { messageId: tag(r.messageId, shard), popReceipt: r.popReceipt };
  }
  /** Up to `count` from each shard (the calls start in shard order, so a pass's calls keep a fixed order). */
  async receive(count: number, visibilityS: number): Promise<QueueMessage[]> {
    const got = await Promise.all(this.shards.map((q) => q.receive(count, visibilityS)));
    return got.flatMap((msgs, shard) => msgs.map((m) => ({ ...m, messageId: tag(m.messageId, shard) })));
  }
  async delete(messageId: string, popReceipt: string): Promise<void> {
    const [shard, id] = untag(messageId);
    await this.at(shard)?.delete(id, popReceipt);
  }
  async release(messageId: string, popReceipt: string, visibilityS?: number): Promise<void> {
    const [shard, id] = untag(messageId);
    await this.at(shard)?.release(id, popReceipt, visibilityS);
  }
  async rearm(messageId: string, popReceipt: string, body: unknown, visibilityS: number): Promise<string | undefined> {
    const [shard, id] = untag(messageId);
    return this.at(shard)?.rearm(id, popReceipt, body, visibilityS);
  }
  async approximateCount(): Promise<number> {
    return (await Promise.all(this.shards.map((q) => q.approximateCount()))).reduce((a, b) => a + b, 0);
  }
  async peek(count: number): Promise<{ messageText: string }[]> {
    return (await Promise.all(this.shards.map((q) => q.peek(count)))).flat().slice(0, count);
  }
}
