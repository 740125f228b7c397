/**
 * Task history: one row per run transition (who, when, from which state, why), stored in the
 * task's own partition and written in the same entity-group transaction as the task row, so the
 * history and the task's state can never disagree. A write's entries are part of its plan
 * (shared/lifecycle/planner.ts), which derives them from the transition's record (`historyOf`),
 * numbers them here (`numberHistory`) and keeps the newest in the task row (`holdHistory`).
 */
import { allRows, firstRow, type Entity, type KeyRange, type Storage } from '../storage/storage';
import { taskRowKey, type HeldEntry, type Run, type TaskRecord } from '../tasks/model';
import { inputError } from '../errors';
import { prefixRange } from './keys';

export type HistoryEvent = 'created' | 'scheduled' | 'claimed' | 'reclaimed' | 'resolved' | 'prioritized';

export interface HistoryEntry {
  /** 1 for the task's first entry, then counting up. */
  seq: number;
  time: string;
  event: HistoryEvent;
  /** Absent for task-level events (`created`). */
  runId?: number;
  /** The run's state before, or null for a new run / new task. */
  from: string | null;
  to: string;
  /** reasonCreated for new runs, reasonResolved for resolutions, else the event name. */
  reason: string;
  /** clientId of the caller, or `reaper`; absent when the write had no known actor. */
  actor?: string;
  workerGroup?: string;
  workerId?: string;
  takenUntil?: string;
}

export type Transition = Omit<HistoryEntry, 'seq' | 'time' | 'actor'>;

/**
 * History row keys: `h-`, the inverted sequence number (a range query reads newest first) and the
 * taskId (row keys unique across partitions keep Azurite's point writes O(1), see taskRowKey).
 */
const HISTORY_PREFIX = 'h-';
const MAX_SEQ = 9_999_999_999;
/** An entity-group transaction holds 100 operations; the task row takes one. */
export const MAX_ENTRIES_PER_WRITE = 99;

export function historyRowKey(taskId: string, seq: number): string {
  return `${HISTORY_PREFIX}${String(MAX_SEQ - seq).padStart(10, '0')}-${taskId}`;
}

function worker(r: Run): Pick<Transition, 'workerGroup' | 'workerId'> {
  return r.workerGroup ? { workerGroup: r.workerGroup, workerId: r.workerId } : {};
}

/** The task is new (as Taskcluster: defined, unscheduled). */
export const createdEntry = (): Transition => ({ event: 'created', from: null, to: 'unscheduled', reason: 'created' });

/** Run `runId` of `t` is a new pending run. */
export const scheduledEntry = (t: TaskRecord, runId: number): Transition => ({
  event: 'scheduled',
  runId,
  from: null,
  to: 'pending',
  reason: t.runs[runId].reasonCreated,
});

/** Run `runId` of `t` is running (claimed, or `reclaimed` with a later takenUntil). */
export function claimedEntry(t: TaskRecord, runId: number, event: 'claimed' | 'reclaimed'): Transition {
  const a = t.runs[runId];
  return { event, runId, from: event === 'claimed' ? 'pending' : 'running', to: 'running', reason: event, ...worker(a), takenUntil: a.takenUntil };
}

/** Run `runId` of `t` is resolved, from state `from` (null: the run was added resolved). */
export function resolvedEntry(t: TaskRecord, runId: number, from: 'pending' | 'running' | null): Transition {
  const a = t.runs[runId];
  return { event: 'resolved', runId, from, to: a.state, reason: a.reasonResolved ?? a.state, ...worker(a) };
}

/** Numbers a write's transitions on from the task's count; bumps `after.historySeq` (the planner's own copy). */
export function numberHistory(transitions: Transition[], after: TaskRecord, time: string, actor: string | undefined): HistoryEntry[] {
  // Room in the transaction for the held entries a flush writes with them (`holdHistory`).
  const list = transitions.slice(0, MAX_ENTRIES_PER_WRITE - HELD_MAX_ENTRIES);
  let seq = after.historySeq ?? 0;
  const entries = list.map((t) => ({ seq: ++seq, time, ...t, ...(actor ? { actor } : {}) }));
  if (entries.length) after.historySeq = seq;
  return entries;
}

/**
 * A task's newest entries are kept in its row (`historyHeld`, with their events: the outbox), so a
 * write that changes nothing else of its partition is a single-entity merge, not an entity-group
 * transaction with a history row (a claim, a report): measured on Azurite, 0.1–0.5 ms less of its
 * CPU each (docs/performance.md, issue 36's fourth step).
 */
export const HELD_MAX_ENTRIES = 8;
/** The held entries' and events' JSON at most: a string property holds 32 K characters, and the row holds the definition too. */
export const HELD_MAX_CHARS = 24_000;

/** The held entries of a task, oldest first. */
export function heldEntries<E extends { seq: number } = { seq: number }>(task: Pick<TaskRecord, 'historyHeld'>): { entry: HistoryEntry; event?: E }[] {
  return (task.historyHeld ?? []) as { entry: HistoryEntry; event?: E }[];
}

