/**
 * Task history: one row per run transition (who, when, from which state, why), stored in the
 * task's own partition and written in the same entity-group transaction as the task row, so the
 * history and the task's state can never disagree. A write's entries are part of its plan
 * (shared/plans/plan.ts), which derives them from the runs before and after it with `historyRows`.
 */
import { readPage, type Entity, type KeyRange, type Storage } from '../storage/storage';
import { priorityOf, type Run, type TaskRecord } from '../tasks/model';
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

/** What changed between two versions of a task (before undefined: the task is new). */
export function transitions(before: TaskRecord | undefined, after: TaskRecord): Transition[] {
  const out: Transition[] = [];
  if (!before) out.push({ event: 'created', from: null, to: 'unscheduled', reason: 'created' });
  // changeTaskPriority: from and to are priorities (its event is task-priority-changed).
  if (before && priorityOf(before) !== priorityOf(after))
    out.push({ event: 'prioritized', from: priorityOf(before), to: priorityOf(after), reason: 'priority-changed' });
  for (const a of after.runs) {
    const b = before?.runs[a.runId];
    if (!b) {
      if (a.state === 'pending') out.push({ event: 'scheduled', runId: a.runId, from: null, to: 'pending', reason: a.reasonCreated });
      else out.push({ event: 'resolved', runId: a.runId, from: null, to: a.state, reason: a.reasonResolved ?? a.reasonCreated, ...worker(a) });
    } else if (b.state !== a.state) {
      if (a.state === 'running') {
        out.push({ event: 'claimed', runId: a.runId, from: b.state, to: 'running', reason: 'claimed', ...worker(a), takenUntil: a.takenUntil });
      } else {
        out.push({ event: 'resolved', runId: a.runId, from: b.state, to: a.state, reason: a.reasonResolved ?? a.state, ...worker(a) });
      }
    } else if (a.state === 'running' && a.takenUntil !== b.takenUntil) {
      out.push({ event: 'reclaimed', runId: a.runId, from: 'running', to: 'running', reason: 'reclaimed', ...worker(a), takenUntil: a.takenUntil });
    }
  }
  return out;
}

/** Numbers the transitions from the task's current sequence and builds their rows; bumps `after.historySeq` (the planner's own copy). */
export function historyRows(
  before: TaskRecord | undefined,
  after: TaskRecord,
  time: string,
  actor: string | undefined,
): { rows: Entity[]; entries: HistoryEntry[] } {
  const list = transitions(before, after).slice(0, MAX_ENTRIES_PER_WRITE);
  let seq = before?.historySeq ?? 0;
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
