/**
 * The events outbox and its sweep triggers: the only storage calls of event recording.
 *
 * - A task's events are stored with the history entries of the transitions they report: held in
 *   the task row, or on history rows (property `event`) written in the same entity-group
 *   transaction as the task row (shared/ops/history.ts `holdHistory`). A committed transition
 *   always has its event, and an aborted one never does.
 * - A sweep trigger (queue `events`, visible after a delay) is put *before* a write whose events
 *   have somewhere to go, and deleted once they were delivered. If the process dies in between,
 *   the reaper receives the trigger and delivers what the write committed, found by key (no scans).
 *   A write that puts a claim-expiry or deadline trigger anyway lets that one guard its events
 *   instead (shared/events/recorder.ts).
 * - Artifact, group and hook events are not task writes: their trigger carries the event itself,
 *   and the row the write leaves (artifact, sealed group, the hook or its absence) is the proof
 *   that it committed.
 */
import { allRows, type Entity, type Storage } from '../storage/storage';
import { heldEntries, historyRowKey, readHeld, readNewestFirst } from '../ops/history';
import type { HeldEntry } from '../tasks/model';
import type { QueueEvent } from './exchanges';
import type { TriggerRef } from '../tasks/triggers';

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

/**
 * The committed events of a task with these seqs: from the entries its row holds (one point query),
 * then, for any not held there, one range query over its history rows, read to its end.
 */
export async function readTaskOutbox(storage: Storage, taskId: string, seqs: number[]): Promise<QueueEvent[]> {
  if (!seqs.length) return [];
  const wanted = new Set(seqs);
  const held = heldEntries<QueueEvent>({ historyHeld: await readHeld(storage, taskId) });
  const found = held.flatMap((h) => (h.event && wanted.has(h.event.seq) ? [h.event] : []));
  const rest = seqs.filter((s) => !held.some((h) => h.entry.seq === s));
  if (!rest.length) return found.sort((a, b) => a.seq - b.seq);
  const lo = historyRowKey(taskId, Math.max(...rest));
  const hi = historyRowKey(taskId, Math.min(...rest));
  const history = await allRows(storage.table('Tasks'), { partitionKey: taskId, rowKey: { ge: lo, le: hi } });
  const fromRows = history.map((r) => outboxEvent(r)).filter((e): e is QueueEvent => !!e && wanted.has(e.seq));
  return [...found, ...fromRows].sort((a, b) => a.seq - b.seq);
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

/**
 * A page of a task's recorded events, newest first (entries without an event, e.g. reclaims, are
 * skipped). `held`: the entries the task's row holds, when the caller has the row.
 */
export async function readTaskEvents(
  storage: Storage,
  taskId: string,
  limit: number,
  continuation?: string,
  held?: HeldEntry[],
): Promise<{ events: QueueEvent[]; continuation?: string }> {
  const page = await readNewestFirst(
    storage,
    taskId,
    { limit, continuation, held },
    { fromHeld: (h) => h.event as QueueEvent | undefined, fromRow: outboxEvent },
  );
  return { events: page.items, continuation: page.continuation };
}
