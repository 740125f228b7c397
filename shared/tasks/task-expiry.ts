/**
 * A task's rows in the expiry index: its own (kind `task`, with what its expiry needs even when the
 * task row is gone: shared/lifecycle/remove-expired.ts) and its group's (EXPIRY_KIND_GROUP), both
 * at its `expires`, in its group's partition (one write). A task whose deadline is an expiry-index
 * row gets them from that row: the row carries them (shared/tasks/triggers.ts `deadline`), and the
 * reaper's sweep records them before it deletes the row (shared/reaper/handlers.ts
 * `recordCarriedExpiries`); expires >= deadline, so they are never late by more than the sweep's
 * delay. A task whose deadline is a message (which a resolution may drop) records them at createTask.
 */
import { createHash } from 'node:crypto';
import type { ExpiryEntry } from './expiry';
import { EXPIRY_KIND_GROUP } from './groups';

/**
 * Dependencies the expiry row carries, so that a task row that never got written (a refused or
 * interrupted createTask) still has its edges in other partitions removed when it expires. A
 * longer list would not fit one table property (64 KiB); without it those edges are removed with
 * the required tasks' own partitions when they expire, and until then point at nothing (harmless).
 */
export const EXPIRY_INLINE_DEPENDENCIES = 100;

/** What a task's expiry rows need: when, its group, its dependencies (see EXPIRY_INLINE_DEPENDENCIES). */
export interface TaskExpiry {
  expires: string;
  taskGroupId: string;
  dependencies: string[];
}

/** `e` as its rows carry it: a dependency list longer than EXPIRY_INLINE_DEPENDENCIES is left out. */
export function inlineExpiry(e: TaskExpiry): TaskExpiry {
  const dependencies = e.dependencies.length <= EXPIRY_INLINE_DEPENDENCIES ? e.dependencies : [];
  return { expires: e.expires, taskGroupId: e.taskGroupId, dependencies };
}

/** A short digest of `e`: two rows of one task carrying different expiries (a create that lost to another definition) are kept apart by it. */
export function expiryDigest(e: TaskExpiry): string {
  return createHash('sha256')
    .update(JSON.stringify(inlineExpiry(e)))
    .digest('hex')
    .slice(0, 16);
}

/** The task's expiry rows (ExpiryIndex.recordAll): its own, and its group's beside it (same partition). */
export function taskExpiryRows(taskId: string, e: TaskExpiry): ExpiryEntry[] {
  const { expires, taskGroupId, dependencies } = inlineExpiry(e);
  return [
    { kind: 'task', id: taskId, expires, data: { taskGroupId, dependencies }, bucketBy: taskGroupId },
    { kind: EXPIRY_KIND_GROUP, id: taskGroupId, expires, bucketBy: taskGroupId },
  ];
}
