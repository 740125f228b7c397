/**
 * Firing hooks on queue events (bindings). The events stream calls `fireForEvent` for each hook
 * whose bindings may match; delivery is at-least-once, so the taskId is derived from the event id:
 * a redelivered event re-creates the identical task, which createTask absorbs.
 */
import crypto from 'node:crypto';
import { ApiError } from '../errors';
import type { TaskStatus } from '../tasks/model';
import type { HookDefinition } from './store';
import { HookDeps, checkPayload, fireHook, lastFireOf, modifyHook, recordFire } from './hooks';

export interface QueueEvent {
  /** Stable across redeliveries. */
  id: string;
  /** e.g. `exchange/taskcluster-queue/v1/task-completed`. */
  exchange: string;
  routingKey: string;
  /** CC routing keys (`route.<route>` for each of the task's routes). */
  cc?: string[];
  payload: Record<string, unknown>;
  /** When the event happened; the fired task's `created` (stable across redeliveries). */
  time: string;
}

/** AMQP topic matching: `*` is one word, `#` zero or more. */
export function topicMatches(pattern: string, key: string): boolean {
  const p = pattern.split('.');
  const k = key.split('.');
  const match = (i: number, j: number): boolean => {
    if (i === p.length) return j === k.length;
    if (p[i] === '#') return match(i + 1, j) || (j < k.length && match(i, j + 1));
    if (j === k.length) return false;
    return (p[i] === '*' || p[i] === k[j]) && match(i + 1, j + 1);
  };
  return match(0, 0);
}

export function bindingMatches(def: HookDefinition, e: Pick<QueueEvent, 'exchange' | 'routingKey' | 'cc'>): boolean {
  const keys = [e.routingKey, ...(e.cc ?? [])];
  return def.bindings.some((b) => b.exchange === e.exchange && keys.some((k) => topicMatches(b.routingKeyPattern, k)));
}

/** A v4-shaped, "nice" slugid derived from the hook and the event, so redeliveries pick the same taskId. */
export function eventTaskId(def: HookDefinition, eventId: string): string {
  const b = crypto.createHash('sha256').update(`${def.hookGroupId}/${def.hookId}/${eventId}`).digest().subarray(0, 16);
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  b[0] &= 0x7f;
  return Buffer.from(b).toString('base64url');
}

/**
 * Fires `hook` for `event` if one of its bindings matches and the payload passes its
 * triggerSchema (otherwise the event is dropped, as Taskcluster does). Returns the task's status,
 * or undefined when nothing was created.
 */
export async function fireForEvent(d: HookDeps, def: HookDefinition, event: QueueEvent): Promise<TaskStatus | undefined> {
  if (!bindingMatches(def, event)) return undefined;
  try {
    checkPayload(def, event.payload);
  } catch {
    d.log.info('hook-event-dropped', { hookGroupId: def.hookGroupId, hookId: def.hookId, eventId: event.id, reason: 'payload does not match triggerSchema' });
    return undefined;
  }
  const taskId = eventTaskId(def, event.id);
  const time = new Date(event.time);
  let status: TaskStatus | undefined;
  let error: ApiError | undefined;
  try {
    status = await fireHook(d, def, { firedBy: 'pulseMessage', payload: event.payload }, taskId, time);
  } catch (err) {
    if (!(err instanceof ApiError)) throw err; // storage trouble: the delivery is retried
    error = err;
  }
  if (status || error) {
    await recordFire(d, {
      hookGroupId: def.hookGroupId,
      hookId: def.hookId,
      firedBy: 'pulseMessage',
      taskId,
      taskCreateTime: time.toJSON(),
      result: error ? 'error' : 'success',
      error: error?.message ?? '',
    });
    await modifyHook(d, def.hookGroupId, def.hookId, (cur) => ({
      ...cur,
      lastFire: lastFireOf({ taskId, time: time.toJSON(), error }),
      lastTaskId: status ? taskId : cur.lastTaskId,
    })).catch((err) => {
      if ((err as ApiError).code !== 'ResourceNotFound') throw err; // removed meanwhile: the fire record stays
    });
  }
  return status;
}
