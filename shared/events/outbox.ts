/**
 * The events outbox and its sweep triggers: the only storage calls of event recording.
 *
 * - A task's events are stored on the history rows of the transitions they report (property
 *   `event`), which TaskStore writes in the same entity-group transaction as the task row: a
 *   committed transition always has its event, and an aborted one never does.
 * - A sweep trigger (queue `events`, visible after a delay) is put *before* a write whose events
 *   have somewhere to go, and deleted once they were delivered. If the process dies in between,
 *   the reaper receives the trigger and delivers what the write committed, found by key (no scans).
 *   A write that puts a claim-expiry or deadline trigger anyway lets that one guard its events
 *   instead (shared/events/recorder.ts).
 * - Artifact, group and hook events are not task writes: their trigger carries the event itself,
 *   and the row the write leaves (artifact, sealed group, the hook or its absence) is the proof
 *   that it committed.
 */
import { allRows, readPage, type Entity, type Storage } from '../storage/storage';
import { historyRowKey } from '../ops/history';
import type { QueueEvent } from './exchanges';
import type { TriggerRef } from '../tasks/triggers';

/** History row keys start with this (shared/ops/history.ts); `~` sorts after every digit. */
const HISTORY_PREFIX = 'h-';
/** Table string properties hold 64 KiB (32 K UTF-16 units); split longer events below that. */
const OUTBOX_PART_CHARS = 30_000;

export type SweepTrigger = (
  | { kind: 'task'; taskId: string; seqs: number[] }
  | { kind: 'artifact'; taskId: string; runId: number; name: string; event: QueueEvent }
  | { kind: 'group-sealed'; taskGroupId: string; event: QueueEvent }
  /** An event that is the record of itself (a call's summary, task-group-priority-changed): always delivered. */
  | { kind: 'event'; event: QueueEvent }
  /** A hook change: the hook holding the definition of this `digest` proves a create or update; its absence (no digest), a delete. */
  | { kind: 'hook'; hookGroupId: string; hookId: string; event: QueueEvent; digest?: string }
  /** Everything a run's claim-expiry trigger guards (a failed delivery of a guarded write). */
  | { kind: 'run'; taskId: string; runId: number }
) & {
  /**
   * A fan-out message, put visible at once after the commit (at this time): to the subscriptions
   * that existed then only, as the request delivered to the system subscription and the sinks.
   */
  fanout?: string;
};

/** Properties that carry `event` on its history row. */
export function outboxProps(event: QueueEvent): Record<string, string | number> {
  const json = JSON.stringify(event);
  if (json.length <= OUTBOX_PART_CHARS) return { event: json };
  const props: Record<string, string | number> = { eventParts: Math.ceil(json.length / OUTBOX_PART_CHARS) };
  for (let i = 0; i * OUTBOX_PART_CHARS < json.length; i++) props[`event${i}`] = json.slice(i * OUTBOX_PART_CHARS, (i + 1) * OUTBOX_PART_CHARS);
  return props;
}

export function outboxEvent(row: Record<string, unknown>): QueueEvent | undefined {
  if (typeof row.event === 'string') return JSON.parse(row.event);
  const n = Number(row.eventParts ?? 0);
  if (!n) return undefined;
  let json = '';
  for (let i = 0; i < n; i++) json += row[`event${i}`] as string;
  return JSON.parse(json);
}

/** Adds each event's properties to the history row of its seq (rows of one write, in its plan: shared/lifecycle/planner.ts). */
export function attachToHistoryRows(rows: Entity[], events: QueueEvent[]): void {
  for (const e of events) {
    const row = rows.find((r) => r.rowKey === historyRowKey(r.partitionKey, e.seq));
    if (row) Object.assign(row, outboxProps(e));
  }
}

/** The committed events of a task with these seqs: one range query over its history rows, read to its end. */
export async function readTaskOutbox(storage: Storage, taskId: string, seqs: number[]): Promise<QueueEvent[]> {
  if (!seqs.length) return [];
  const lo = historyRowKey(taskId, Math.max(...seqs));
  const hi = historyRowKey(taskId, Math.min(...seqs));
  const history = await allRows(storage.table('Tasks'), { partitionKey: taskId, rowKey: { ge: lo, le: hi } });
  const wanted = new Set(seqs);
  return history
    .map((r) => outboxEvent(r))
    .filter((e): e is QueueEvent => !!e && wanted.has(e.seq))
    .sort((a, b) => a.seq - b.seq);
}

export async function putSweepTrigger(storage: Storage, body: SweepTrigger, delayS: number): Promise<TriggerRef> {
  return storage.trigger('events').put(body, { visibilityS: delayS });
}

/** Replaces a sweep trigger's body and shows it after `delayS`; false if its receipt is stale (then it stays as it was). */
export async function rearmSweepTrigger(storage: Storage, ref: TriggerRef, body: SweepTrigger, delayS: number): Promise<boolean> {
  return (await storage.trigger('events').rearm(ref.messageId, ref.popReceipt, body, delayS)) !== undefined;
}

/** Deletes a sweep trigger whose events were delivered; failing to is harmless (it re-delivers them). */
export async function dropSweepTrigger(storage: Storage, ref: TriggerRef | undefined): Promise<void> {
  if (!ref) return;
  await storage
    .trigger('events')
    .delete(ref.messageId, ref.popReceipt)
    .catch(() => undefined);
}

/** A page of a task's recorded events, newest first (history rows without an event, e.g. reclaims, are skipped). */
export async function readTaskEvents(
  storage: Storage,
  taskId: string,
  limit: number,
  continuation?: string,
): Promise<{ events: QueueEvent[]; continuation?: string }> {
  const page = await readPage(storage.table('Tasks'), { partitionKey: taskId, rowKey: { ge: HISTORY_PREFIX, lt: HISTORY_PREFIX + '~' } }, limit, continuation);
  return { events: page.items.map((r) => outboxEvent(r)).filter((e): e is QueueEvent => !!e), continuation: page.continuation };
}
