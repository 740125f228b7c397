/**
 * Task and run records, the task status as clients see it, and the row encoding in Table Storage.
 */
import { inputError, ApiError } from '../errors';
import { PRIORITIES, Priority } from './vocabulary';
import type { Entity } from '../storage/storage';
import type { ClaimRef, DeadlineRef } from './triggers';

export type RunState = 'pending' | 'running' | 'completed' | 'failed' | 'exception';
export type TaskState = RunState | 'unscheduled';
export type ReasonCreated = 'scheduled' | 'retry' | 'task-retry' | 'rerun' | 'exception' | 'resumed';
export type ReasonResolved =
  | 'completed'
  | 'failed'
  | 'deadline-exceeded'
  | 'canceled'
  | 'claim-expired'
  | 'worker-shutdown'
  | 'malformed-payload'
  | 'resource-unavailable'
  | 'internal-error'
  | 'intermittent-task'
  | 'superseded'
  /** The worker suspended the run (suspendRun); a `resumed` run follows. */
  | 'suspended';

export interface Run {
  runId: number;
  state: RunState;
  reasonCreated: ReasonCreated;
  reasonResolved?: ReasonResolved;
  workerGroup?: string;
  workerId?: string;
  takenUntil?: string;
  scheduled: string;
  started?: string;
  resolved?: string;
  /** The pending hint that may claim this run; other hints for it are stale. */
  hintId?: string;
  /**
   * The hint message that claimed this run: only that message (released after a claim that failed
   * late) replays the claim. A second copy of the hint, left by a queue put whose answer was lost,
   * is another message and must not hand the run out again.
   */
  claimedWith?: string;
  /** The claim-expiry trigger of the current claim (a message, or its expiry-index row), deleted once the run leaves `running`. */
  claimTrigger?: ClaimRef;
  /** Set by createArtifact before the run's first s3 artifact row: only then has the run uploads to commit. */
  uploads?: boolean;
  /** Set by createLiveLog while the run runs: its resolution seals the live log. */
  liveLog?: boolean;
}

/** The normalized task definition, exactly as `task(taskId)` returns it. */
export interface TaskDefinition {
  provisionerId: string;
  workerType: string;
  taskQueueId: string;
  schedulerId: string;
  projectId: string;
  taskGroupId: string;
  dependencies: string[];
  requires: 'all-completed' | 'all-resolved';
  routes: string[];
  priority: Priority;
  retries: number;
  created: string;
  deadline: string;
  expires: string;
  scopes: string[];
  payload: Record<string, unknown>;
  metadata: { name: string; description: string; owner: string; source: string };
  tags: Record<string, string>;
  extra: Record<string, unknown>;
  /** Delayed start (extension): run 0 becomes claimable no earlier than this; absent = at once. */
  notBefore?: string;
  /** Concurrency key (extension, shared/tasks/concurrency-keys.ts): at most one task per key runs at a time. */
  concurrencyKey?: string;
}

/**
 * A history entry kept in the task row (its shape is shared/ops/history.ts `HistoryEntry`), with
 * its event if it has one (shared/events/exchanges.ts `QueueEvent`, the outbox).
 */
export interface HeldEntry {
  entry: { seq: number };
  event?: { seq: number };
}

export interface TaskRecord {
  taskId: string;
  definition: TaskDefinition;
  runs: Run[];
  retriesLeft: number;
  /** takenUntil of the running run, '' otherwise: what a claim-expiry trigger must match. */
  takenUntil: string;
  /** Set once a dependent task has been created, so resolution knows to look for dependents. */
  hasDependents: boolean;
  /** runId whose resolution has been propagated to dependents (-1 = none yet). */
  dependentsNotified: number;
  /** Number of history entries recorded for this task (shared/ops/history.ts); absent = 0. */
  historySeq?: number;
  /**
   * The newest history entries, with their events, kept in the row rather than as history rows
   * (shared/ops/history.ts `holdHistory`): the entries numbered after every row's. Absent = none.
   */
  historyHeld?: HeldEntry[];
  /** The deadline trigger: a message of its own, deleted once the task is finally resolved, or its expiry-index row (rerun adds a new one). */
  deadlineTrigger?: DeadlineRef;
  /**
   * The task created its group in its own row's transaction and nobody joined it since (the first
   * joiner sets it false, shared/tasks/groups.ts): its resolution's write is the group's close.
   */
  groupAlone?: true;
  /** The continuation of the last suspension (suspendRun), JSON, handed to the worker that claims the resumed run. */
  continuation?: string;
  /** changeTaskPriority's override; the stored definition keeps the priority it was created with. */
  priority?: Priority;
  /**
   * Index buckets of its task queue when the task was created (its pending shard count; absent: 1):
   * its operator index rows all live in bucket jumpHash(taskId, indexBuckets) (shared/ops/indexes.ts).
   */
  indexBuckets?: number;
  etag?: string;
}

