/**
 * The queue's events, as Taskcluster publishes them (services/queue/src/exchanges.js and
 * schemas/v1/*-message.yml): exchange names, payloads, routing keys and `route.<route>` CCs.
 * Everything here is pure: the events of a task write are made from its history entries (its plan,
 * shared/lifecycle/planner.ts) and numbered like them, so the same transition always yields the same event
 * (same id, same seq) however often it is recomputed or re-sent.
 */
import { TaskRecord, Run, taskStatus, TaskStatus, whilePending } from '../tasks/model';
import type { HistoryEntry } from '../ops/history';

/** The prefix taskcluster-client's QueueEvents puts before every exchange name. */
export const EXCHANGE_PREFIX = 'exchange/taskcluster-queue/v1/';

export const TASK_EXCHANGES = [
  'task-defined',
  'task-pending',
  'task-running',
  'artifact-created',
  'task-completed',
  'task-failed',
  'task-exception',
  'task-priority-changed',
] as const;
export const GROUP_EXCHANGES = ['task-group-resolved', 'task-group-sealed', 'task-group-priority-changed'] as const;
export type TaskExchange = (typeof TASK_EXCHANGES)[number];
export type GroupExchange = (typeof GROUP_EXCHANGES)[number];
export type ExchangeName = TaskExchange | GroupExchange;
/** Exchanges this queue publishes (the priority ones are newer than taskcluster-client v87's QueueEvents: bind them by name). */
export const EXCHANGES: readonly ExchangeName[] = [...TASK_EXCHANGES, ...GROUP_EXCHANGES];

/** The hooks service's exchanges (Taskcluster's services/hooks/src/exchanges.js): a hook changed. */
export const HOOKS_EXCHANGE_PREFIX = 'exchange/taskcluster-hooks/v1/';
export const HOOK_EXCHANGES = ['hook-created', 'hook-updated', 'hook-deleted'] as const;
export type HookExchange = (typeof HOOK_EXCHANGES)[number];

/** The auth service's exchanges (Taskcluster's services/auth/src/exchanges.js): a client or role changed. */
export const AUTH_EXCHANGE_PREFIX = 'exchange/taskcluster-auth/v1/';
export const AUTH_EXCHANGES = ['client-created', 'client-updated', 'client-deleted', 'role-created', 'role-updated', 'role-deleted'] as const;
export type AuthExchange = (typeof AUTH_EXCHANGES)[number];

/** Every exchange a subscription can bind, by full name: the queue's, the hooks', then auth's. */
export const BINDABLE_EXCHANGES: readonly string[] = [
  ...EXCHANGES.map(exchangeName),
  ...HOOK_EXCHANGES.map((e) => HOOKS_EXCHANGE_PREFIX + e),
  ...AUTH_EXCHANGES.map((e) => AUTH_EXCHANGE_PREFIX + e),
];

/** Taskcluster's routing-key limit (AMQP allows 255 bytes). */
export const MAX_ROUTING_KEY = 255;

/** One event, as delivered: `payload` is exactly the Taskcluster message. */
export interface QueueEvent {
  /** Stable: the same transition always has the same id, so consumers can drop repeats. */
  id: string;
  /** Position within the task (the task's history sequence); artifacts and groups: see their builders. */
  seq: number;
  /** Full exchange name, e.g. `exchange/taskcluster-queue/v1/task-completed`. */
  exchange: string;
  /** The primary routing key. */
  routingKey: string;
  /** The CC routing keys, `route.<route>` per task route. */
  routes: string[];
  payload: Record<string, unknown>;
}

export function exchangeName(e: ExchangeName): string {
  return EXCHANGE_PREFIX + e;
}

/** A routing-key word: `_` when missing; words never contain `.` (Taskcluster ids cannot). */
function word(v: string | number | undefined): string {
  if (v === undefined || v === null || v === '') return '_';
  return String(v).replace(/\./g, '_');
}

/** `primary.<taskId>.<runId>.<workerGroup>.<workerId>.<provisionerId>.<workerType>.<schedulerId>.<taskGroupId>._` */
export function taskRoutingKey(s: TaskStatus, run?: { runId?: number; workerGroup?: string; workerId?: string }): string {
  return [
    'primary',
    word(s.taskId),
    word(run?.runId),
    word(run?.workerGroup),
    word(run?.workerId),
    word(s.provisionerId),
    word(s.workerType),
    word(s.schedulerId),
    word(s.taskGroupId),
    '_',
  ].join('.');
}

