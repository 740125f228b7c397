/**
 * The task domain's vocabulary: priorities, exception reasons and id patterns. The HTTP layer's
 * schemas (shared/api/schemas.ts) are built from these, never the other way round.
 */

/** A slugid (taskId, taskGroupId): 22 url-safe base64 characters of a v4 UUID. */
export const SLUGID = '^[A-Za-z0-9_-]{8}[Q-T][A-Za-z0-9_-][CGKOSWaeimquy26-][A-Za-z0-9_-]{10}[AQgw]$';
/** provisionerId, schedulerId, workerGroup, workerId. */
export const IDENTIFIER = '^([a-zA-Z0-9-_]*)$';
export const WORKER_TYPE = '^[a-z]([-a-z0-9]{0,36}[a-z0-9])?$';
export const TASK_QUEUE_ID = '^[a-zA-Z0-9-_]{1,38}/[a-z]([-a-z0-9]{0,36}[a-z0-9])?$';

/** Priorities, highest first. */
export const PRIORITIES = ['highest', 'very-high', 'high', 'medium', 'low', 'very-low', 'lowest'] as const;
export type Priority = (typeof PRIORITIES)[number];

/** reportException reasons a worker may give; today's queue no longer accepts `superseded` (it stays a reasonResolved). */
export const EXCEPTION_REASONS = ['worker-shutdown', 'malformed-payload', 'resource-unavailable', 'internal-error', 'intermittent-task'] as const;
export type ExceptionReason = (typeof EXCEPTION_REASONS)[number];
