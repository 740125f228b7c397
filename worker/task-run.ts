/**
 * One claimed run, from claim to resolution, following the queue–worker interaction rules:
 *  - the payload is validated first; an invalid one is `exception/malformed-payload` with every
 *    problem explained in the task log (a rerun would fail the same way);
 *  - the claim is reclaimed well before `takenUntil`; a 409 means the run was canceled or
 *    resolved: the command is stopped and the run forgotten, with no upload and no report;
 *  - exit 0 is `completed`, a non-zero exit or maxRunTime is `failed`; artifacts and the log are
 *    uploaded *before* reporting completed/failed (afterwards the queue refuses them);
 *  - a command allowed to suspend (`payload.suspend`) that leaves a request in TASK_SUSPEND_FILE and
 *    exits 0 ends the run with suspendRun (this queue's extension) instead of a report; the log
 *    follows, as after an exception. A resumed run's command finds the continuation in
 *    TASK_CONTINUATION_FILE;
 *  - when the worker itself is at fault (internal-error, resource-unavailable) or shutting down
 *    (worker-shutdown), the run is resolved `exception` *first*, so an unstable worker cannot
 *    resolve it completed by accident; the log follows best-effort.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Claim, Credentials, ExceptionReason, QueueFor, WorkerLog } from './types';
import { messageOf, statusOf } from './types';
import { validatePayload, Payload, ArtifactSpec, PAYLOAD_SHAPE } from './payload';
import { referToLiveLog, uploadFinalLog } from './live-log-artifact';
import { TaskLog } from './task-log';
import { LiveLogStream } from './log-stream';
import { runCommand as defaultRunCommand, RunResult } from './runner';
import { Reclaimer, LostReason } from './reclaimer';
import { ArtifactUploader, ObjectUpload, UploadError, contentTypeFor } from './artifacts';
import { CONTINUATION_FILE_ENV, SUSPEND_FILE_ENV, SuspendRequest, readSuspendRequest } from './suspend';

export type Outcome =
  | { kind: 'completed' }
  | { kind: 'failed' }
  | { kind: 'exception'; reason: ExceptionReason }
  /** The command asked to suspend and the queue took it: a resumed run is pending at resumeAt. */
  | { kind: 'suspended'; resumeAt: string }
  /** The claim was lost (409 at reclaim, or expired): nothing was reported. */
  | { kind: 'lost'; reason: LostReason };

export interface TaskProxy {
  url: string;
  close(): Promise<void>;
}

export interface TaskRunDeps {
  queueFor: QueueFor;
  log: WorkerLog;
  rootUrl: string;
  /** Each run gets `<workDir>/<taskId>-<runId>/` (task directory and log), removed afterwards. */
  workDir: string;
  workerGroup: string;
  workerId: string;
  /** Environment every command starts from (PATH etc.); never the worker's credentials. */
  baseEnv?: Record<string, string>;
  reclaimMarginMs?: number;
  /** Starts a proxy signing requests with the run's credentials and authorizedScopes = task.scopes. */
  startProxy?: (opts: { credentials: () => Credentials; scopes: string[] }) => Promise<TaskProxy>;
  runCommand?: typeof defaultRunCommand;
  /** Upload artifacts as object artifacts through the Object API (--object-artifacts). */
  uploadObject?: ObjectUpload;
}

/** Spawn failures that mean "the machine is short of something right now", not a broken worker. */
const RESOURCE_ERRORS = new Set(['EAGAIN', 'EMFILE', 'ENFILE', 'ENOMEM', 'ENOSPC']);

function workerFault(err: unknown): ExceptionReason {
  const code = (err as NodeJS.ErrnoException)?.code;
  if (code && RESOURCE_ERRORS.has(code)) return 'resource-unavailable';
  if (err instanceof UploadError) {
    // The queue or storage failing (5xx, unreachable) is temporary; anything else is our bug.
    return err.status === undefined || err.status >= 500 ? 'resource-unavailable' : 'internal-error';
  }
  return 'internal-error';
}

/** Whether `file` (after following symlinks) is inside `dir`. */
async function inside(dir: string, file: string): Promise<boolean> {
  const [d, f] = await Promise.all([fs.promises.realpath(dir), fs.promises.realpath(file)]);
  return f === d || f.startsWith(d + path.sep);
}

