/**
 * Task history: one row per run transition (who, when, from which state, why), stored in the
 * task's own partition and written in the same entity-group transaction as the task row, so the
 * history and the task's state can never disagree. A write's entries are part of its plan
 * (shared/lifecycle/planner.ts), which derives them from the transition's record (`historyOf`) and
 * numbers them here (`historyRows`).
 */
import { readPage, type Entity, type KeyRange, type Storage } from '../storage/storage';
import type { Run, TaskRecord } from '../tasks/model';
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

/** Numbers a write's transitions on from the task's count and builds their rows; bumps `after.historySeq` (the planner's own copy). */
export function historyRows(
  transitions: Transition[],
  after: TaskRecord,
  time: string,
  actor: string | undefined,
): { rows: Entity[]; entries: HistoryEntry[] } {
  const list = transitions.slice(0, MAX_ENTRIES_PER_WRITE);
  let seq = after.historySeq ?? 0;
  const entries = list.map((t) => ({ seq: ++seq, time, ...t, ...(actor ? { actor } : {}) }));
  if (entries.length) after.historySeq = seq;
  const rows = entries.map((e) => ({ partitionKey: after.taskId, rowKey: historyRowKey(after.taskId, e.seq), entry: JSON.stringify(e) }));
  return { rows, entries };
}

/** A page of a task's history, newest first. */
export async function readHistory(
  storage: Storage,
  taskId: string,
  limit: number,
  continuation?: string,
): Promise<{ entries: HistoryEntry[]; continuation?: string }> {
  const page = await readPage(storage.table('Tasks'), { partitionKey: taskId, rowKey: prefixRange(HISTORY_PREFIX), select: ['entry'] }, limit, continuation);
  return { entries: page.items.map((r) => JSON.parse(r.entry as string) as HistoryEntry), continuation: page.continuation };
}

/** The row keys of a task's history: from its count when known, else the range that holds them (to delete them with the task). */
export function historyKeys(task: TaskRecord | undefined): string[] | KeyRange {
  const n = task?.historySeq;
  return n ? Array.from({ length: n }, (_, i) => historyRowKey(task.taskId, i + 1)) : prefixRange(HISTORY_PREFIX);
}
