/**
 * What the worker exchanges with the queue, as plain interfaces so each module can be tested with
 * fakes. The real implementations are taskcluster-client v87 Queue instances (and v10 for the
 * deprecated pollTaskUrls/claimTask protocol).
 */

export interface Credentials {
  clientId: string;
  accessToken: string;
  /** Present for temporary credentials (JSON string or object, as taskcluster-client accepts). */
  certificate?: string | Record<string, unknown>;
}

export interface TaskDefinition {
  taskQueueId?: string;
  provisionerId?: string;
  workerType?: string;
  deadline: string;
  expires: string;
  scopes?: string[];
  payload: unknown;
  metadata?: { name?: string };
  [k: string]: unknown;
}

/** One entry of claimWork's `tasks`, also the claimTask response. */
export interface Claim {
  status: { taskId: string; [k: string]: unknown };
  runId: number;
  workerGroup: string;
  workerId: string;
  takenUntil: string;
  task: TaskDefinition;
  credentials: Credentials;
  /** The state a suspended predecessor left (this queue's suspendRun extension), on a resumed run's claim. */
  continuation?: unknown;
}

export interface ReclaimResponse {
  takenUntil: string;
  credentials: Credentials;
}

export type ExceptionReason = 'worker-shutdown' | 'malformed-payload' | 'resource-unavailable' | 'internal-error';

/** The calls one task run makes, signed with the run's latest temporary credentials. */
export interface RunQueue {
  reclaimTask(taskId: string, runId: number): Promise<ReclaimResponse>;
  reportCompleted(taskId: string, runId: number): Promise<unknown>;
  reportFailed(taskId: string, runId: number): Promise<unknown>;
  reportException(taskId: string, runId: number, payload: { reason: ExceptionReason }): Promise<unknown>;
  createArtifact(taskId: string, runId: number, name: string, payload: Record<string, unknown>): Promise<any>;
  /** This queue's extension; absent on a queue that lacks it. */
  suspendRun?(taskId: string, runId: number, payload: { continuation: unknown; resumeAt: string }): Promise<unknown>;
  /** This queue's extension (worker/log-stream.ts); absent on a queue that lacks it. */
  createLiveLog?(taskId: string, runId: number): Promise<{ url: string; expires: string; maxBytes?: number }>;
  /** Only object artifacts need it (--object-artifacts). */
  finishArtifact?(taskId: string, runId: number, name: string, payload: { uploadId: string }): Promise<unknown>;
}

export type QueueFor = (credentials: Credentials) => RunQueue;

/** Worker-process log (not the task log): one line per event. */
export interface WorkerLog {
  info(event: string, fields?: Record<string, unknown>): void;
  warn(event: string, fields?: Record<string, unknown>): void;
  error(event: string, fields?: Record<string, unknown>): void;
}

/** An error from taskcluster-client carries the HTTP status and the Taskcluster error code. */
export function statusOf(err: unknown): number | undefined {
  const s = (err as { statusCode?: unknown })?.statusCode;
  return typeof s === 'number' ? s : undefined;
}

export function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