export async function runTask(claim: Claim, shutdown: AbortSignal, deps: TaskRunDeps): Promise<Outcome> {
  const taskId = claim.status.taskId;
  const runId = claim.runId;
  const { log } = deps;
  const ids = { taskId, runId };
  log.info('task-claimed', { ...ids, name: claim.task.metadata?.name, takenUntil: claim.takenUntil });

  const runDir = path.join(deps.workDir, `${taskId}-${runId}`);
  const taskDir = path.join(runDir, 'task');
  const lost = new AbortController();
  const reclaimer = new Reclaimer(
    {
      taskId,
      runId,
      reclaim: (c) => deps.queueFor(c).reclaimTask(taskId, runId),
      log,
      marginMs: deps.reclaimMarginMs,
      onLost: (reason) => lost.abort(reason),
    },
    claim,
  );
  const queue = () => deps.queueFor(reclaimer.current.credentials);
  const uploader = new ArtifactUploader({ queue, taskId, runId, uploadObject: deps.uploadObject });
  const stop = AbortSignal.any([lost.signal, shutdown]);
  const taskExpires = claim.task.expires;
  let taskLog: TaskLog | undefined;
  let liveLog: LiveLogStream | undefined;
  let proxy: TaskProxy | undefined;

  const forget = (reason: LostReason): Outcome => {
    log.warn('task-lost', { ...ids, reason });
    return { kind: 'lost', reason };
  };

  /** Reports the result; a 409 means someone else resolved the run meanwhile (e.g. canceled). */
  const report = async (o: Exclude<Outcome, { kind: 'lost' | 'suspended' }>): Promise<Outcome> => {
    if (lost.signal.aborted) return forget(lost.signal.reason);
    reclaimer.stop();
    try {
      if (o.kind === 'completed') await queue().reportCompleted(taskId, runId);
      else if (o.kind === 'failed') await queue().reportFailed(taskId, runId);
      else await queue().reportException(taskId, runId, { reason: o.reason });
      log.info('task-resolved', { ...ids, outcome: o.kind, reason: o.kind === 'exception' ? o.reason : undefined });
    } catch (err) {
      const status = statusOf(err);
      if (status === 409) return forget('conflict');
      log.error('report-failed', { ...ids, outcome: o.kind, status, message: messageOf(err).split('\n')[0] });
    }
    return o;
  };

  const uploadLog = async (): Promise<void> => {
    if (!taskLog) return;
    await taskLog.close();
    await liveLog?.stop();
    if (taskLog.error) throw taskLog.error; // e.g. ENOSPC: resource-unavailable
    await uploadFinalLog(uploader, taskLog.file, taskExpires);
  };

  /** Exception first, then the log if the queue still takes it (best effort). */
  const exceptionFirst = async (reason: ExceptionReason, note?: string): Promise<Outcome> => {
    if (note) taskLog?.note(note);
    const o = await report({ kind: 'exception', reason });
    if (o.kind !== 'lost') {
      await uploadLog().catch((err) => log.warn('log-upload-failed', { ...ids, message: messageOf(err) }));
    }
    return o;
  };

  /** Uploads the log, then reports. An upload failure turns the outcome into an exception. */
  const uploadThenReport = async (o: Exclude<Outcome, { kind: 'lost' | 'suspended' }>): Promise<Outcome> => {
    try {
      await uploadLog();
    } catch (err) {
      if (err instanceof UploadError && err.conflict) return forget('conflict');
      log.error('log-upload-failed', { ...ids, message: messageOf(err) });
      return report({ kind: 'exception', reason: workerFault(err) });
    }
    return report(o);
  };

  reclaimer.start();
  try {
    await fs.promises.mkdir(taskDir, { recursive: true });
    taskLog = await TaskLog.open(path.join(runDir, 'live.log'));
    if (queue().createLiveLog) {
      liveLog = new LiveLogStream({ file: taskLog.file, createUrl: () => queue().createLiveLog!(taskId, runId), log, ids });
      liveLog.start();
      // Best effort, as generic-worker's: without it the run still ends with the complete log.
      await referToLiveLog(uploader, deps.rootUrl, taskId, runId, taskExpires).catch((err) =>
        log.warn('live-log-reference-failed', { ...ids, message: messageOf(err).split('\n')[0] }),
      );
    }
    taskLog.note(`task ${taskId} run ${runId} on worker ${deps.workerGroup}/${deps.workerId}`);

    const v = validatePayload(claim.task.payload, { taskExpires });
    if (!v.ok) {
      taskLog.note(
        [
          'The task payload is invalid, so the command was not run. Resolving exception/malformed-payload.',
          ...v.problems.map((p) => `  * ${p}`),
          `Expected payload: ${PAYLOAD_SHAPE}`,
        ].join('\n'),
      );
      log.warn('payload-invalid', { ...ids, problems: v.problems.length });
      return await uploadThenReport({ kind: 'exception', reason: 'malformed-payload' });
    }
    const payload = v.payload;
    if (stop.aborted)
      return lost.signal.aborted
        ? forget(lost.signal.reason)
        : await exceptionFirst('worker-shutdown', 'The worker is shutting down; the task was not started.');

    // Outside the task directory, so neither file can be mistaken for a task output.
    const suspendFile = path.join(runDir, 'suspend.json');
    const continuationFile = path.join(runDir, 'continuation.json');
    if (claim.continuation !== undefined) {
      await fs.promises.writeFile(continuationFile, JSON.stringify(claim.continuation));
      taskLog.note(`resumed run: the continuation its predecessor left is in $${CONTINUATION_FILE_ENV}`);
    }
    if (deps.startProxy) proxy = await deps.startProxy({ credentials: () => reclaimer.current.credentials, scopes: claim.task.scopes ?? [] });
    const env: Record<string, string> = {
      ...deps.baseEnv,
      HOME: taskDir,
      TASK_ID: taskId,
      RUN_ID: String(runId),
      TASK_DIR: taskDir,
      TASKCLUSTER_ROOT_URL: deps.rootUrl,
      TASKCLUSTER_WORKER_GROUP: deps.workerGroup,
      TASKCLUSTER_WORKER_ID: deps.workerId,
      ...(proxy ? { TASKCLUSTER_PROXY_URL: proxy.url } : {}),
      ...payload.env,
      ...(payload.suspend ? { [SUSPEND_FILE_ENV]: suspendFile } : {}),
      ...(claim.continuation !== undefined ? { [CONTINUATION_FILE_ENV]: continuationFile } : {}),
    };
    taskLog.note(`running ${JSON.stringify(payload.command)} in ${taskDir} (maxRunTime ${payload.maxRunTime}s)`);
    log.info('task-running', { ...ids, command: payload.command[0] });
    const result = await (deps.runCommand ?? defaultRunCommand)({
      command: payload.command,
      env,
      cwd: taskDir,
      maxRunTimeS: payload.maxRunTime,
      output: taskLog.stream,
      signal: stop,
    });
    if (result.kind === 'exited' && result.exitCode === 0 && payload.suspend) {
      const request = await readSuspendRequest(suspendFile, { now: new Date(), resumeAfterDefault: payload.suspend.resumeAfter });
      if (request) return await suspendThenLog(request, payload);
    }
    return await afterCommand(result, payload);
  } catch (err) {
    const reason = workerFault(err);
    log.error('task-internal-error', { ...ids, reason, message: messageOf(err) });
    if (lost.signal.aborted) return forget(lost.signal.reason);
    return await exceptionFirst(reason, `The worker failed (${reason}): ${messageOf(err)}`);
  } finally {
    reclaimer.stop();
    await proxy?.close().catch(() => undefined);
    await taskLog?.close().catch(() => undefined);
    await liveLog?.stop();
    await fs.promises.rm(runDir, { recursive: true, force: true }).catch((err) => log.warn('cleanup-failed', { ...ids, message: messageOf(err) }));
  }

  async function afterCommand(result: RunResult, payload: Payload): Promise<Outcome> {
    const note = (s: string) => taskLog!.note(s);
    switch (result.kind) {
      case 'spawn-error': {
        const code = result.error.code;
        if (code === 'ENOENT' || code === 'EACCES' || code === 'ENOTDIR') {
          const why = code === 'EACCES' ? 'is not executable' : 'was not found';
          note(
            `The program ${JSON.stringify(payload.command[0])} ${why} (PATH=${payload.env.PATH ?? deps.baseEnv?.PATH ?? ''}). Resolving exception/malformed-payload.`,
          );
          return uploadThenReport({ kind: 'exception', reason: 'malformed-payload' });
        }
        const reason = workerFault(result.error);
        return exceptionFirst(reason, `The command could not be started: ${result.error.message}`);
      }
      case 'stopped':
        if (lost.signal.aborted) return forget(lost.signal.reason);
        return exceptionFirst('worker-shutdown', `The worker is shutting down; the command was stopped after ${(result.durationMs / 1000).toFixed(1)}s.`);
      case 'timed-out':
        note(`The command exceeded maxRunTime (${payload.maxRunTime}s) and was stopped. Resolving failed.`);
        return uploadArtifactsThenReport(payload, { kind: 'failed' });
      case 'exited': {
        const ok = result.exitCode === 0;
        note(
          result.signal
            ? `The command was killed by ${result.signal} after ${(result.durationMs / 1000).toFixed(1)}s. Resolving failed.`
            : `The command exited with code ${result.exitCode} after ${(result.durationMs / 1000).toFixed(1)}s. Resolving ${ok ? 'completed' : 'failed'}.`,
        );
        return uploadArtifactsThenReport(payload, ok ? { kind: 'completed' } : { kind: 'failed' });
      }
    }
  }

  /**
   * The command asked to suspend: suspendRun first (the run ends exception/suspended), then the log
   * within the queue's grace for exception runs. Artifacts are left to the run that completes.
   * A request the queue refuses (past the deadline, too large, too many runs) makes the run failed.
   */
  async function suspendThenLog(request: SuspendRequest, payload: Payload): Promise<Outcome> {
    const note = (s: string) => taskLog!.note(s);
    if (!request.ok) {
      note(`The command asked to suspend, but its request in $${SUSPEND_FILE_ENV} is invalid: ${request.problem}. Resolving failed.`);
      return uploadArtifactsThenReport(payload, { kind: 'failed' });
    }
    const q = queue();
    if (!q.suspendRun) {
      note('The command asked to suspend, but this queue has no suspendRun. Resolving exception/malformed-payload.');
      return uploadThenReport({ kind: 'exception', reason: 'malformed-payload' });
    }
    if (lost.signal.aborted) return forget(lost.signal.reason);
    try {
      await q.suspendRun(taskId, runId, { continuation: request.continuation, resumeAt: request.resumeAt });
    } catch (err) {
      if (lost.signal.aborted) return forget(lost.signal.reason);
      const status = statusOf(err);
      const message = messageOf(err).split('\n')[0];
      log.warn('suspend-refused', { ...ids, status, message });
      if (status !== undefined && status < 500) {
        // A 409 from a cancel makes the failed report a 409 too, and the run is forgotten.
        note(`The queue refused the suspension (${status}): ${message}. Resolving failed.`);
        return uploadArtifactsThenReport(payload, { kind: 'failed' });
      }
      return exceptionFirst('resource-unavailable', `Suspending the run failed: ${message}`);
    }
    reclaimer.stop();
    log.info('task-suspended', { ...ids, resumeAt: request.resumeAt });
    note(`The command asked to suspend: run ${runId} is exception/suspended; the task resumes at ${request.resumeAt}.`);
    await uploadLog().catch((err) => log.warn('log-upload-failed', { ...ids, message: messageOf(err) }));
    return { kind: 'suspended', resumeAt: request.resumeAt };
  }

  async function uploadArtifactsThenReport(payload: Payload, o: { kind: 'completed' } | { kind: 'failed' }): Promise<Outcome> {
    const missingRequired: ArtifactSpec[] = [];
    for (const a of payload.artifacts) {
      if (lost.signal.aborted) return forget(lost.signal.reason);
      const file = path.join(taskDir, a.path);
      try {
        const st = await fs.promises.stat(file).catch(() => undefined);
        let problem: { reason: 'file-missing-on-worker' | 'invalid-resource-on-worker'; message: string } | undefined;
        if (!st) problem = { reason: 'file-missing-on-worker', message: `Artifact ${a.name}: file '${a.path}' does not exist in the task directory.` };
        else if (!st.isFile()) problem = { reason: 'invalid-resource-on-worker', message: `Artifact ${a.name}: '${a.path}' is not a regular file.` };
        else if (!(await inside(taskDir, file)))
          problem = { reason: 'invalid-resource-on-worker', message: `Artifact ${a.name}: '${a.path}' resolves outside the task directory.` };
        if (problem) {
          taskLog!.note(problem.message + (a.required ? ' It is declared required.' : ' Uploading an error artifact instead.'));
          if (a.required) missingRequired.push(a);
          await uploader.uploadError(a.name, { ...problem, expires: a.expires });
          continue;
        }
        const { size } = await uploader.uploadFile(a.name, file, { contentType: a.contentType ?? contentTypeFor(file), expires: a.expires });
        taskLog!.note(`Uploaded artifact ${a.name} (${size} bytes) from ${a.path}.`);
      } catch (err) {
        if (err instanceof UploadError && err.conflict) return forget('conflict');
        const reason = workerFault(err);
        log.error('artifact-upload-failed', { ...ids, name: a.name, message: messageOf(err) });
        return exceptionFirst(reason, `Uploading artifact ${a.name} failed: ${messageOf(err)}`);
      }
    }
    if (missingRequired.length && o.kind === 'completed') {
      taskLog!.note(
        [
          'The command succeeded, but required artifacts are missing. The payload declares outputs the task does not produce,',
          'so a rerun would fail the same way. Resolving exception/malformed-payload.',
          ...missingRequired.map((a) => `  * ${a.name}: expected file '${a.path}' (relative to the task directory)`),
        ].join('\n'),
      );
      return uploadThenReport({ kind: 'exception', reason: 'malformed-payload' });
    }
    return uploadThenReport(o);
  }
}