/** `primary.<taskGroupId>.<schedulerId>._` */
export function groupRoutingKey(taskGroupId: string, schedulerId: string): string {
  return ['primary', word(taskGroupId), word(schedulerId), '_'].join('.');
}

export function ccRoutes(routes: string[]): string[] {
  return routes.map((r) => `route.${r}`);
}

function taskEvent(
  t: TaskRecord,
  seq: number,
  exchange: TaskExchange,
  run: Run | undefined,
  extra: Record<string, unknown>,
  status: TaskStatus = taskStatus(t),
): QueueEvent {
  const withWorker = run && run.workerGroup ? { workerGroup: run.workerGroup, workerId: run.workerId } : {};
  const payload: Record<string, unknown> = { version: 1, status, ...(run ? { runId: run.runId } : {}), ...withWorker, ...extra };
  return {
    id: `${t.taskId}.${seq}`,
    seq,
    exchange: exchangeName(exchange),
    routingKey: taskRoutingKey(status, run ? { runId: run.runId, ...withWorker } : undefined),
    routes: ccRoutes(t.definition.routes),
    payload,
  };
}

/** The status of a task just defined: unscheduled, no runs (whatever the same write did next). */
function definedStatus(t: TaskRecord): TaskStatus {
  return { ...taskStatus(t), state: 'unscheduled', runs: [], retriesLeft: t.definition.retries };
}

const RESOLVED_EXCHANGE: Record<string, TaskExchange> = { completed: 'task-completed', failed: 'task-failed', exception: 'task-exception' };

/**
 * The events of one task write, from its history entries, in their order (a retried run's
 * exception before the new run's pending). Their seq is the entry's (shared/ops/history.ts):
 * reclaims have history but no event, so seqs can skip numbers but never repeat or go back.
 * `status` is the task's status after the write, as Taskcluster sends it.
 */
export function taskEvents(entries: Pick<HistoryEntry, 'seq' | 'event' | 'runId' | 'from' | 'to'>[], after: TaskRecord): QueueEvent[] {
  const out: QueueEvent[] = [];
  const tags = { task: { tags: after.definition.tags ?? {} } };
  for (const tr of entries) {
    const seq = tr.seq;
    const run = tr.runId === undefined ? undefined : after.runs[tr.runId];
    switch (tr.event) {
      case 'created':
        // As Taskcluster: the task as defined, before any run (task-pending then says it is pending).
        out.push(taskEvent(after, seq, 'task-defined', undefined, tags, definedStatus(after)));
        break;
      case 'scheduled': {
        // As it was while pending, if the same write claimed it too (createTask's hand-over).
        const t = whilePending(after, tr.runId!);
        out.push(taskEvent(t, seq, 'task-pending', t.runs[tr.runId!], tags));
        break;
      }
      case 'claimed':
        out.push(taskEvent(after, seq, 'task-running', run, { takenUntil: run!.takenUntil, ...tags }));
        break;
      case 'resolved': {
        const ex = RESOLVED_EXCHANGE[tr.to];
        if (ex) out.push(taskEvent(after, seq, ex, run, tags));
        break;
      }
      case 'prioritized':
        // Taskcluster's message names no run: the routing key has `_` for runId and the worker.
        out.push(taskEvent(after, seq, 'task-priority-changed', undefined, { oldPriority: tr.from, newPriority: tr.to }));
        break;
      default:
        break; // reclaimed: Taskcluster publishes nothing
    }
  }
  return out;
}

export interface ArtifactInfo {
  storageType: string;
  name: string;
  expires: string;
  contentType: string;
}

/**
 * Taskcluster sends artifact-created when an artifact becomes visible: reference, link and error
 * artifacts at createArtifact, object artifacts at finishArtifact (`present`); s3 uploads never.
 */
export function announcesArtifact(storageType: string, present: boolean): boolean {
  return storageType !== 's3' && present;
}