export interface TaskStatus {
  taskId: string;
  provisionerId: string;
  workerType: string;
  taskQueueId: string;
  schedulerId: string;
  projectId: string;
  taskGroupId: string;
  priority: Priority;
  deadline: string;
  expires: string;
  retriesLeft: number;
  state: TaskState;
  runs: Run[];
}

/** Priority levels, highest first; index 0 is the highest. */
export function priorityLevel(p: Priority): number {
  return PRIORITIES.length - PRIORITIES.indexOf(p);
}

/** The priority the task's runs are queued at: a changed priority, else the definition's. */
export function priorityOf(t: TaskRecord): Priority {
  return t.priority ?? t.definition.priority;
}

/** The definition as clients see it: with the current priority (changeTaskPriority). */
export function definitionOf(t: TaskRecord): TaskDefinition {
  return t.priority ? { ...t.definition, priority: t.priority } : t.definition;
}

export function taskState(t: TaskRecord): TaskState {
  const last = t.runs[t.runs.length - 1];
  return last ? last.state : 'unscheduled';
}

export function isResolved(state: TaskState): boolean {
  return state === 'completed' || state === 'failed' || state === 'exception';
}

function publicRun(r: Run): Run {
  const { hintId: _h, claimedWith: _m, claimTrigger: _c, uploads: _u, liveLog: _l, ...rest } = r;
  void _h;
  void _m;
  void _c;
  void _u;
  void _l;
  return rest;
}

/**
 * The task as it was while run `runId` was new and pending, when the same write went on to claim
 * it (createTask handing run 0 to a waiting claimWork): what task-pending and createTask report.
 */
export function whilePending(t: TaskRecord, runId: number): TaskRecord {
  const r = t.runs[runId];
  if (!r || r.state === 'pending') return t;
  const run: Run = { runId, state: 'pending', reasonCreated: r.reasonCreated, scheduled: r.scheduled };
  return { ...t, runs: [...t.runs.slice(0, runId), run], takenUntil: '' };
}

export function taskStatus(t: TaskRecord): TaskStatus {
  const d = t.definition;
  return {
    taskId: t.taskId,
    provisionerId: d.provisionerId,
    workerType: d.workerType,
    taskQueueId: d.taskQueueId,
    schedulerId: d.schedulerId,
    projectId: d.projectId,
    taskGroupId: d.taskGroupId,
    priority: priorityOf(t),
    deadline: d.deadline,
    expires: d.expires,
    retriesLeft: t.retriesLeft,
    state: taskState(t),
    runs: t.runs.map(publicRun),
  };
}

/** Azure binary properties hold at most 64 KiB. */
const CHUNK_BYTES = 64 * 1024;
/**
 * Largest accepted definition: 12 chunks, leaving room for runs and bookkeeping in the 1 MiB entity.
 */
export const MAX_DEFINITION_BYTES = 12 * CHUNK_BYTES;

/**
 * The task row's key, unique per task rather than a constant: Azurite finds a row by its RowKey
 * first and then filters by PartitionKey, so a RowKey shared by every task made each point read or
 * write cost O(stored tasks) there (on Azure a point lookup costs the same either way).
 */
export const taskRowKey = (taskId: string): string => `task~${taskId}`;

/** The task row; `withDefinition` false leaves out the definition's chunks (see encodeTaskUpdate). */
export function encodeTask(t: TaskRecord, withDefinition = true): Entity {
  if (!withDefinition) return { ...taskProperties(t, 0) };
  const json = Buffer.from(JSON.stringify(t.definition), 'utf8');
  if (json.length > MAX_DEFINITION_BYTES) {
    throw new ApiError('InputTooLarge', `task definition is ${json.length} bytes; at most ${MAX_DEFINITION_BYTES} bytes are accepted`);
  }
  const e: Entity = taskProperties(t, Math.ceil(json.length / CHUNK_BYTES));
  for (let i = 0; i * CHUNK_BYTES < json.length; i++) {
    e[`def${i}`] = new Uint8Array(json.subarray(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES));
  }
  return e;
}

