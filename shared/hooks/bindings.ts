/**
 * Firing hooks on queue events (bindings). The reaper's consumer step (shared/reaper/consumers.ts)
 * calls `fireForEvent` for each hook whose bindings match an event of the system subscription;
 * delivery is at-least-once, so the taskId is derived from the event id and the task's `created`
 * from the event: a redelivered event re-creates the identical task, which createTask absorbs.
 */
import crypto from 'node:crypto';
import { ApiError } from '../errors';
import type { TaskStatus } from '../tasks/model';
import type { QueueEvent } from '../events/exchanges';
import { anyBindingMatches } from '../events/topic';
import type { HookDefinition } from './store';
import { HookDeps, checkPayload, fireHook, lastFireOf, modifyHook, recordFire } from './hooks';

export function bindingMatches(def: HookDefinition, e: Pick<QueueEvent, 'exchange' | 'routingKey' | 'routes'>): boolean {
  return anyBindingMatches(def.bindings, e);
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
 * When the event happened, read from its payload (the same for every delivery of it): the run's
 * resolution, start or scheduling, or the group's sealing. Undefined for task-defined, whose
 * payload carries no time (the consumer uses the task's `created`).
 */
export function eventTime(e: QueueEvent): string | undefined {
  const p = e.payload as { runId?: number; status?: { runs?: { resolved?: string; started?: string; scheduled?: string }[] }; sealed?: string };
  const run = p.runId !== undefined ? p.status?.runs?.[p.runId] : undefined;
  const name = e.exchange.slice(e.exchange.lastIndexOf('/') + 1);
  if (run) {
    if (name === 'task-pending') return run.scheduled;
    if (name === 'task-running' || name === 'artifact-created') return run.started ?? run.scheduled;
    return run.resolved ?? run.started ?? run.scheduled;
  }
  return p.sealed;
}

/**
 * Fires `hook` for `event` at `time` (JSON-e `now`, the task's `created`) if one of its bindings
 * matches and the payload passes its triggerSchema (otherwise the event is dropped, as Taskcluster
 * does). Returns the task's status, or undefined when nothing was created.
 */
export async function fireForEvent(d: HookDeps, def: HookDefinition, event: QueueEvent, time: Date): Promise<TaskStatus | undefined> {
  if (!bindingMatches(def, event)) return undefined;
  try {
    await checkPayload(d, def, event.payload, 'pulseMessage');
  } catch {
    d.log.info('hook-event-dropped', { hookGroupId: def.hookGroupId, hookId: def.hookId, eventId: event.id, reason: 'payload does not match triggerSchema' });
    return undefined;
  }
  const taskId = eventTaskId(def, event.id);
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