/**
 * artifact-created for a run's artifact. Its id names the artifact, so a repeated createArtifact
 * repeats the same event; its seq is that of the task's latest transition when it was created
 * (the run's claim, or later), so it sorts after the task-running event of its run.
 */
export function artifactEvent(t: TaskRecord, runId: number, a: ArtifactInfo): QueueEvent {
  const run = t.runs[runId];
  const seq = t.historySeq ?? 0;
  const e = taskEvent(t, seq, 'artifact-created', run, {
    artifact: { storageType: a.storageType, name: a.name, expires: a.expires, contentType: a.contentType },
  });
  return { ...e, id: `${t.taskId}.${runId}.artifact.${a.name}` };
}

export interface GroupInfo {
  taskGroupId: string;
  schedulerId: string;
  expires: string;
  sealed?: string;
}

/**
 * task-group-resolved, as Taskcluster sends it (`{version, taskGroupId, schedulerId}`, no CCs): the
 * group had no unresolved task left once the resolution of `taskId`'s run `runId` was counted. A
 * group resolves again after a rerun or a new task, so that resolution names the event.
 */
export function groupResolvedEvent(taskGroupId: string, schedulerId: string, cause: { taskId: string; runId: number }): QueueEvent {
  return {
    id: `${taskGroupId}.resolved.${cause.taskId}.${cause.runId}`,
    seq: 0,
    exchange: exchangeName('task-group-resolved'),
    routingKey: groupRoutingKey(taskGroupId, schedulerId),
    routes: [],
    payload: { version: 1, taskGroupId, schedulerId },
  };
}

/** task-group-priority-changed: Taskcluster's summary of a changeTaskGroupPriority call (`id` names the call). */
export function groupPriorityChangedEvent(
  g: { taskGroupId: string; schedulerId: string },
  newPriority: string,
  tasksAffected: number,
  callId: string,
): QueueEvent {
  return {
    id: `${g.taskGroupId}.priority.${callId}`,
    seq: 0,
    exchange: exchangeName('task-group-priority-changed'),
    routingKey: groupRoutingKey(g.taskGroupId, g.schedulerId),
    routes: [],
    payload: { version: 1, taskGroupId: g.taskGroupId, schedulerId: g.schedulerId, newPriority, tasksAffected },
  };
}

/** task-group-sealed: sealing happens once, so the group id makes a stable event id. */
export function groupSealedEvent(g: GroupInfo): QueueEvent {
  return {
    id: `${g.taskGroupId}.sealed`,
    seq: 0,
    exchange: exchangeName('task-group-sealed'),
    routingKey: groupRoutingKey(g.taskGroupId, g.schedulerId),
    routes: [],
    payload: { version: 1, taskGroupId: g.taskGroupId, schedulerId: g.schedulerId, expires: g.expires, ...(g.sealed ? { sealed: g.sealed } : {}) },
  };
}

/**
 * hook-created / hook-updated / hook-deleted, as Taskcluster's hooks service sends them: the message
 * is `{hookGroupId, hookId}`, the routing key only its reserved word (`_`), no CCs. Each call makes
 * one (Taskcluster publishes again on a repeated call too), so `callId` names the event.
 */
/**
 * client-* and role-* as Taskcluster's auth service sends them: the message is `{clientId}` or
 * `{roleId}`, the routing key only its reserved word (`_`), no CCs. Each call makes one, so `callId`
 * names the event.
 */
export function authChangedEvent(change: AuthExchange, id: { clientId: string } | { roleId: string }, callId: string): QueueEvent {
  return {
    id: `${'clientId' in id ? `client/${id.clientId}` : `role/${id.roleId}`}.${change}.${callId}`,
    seq: 0,
    exchange: AUTH_EXCHANGE_PREFIX + change,
    routingKey: '_',
    routes: [],
    payload: { ...id },
  };
}

export function hookChangedEvent(change: HookExchange, hookGroupId: string, hookId: string, callId: string): QueueEvent {
  return {
    id: `${hookGroupId}/${hookId}.${change}.${callId}`,
    seq: 0,
    exchange: HOOKS_EXCHANGE_PREFIX + change,
    routingKey: '_',
    routes: [],
    payload: { hookGroupId, hookId },
  };
}
