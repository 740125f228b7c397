/**
 * Worker settings from command-line flags, falling back to the standard TASKCLUSTER_* variables
 * for the root URL and credentials (permanent, or temporary with a certificate).
 */
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { Credentials } from './types';
import { DEFAULT_MAX_RUN_TIME_S } from './payload';

export type Protocol = 'claimWork' | 'pollTaskUrls';

export interface WorkerConfig {
  rootUrl: string;
  credentials: Credentials;
  taskQueueId: string;
  provisionerId: string;
  workerType: string;
  workerGroup: string;
  workerId: string;
  concurrency: number;
  protocol: Protocol;
  workDir: string;
  /** Run a proxy per task (TASKCLUSTER_PROXY_URL) that signs with authorizedScopes = task.scopes. */
  proxy: boolean;
  reclaimMarginS: number;
  maxTasks?: number;
  /** Upload artifacts as `object` artifacts through the Object API instead of `s3`. */
  objectArtifacts: boolean;
  /** After SIGTERM/SIGINT, how long running tasks may go on before they are stopped (0: at once). */
  shutdownGraceS: number;
}

/** Taskcluster identifiers (workerGroup, workerId, provisionerId, workerType): 1–38 of [a-zA-Z0-9-_]. */
const IDENTIFIER = /^[a-zA-Z0-9_-]{1,38}$/;
/** workerType (the second half of a taskQueueId) is stricter: lower case, starting with a letter. */
const WORKER_TYPE = /^[a-z]([-a-z0-9]{0,36}[a-z0-9])?$/;
/** claimWork asks for at most 32 tasks at once; more slots than that make little sense for one process. */
const MAX_CONCURRENCY = 32;
/** Default reclaim margin: the interaction documents advise reclaiming a few minutes early. */
const DEFAULT_RECLAIM_MARGIN_S = 180;
/** Run credentials expire at takenUntil: a smaller margin leaves no time for the reclaim call and its retries. */
const MIN_RECLAIM_MARGIN_S = 30;
/** A longer grace than the claim (20 min by default) would need reclaims the stopping worker no longer owes. */
const MAX_SHUTDOWN_GRACE_S = 1_200;

export class UsageError extends Error {}

export const USAGE = `Usage: npm run worker -- [options]
   or: node dist/worker/main.js [options]

Runs tasks from a Taskcluster queue. Payload:
  {command: [program, ...args], env?: {NAME: value},
   maxRunTime?: seconds (default ${DEFAULT_MAX_RUN_TIME_S}: the command is stopped and the run failed after it),
   artifacts?: [{type: 'file', path, name, expires?, required?}],
   suspend?: {resumeAfter?: seconds}}
With payload.suspend, a command that writes {continuation, resumeAt?|resumeAfter?} to
$TASK_SUSPEND_FILE and exits 0 suspends the run; the resumed run's command reads the
continuation from $TASK_CONTINUATION_FILE.

Options:
  --root-url URL           queue root URL (default: $TASKCLUSTER_ROOT_URL)
  --client-id ID           credentials (default: $TASKCLUSTER_CLIENT_ID)
  --access-token TOKEN     (default: $TASKCLUSTER_ACCESS_TOKEN)
  --certificate JSON       for temporary credentials (default: $TASKCLUSTER_CERTIFICATE)
  --task-queue P/W         task queue id, provisionerId/workerType (required)
  --worker-group GROUP     (default: local)
  --worker-id ID           (default: this host's name)
  --concurrency N          tasks run at the same time, 1..${MAX_CONCURRENCY} (default: 1)
  --protocol P             claimWork (default) or pollTaskUrls (deprecated: signed Azure
                           queue URLs + claimTask)
  --work-dir DIR           where task directories go (default: <tmp>/tc-worker-<workerId>)
  --proxy                  give each task TASKCLUSTER_PROXY_URL, a local proxy that signs
                           requests with the run's credentials, limited to task.scopes
  --reclaim-margin S       reclaim this many seconds before takenUntil (${MIN_RECLAIM_MARGIN_S}.., default ${DEFAULT_RECLAIM_MARGIN_S};
                           never later than half way through the claim)
  --max-tasks N            exit after running N tasks
  --object-artifacts       upload artifacts (and the log) as object artifacts through the
                           Object API (/api/object/v1), as today's Taskcluster workers do;
                           default: s3 artifacts (a plain PUT to a signed URL)
  --shutdown-grace S        after SIGTERM/SIGINT, let running tasks go on up to S seconds
                           (0..${MAX_SHUTDOWN_GRACE_S}, default 0: stop them at once)
  -h, --help

Scopes the credentials need:
  claimWork:     queue:claim-work:<taskQueueId>, queue:worker-id:<workerGroup>/<workerId>
  pollTaskUrls:  queue:poll-task-urls:<provisionerId>/<workerType>,
                 queue:claim-task:<provisionerId>/<workerType>,
                 queue:worker-id:<workerGroup>/<workerId>

SIGTERM or SIGINT: stop claiming at once (the long poll in flight is aborted); running tasks
are stopped and reported exception/worker-shutdown (the queue retries them), at once or after
--shutdown-grace; then exit. Another signal stops them without waiting for the grace; once they
are stopping, another exits at once without reporting (a signal repeated within a second, as
\`npm run\` forwards Ctrl-C, counts once).
A 401 (wrong or expired credentials) stops the worker with a message naming the client id.`;