/**
 * Keeps a write's new entries (and their events) in the row beside those held already, or, when
 * they would not fit, returns all of them to be written as history rows in the write's
 * transaction (the row then holds none). Either way the entries commit with the row.
 */
export function holdHistory<E extends { seq: number }>(after: TaskRecord, entries: HistoryEntry[], events: E[]): { entries: HistoryEntry[]; events: E[] } {
  if (!entries.length) return { entries: [], events: [] };
  const held = [...heldEntries<E>(after), ...entries.map((entry) => ({ entry, event: events.find((e) => e.seq === entry.seq) }))];
  if (held.length <= HELD_MAX_ENTRIES && JSON.stringify(held).length <= HELD_MAX_CHARS) {
    after.historyHeld = held.map((h) => (h.event ? h : { entry: h.entry }));
    return { entries: [], events: [] };
  }
  delete after.historyHeld;
  return { entries: held.map((h) => h.entry), events: held.flatMap((h) => (h.event ? [h.event] : [])) };
}

/** The history rows of `entries` (their events are added by shared/events/outbox.ts `attachToHistoryRows`). */
export function historyRowsOf(taskId: string, entries: HistoryEntry[]): Entity[] {
  return entries.map((e) => ({ partitionKey: taskId, rowKey: historyRowKey(taskId, e.seq), entry: JSON.stringify(e) }));
}

/** The seq of a history row, from its key. */
function rowSeq(rowKey: string): number {
  return MAX_SEQ - Number(rowKey.slice(HISTORY_PREFIX.length, HISTORY_PREFIX.length + 10));
}

/** The entries a task's row holds (one point query of that property), or none if the task is gone. */
export async function readHeld(storage: Storage, taskId: string): Promise<HeldEntry[]> {
  const row = await firstRow(storage.table('Tasks'), { partitionKey: taskId, rowKey: taskRowKey(taskId), select: ['historyHeld'] });
  return row?.historyHeld ? (JSON.parse(row.historyHeld as string) as HeldEntry[]) : [];
}

/**
 * A page of what a task's history says, newest first: from the entries its row holds, then from
 * its history rows (`fromHeld` and `fromRow` pick what a reader lists; undefined skips one). The
 * continuation is the seq to go on below: a flush between two pages moves held entries into rows
 * under the same seqs, so nothing is listed twice or left out. `held`: the row's, when the caller has it.
 */
export async function readNewestFirst<T>(
  storage: Storage,
  taskId: string,
  page: { limit: number; continuation?: string; held?: HeldEntry[] },
  pick: { fromHeld: (h: { entry: HistoryEntry; event?: unknown }) => T | undefined; fromRow: (row: Entity) => T | undefined; select?: string[] },
): Promise<{ items: T[]; continuation?: string }> {
  const below = page.continuation === undefined ? Infinity : Number(page.continuation);
  if (!(below > 0)) throw inputError('continuationToken is not one this list gave');
  const items: T[] = [];
  let last = below;
  const held = page.held ?? (await readHeld(storage, taskId));
  for (const h of heldEntries({ historyHeld: held })
    .filter((h) => h.entry.seq < below)
    .reverse()) {
    if (items.length === page.limit) return { items, continuation: String(last) };
    const item = pick.fromHeld(h);
    last = h.entry.seq;
    if (item !== undefined) items.push(item);
  }
  const room = page.limit - items.length;
  if (!room) return { items, continuation: String(last) };
  // Rows below the last held entry listed: one that a flush moved into rows meanwhile is not listed twice.
  const rowKey = last === Infinity ? prefixRange(HISTORY_PREFIX) : { gt: historyRowKey(taskId, last), lt: `${HISTORY_PREFIX}~` };
  const rows = await allRows(
    storage.table('Tasks'),
    { partitionKey: taskId, rowKey, ...(pick.select ? { select: ['RowKey', ...pick.select] } : {}) },
    { max: room },
  );
  for (const r of rows) {
    const item = pick.fromRow(r);
    if (item !== undefined) items.push(item);
  }
  return { items, ...(rows.length === room ? { continuation: String(rowSeq(rows[rows.length - 1].rowKey)) } : {}) };
}

/** A page of a task's history, newest first. */
export async function readHistory(
  storage: Storage,
  taskId: string,
  limit: number,
  continuation?: string,
): Promise<{ entries: HistoryEntry[]; continuation?: string }> {
  const page = await readNewestFirst(
    storage,
    taskId,
    { limit, continuation },
    { fromHeld: (h) => h.entry, fromRow: (r) => JSON.parse(r.entry as string) as HistoryEntry, select: ['entry'] },
  );
  return { entries: page.items, continuation: page.continuation };
}

/** The row keys of a task's history: from its count when known, else the range that holds them (to delete them with the task). */
export function historyKeys(task: TaskRecord | undefined): string[] | KeyRange {
  if (!task) return prefixRange(HISTORY_PREFIX);
  // The held entries (the newest) have no rows.
  const n = (task.historySeq ?? 0) - heldEntries(task).length;
  return Array.from({ length: n }, (_, i) => historyRowKey(task.taskId, i + 1));
}