/** The row's properties besides the definition's chunks. */
function taskProperties(t: TaskRecord, defChunks: number): Entity {
  return {
    partitionKey: t.taskId,
    rowKey: taskRowKey(t.taskId),
    defChunks,
    runs: JSON.stringify(t.runs),
    retriesLeft: t.retriesLeft,
    takenUntil: t.takenUntil,
    hasDependents: t.hasDependents,
    dependentsNotified: t.dependentsNotified,
    historySeq: t.historySeq ?? 0,
    historyHeld: t.historyHeld?.length ? JSON.stringify(t.historyHeld) : '',
    deadlineTrigger: t.deadlineTrigger ? JSON.stringify(t.deadlineTrigger) : '',
    ...(t.groupAlone ? { groupAlone: true } : {}),
    ...(t.priority ? { priority: t.priority } : {}),
    ...(t.continuation ? { continuation: t.continuation } : {}),
    ...(t.indexBuckets && t.indexBuckets > 1 ? { indexBuckets: t.indexBuckets } : {}),
    state: taskState(t),
    taskQueueId: t.definition.taskQueueId,
    taskGroupId: t.definition.taskGroupId,
    deadline: t.definition.deadline,
    expires: t.definition.expires,
  };
}

/**
 * The task row's properties a write after the create changes: everything but the definition,
 * which never changes once created (its chunks are most of the row's bytes). Merged under the
 * row's ETag, so the storage service handles a few hundred bytes per transition instead of the
 * whole definition. Optional properties a transition may drop are given their empty value, which
 * `decodeTask` reads as absent.
 */
export function encodeTaskUpdate(t: TaskRecord): Entity {
  const { defChunks: _n, ...row } = encodeTask(t, false);
  void _n;
  return { groupAlone: false, priority: '', continuation: '', indexBuckets: 0, ...row };
}

/** `definition`: the row's, decoded already (it never changes once created). */
export function decodeTask(e: Record<string, unknown> & { etag?: string }, definition?: TaskDefinition): TaskRecord {
  return {
    taskId: e.partitionKey as string,
    definition: definition ?? decodeDefinition(e),
    runs: JSON.parse(e.runs as string),
    retriesLeft: Number(e.retriesLeft),
    takenUntil: (e.takenUntil as string) ?? '',
    hasDependents: Boolean(e.hasDependents),
    dependentsNotified: e.dependentsNotified === undefined ? -1 : Number(e.dependentsNotified),
    historySeq: e.historySeq === undefined ? 0 : Number(e.historySeq),
    ...(e.historyHeld ? { historyHeld: JSON.parse(e.historyHeld as string) as HeldEntry[] } : {}),
    deadlineTrigger: e.deadlineTrigger ? JSON.parse(e.deadlineTrigger as string) : undefined,
    ...(e.groupAlone ? { groupAlone: true as const } : {}),
    ...(e.priority ? { priority: e.priority as Priority } : {}),
    ...(e.continuation ? { continuation: e.continuation as string } : {}),
    ...(Number(e.indexBuckets) > 1 ? { indexBuckets: Number(e.indexBuckets) } : {}),
    etag: e.etag,
  };
}

function decodeDefinition(e: Record<string, unknown>): TaskDefinition {
  const n = Number(e.defChunks);
  const parts: Buffer[] = [];
  for (let i = 0; i < n; i++) parts.push(Buffer.from(e[`def${i}`] as Uint8Array));
  return JSON.parse(Buffer.concat(parts).toString('utf8'));
}

/** JS `toJSON()` form with milliseconds, so equivalent dates compare equal. */
export function normalizeDate(s: string, field: string): string {
  const d = typeof s === 'string' ? new Date(s) : new Date(NaN);
  // Date reads `23:59:60` (a leap second) as no date at all: refused like any invalid date.
  if (Number.isNaN(d.getTime()))
    throw inputError(`${field} is not a valid date${/:60(\.\d+)?(Z|[+-])/i.test(String(s)) ? ' (leap seconds are not accepted)' : ''}`);
  return d.toJSON();
}