function int(name: string, raw: string | undefined, dflt: number, min: number, max: number): number {
  if (raw === undefined) return dflt;
  const v = Number(raw);
  if (!Number.isInteger(v) || v < min || v > max) throw new UsageError(`--${name} must be an integer between ${min} and ${max}, got '${raw}'`);
  return v;
}

export function defaultWorkerId(hostname = os.hostname()): string {
  return hostname.replace(/[^a-zA-Z0-9_-]/g, '-').slice(0, 38) || 'worker';
}

/** Parses argv (without node and script); returns undefined for --help. */
export function parseConfig(argv: string[], env: NodeJS.ProcessEnv = process.env): WorkerConfig | undefined {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        'root-url': { type: 'string' },
        'client-id': { type: 'string' },
        'access-token': { type: 'string' },
        certificate: { type: 'string' },
        'task-queue': { type: 'string' },
        'worker-group': { type: 'string' },
        'worker-id': { type: 'string' },
        concurrency: { type: 'string' },
        protocol: { type: 'string' },
        'work-dir': { type: 'string' },
        proxy: { type: 'boolean' },
        'reclaim-margin': { type: 'string' },
        'max-tasks': { type: 'string' },
        'object-artifacts': { type: 'boolean' },
        'shutdown-grace': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (values.help) return undefined;
  const s = (k: string) => values[k] as string | undefined;

  const rootUrl = (s('root-url') ?? env.TASKCLUSTER_ROOT_URL ?? '').replace(/\/+$/, '');
  if (!rootUrl) throw new UsageError('--root-url (or TASKCLUSTER_ROOT_URL) is required');
  try {
    new URL(rootUrl);
  } catch {
    throw new UsageError(`--root-url '${rootUrl}' is not a URL`);
  }
  const clientId = s('client-id') ?? env.TASKCLUSTER_CLIENT_ID;
  const accessToken = s('access-token') ?? env.TASKCLUSTER_ACCESS_TOKEN;
  if (!clientId || !accessToken)
    throw new UsageError('credentials are required: --client-id and --access-token (or TASKCLUSTER_CLIENT_ID and TASKCLUSTER_ACCESS_TOKEN)');
  const certificate = s('certificate') ?? (env.TASKCLUSTER_CERTIFICATE || undefined);
  if (certificate !== undefined) {
    try {
      JSON.parse(certificate);
    } catch {
      throw new UsageError('--certificate (TASKCLUSTER_CERTIFICATE) must be the JSON certificate of temporary credentials');
    }
  }

  const taskQueueId = s('task-queue');
  if (!taskQueueId) throw new UsageError('--task-queue provisionerId/workerType is required');
  const [provisionerId, workerType, ...rest] = taskQueueId.split('/');
  if (rest.length || !IDENTIFIER.test(provisionerId ?? '') || !WORKER_TYPE.test(workerType ?? '')) {
    throw new UsageError(
      `--task-queue must be provisionerId/workerType (provisionerId: 1-38 of a-z A-Z 0-9 - _; workerType: 1-38 of a-z 0-9 -, starting with a letter), got '${taskQueueId}'`,
    );
  }
  const workerGroup = s('worker-group') ?? 'local';
  const workerId = s('worker-id') ?? defaultWorkerId();
  if (!IDENTIFIER.test(workerGroup)) throw new UsageError(`--worker-group must be 1-38 of a-z A-Z 0-9 - _, got '${workerGroup}'`);
  if (!IDENTIFIER.test(workerId)) throw new UsageError(`--worker-id must be 1-38 of a-z A-Z 0-9 - _, got '${workerId}'`);

  const protocol = (s('protocol') ?? 'claimWork') as Protocol;
  if (protocol !== 'claimWork' && protocol !== 'pollTaskUrls') throw new UsageError(`--protocol must be claimWork or pollTaskUrls, got '${protocol}'`);

  return {
    rootUrl,
    credentials: { clientId, accessToken, ...(certificate ? { certificate } : {}) },
    taskQueueId,
    provisionerId,
    workerType,
    workerGroup,
    workerId,
    concurrency: int('concurrency', s('concurrency'), 1, 1, MAX_CONCURRENCY),
    protocol,
    workDir: path.resolve(s('work-dir') ?? path.join(os.tmpdir(), `tc-worker-${workerId}`)),
    proxy: values.proxy === true,
    reclaimMarginS: int('reclaim-margin', s('reclaim-margin'), DEFAULT_RECLAIM_MARGIN_S, MIN_RECLAIM_MARGIN_S, 24 * 3600),
    maxTasks: s('max-tasks') === undefined ? undefined : int('max-tasks', s('max-tasks'), 1, 1, Number.MAX_SAFE_INTEGER),
    objectArtifacts: values['object-artifacts'] === true,
    shutdownGraceS: int('shutdown-grace', s('shutdown-grace'), 0, 0, MAX_SHUTDOWN_GRACE_S),
  };
}
