/**
 * The verbs of Taskcluster's own CLI (`taskcluster task retrigger`, `task complete`, `task def`,
 * `group list`, `signin`), under the same names and flags, against this deployment. Their
 * semantics follow clients/client-shell/cmds/ of taskcluster/taskcluster; docs/cli.md lists where
 * tcq differs.
 */
import crypto from 'node:crypto';
import * as slugid from 'slugid';
import { clientFor } from './services';
import { fields, table, Row } from './table';
import { Settings, UsageError } from './settings';
import { MAX_FROM_NOW_YEARS, fromNow } from './bounds';
import { Command, Flags, pages, statusText, taskQueueParts } from './commands';

/** The worker `task complete` claims the run as (taskcluster's CLI says `taskcluster-cli`). */
export const COMPLETE_WORKER_ID = 'tcq';
/** Client ids Taskcluster reserves for the clients a deployment configures. */
const STATIC_PREFIX = 'static/';
/** signin's client lives at most this long: a temporary client; a longer one is made deliberately with `tcq call auth createClient`. */
export const MAX_SIGNIN_DAYS = 31;
/** signin's default lifetime, as `taskcluster signin --expires`. */
const DEFAULT_SIGNIN_EXPIRES = '1d';
/** Random bytes in a signin client's name: a new client each time, never one already in use. */
const SIGNIN_RANDOM_BYTES = 6;
/** `group list`'s state flags, each the state it selects (taskcluster's `--complete` selects `completed`). */
const STATE_FLAGS: Record<string, string> = {
  running: 'running',
  failed: 'failed',
  exception: 'exception',
  complete: 'completed',
  unscheduled: 'unscheduled',
  pending: 'pending',
};

type TaskDef = Record<string, unknown> & { created: string; deadline: string; expires: string };

/**
 * A retrigger's definition, as `taskcluster task retrigger` builds it: the same task with `created`
 * now and `deadline`/`expires` as far after it as before, `retries` 0, and no dependencies or routes
 * (a retrigger must not wait for, nor announce as, the original) unless `exact`.
 */
export function retriggered(t: TaskDef, exact: boolean, now = new Date()): Record<string, unknown> {
  const created = Date.parse(t.created);
  const shift = (d: string) => new Date(now.getTime() + (Date.parse(d) - created)).toJSON();
  const { taskQueueId, provisionerId, workerType, schedulerId, projectId, taskGroupId, priority, requires, scopes, payload, metadata, tags, extra } = t;
  // taskQueueId or the pair, not both: the queue refuses a pair that disagrees with it.
  const queue = taskQueueId ? { taskQueueId } : { provisionerId, workerType };
  return {
    ...queue,
    schedulerId,
    projectId,
    taskGroupId,
    priority,
    requires,
    scopes,
    payload,
    metadata,
    tags,
    extra,
    created: now.toJSON(),
    deadline: shift(t.deadline),
    expires: shift(t.expires),
    retries: 0,
    dependencies: exact ? (t.dependencies ?? []) : [],
    routes: exact ? (t.routes ?? []) : [],
  };
}

/** A value for a POSIX shell's single quotes. */
function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

export const VERBS: Command[] = [
  {
    words: ['task', 'def'],
    args: ['taskId'],
    summary: "a task's definition (JSON)",
    async run(settings, [taskId]) {
      const task = await (await clientFor('queue', settings)).task(taskId);
      return { json: task, text: JSON.stringify(task, null, 2) };
    },
  },
  {
    words: ['task', 'retrigger'],
    args: ['taskId'],
    summary: 'a new task from its definition (new taskId, dates from now, retries 0, no dependencies or routes unless --exact)',
    async run(settings, [taskId], flags) {
      const queue = await clientFor('queue', settings);
      const def = retriggered(await queue.task(taskId), !!flags.exact);
      const newTaskId = slugid.nice();
      const { status } = await queue.createTask(newTaskId, def);
      return { json: { taskId: newTaskId, status, task: def }, text: `Task ${newTaskId} created\n\n${statusText(status)}` };
    },
  },
  {
    words: ['task', 'complete'],
    args: ['taskId'],
    summary: `claims the task's pending run as worker ${COMPLETE_WORKER_ID} and reports it completed`,
    async run(settings, [taskId]) {
      const queue = await clientFor('queue', settings);
      const { status } = await queue.status(taskId);
      const runId = (status.runs ?? []).length - 1;
      if (runId < 0 || status.runs[runId].state !== 'pending')
        throw new UsageError(`task ${taskId} is ${status.state}: only a pending run can be claimed and completed`);
      const [, workerType] = taskQueueParts(status.taskQueueId);
      // As taskcluster's CLI: the worker group is the worker type; the claim's credentials report.
      const claim = await queue.claimTask(taskId, runId, { workerGroup: workerType, workerId: COMPLETE_WORKER_ID });
      const asWorker = await clientFor('queue', { ...settings, credentials: claim.credentials });
      const res = await asWorker.reportCompleted(taskId, claim.runId);
      return { json: res, text: statusText(res.status) };
    },
  },
  {
    words: ['group', 'list'],
    args: ['taskGroupId'],
    summary: 'task id, name and state of each task of a group (--running, --failed, --exception, --complete, --unscheduled, --pending; --all, the default)',
    async run(settings, [taskGroupId], flags) {
      const states = Object.entries(STATE_FLAGS)
        .filter(([flag]) => flags[flag])
        .map(([, state]) => state);
      const queue = await clientFor('queue', settings);
      const tasks = await pages<{ status: Row; task: { metadata?: { name?: string } } }>(
        (continuationToken) => queue.listTaskGroup(taskGroupId, continuationToken ? { continuationToken } : {}),
        'tasks',
      );
      const shown = flags.all || !states.length ? tasks : tasks.filter((t) => states.includes(String(t.status.state)));
      const rows = shown.map((t) => ({ taskId: t.status.taskId, name: t.task?.metadata?.name, state: t.status.state }));
      return { json: { taskGroupId, tasks: shown }, text: table(rows, ['taskId', 'name', 'state']) };
    },
  },
  {
    words: ['signin'],
    args: [],
    summary: `creates a client <your clientId, without static/>/<--name, tcq>-<random> with --scope S (repeatable) for --expires (default ${DEFAULT_SIGNIN_EXPIRES}, at most ${MAX_SIGNIN_DAYS}d); prints the export lines. --check: are you signed in`,
    async run(settings, _args, flags) {
      if (flags.check) return check(settings);
      const me = settings.credentials?.clientId;
      if (!me)
        throw new UsageError('signin needs your credentials: export TASKCLUSTER_CLIENT_ID and TASKCLUSTER_ACCESS_TOKEN (the new client is made in your name)');
      const scopes = (flags.scope as string[] | undefined) ?? [];
      // taskcluster signin defaults to `*`; a client that may do everything is asked for, not given by default.
      if (!scopes.length) throw new UsageError("signin needs the client's scopes: --scope <scope> (repeatable), e.g. --scope 'queue:rerun-task:*'");
      const name = (flags.name as string | undefined) ?? 'tcq';
      if (!/^[A-Za-z0-9_.~-]{1,40}$/.test(name)) throw new UsageError(`--name is a short name (letters, digits, _.~-), got '${name}'`);
      const expires = fromNow('--expires', (flags.expires as string | undefined) ?? DEFAULT_SIGNIN_EXPIRES, MAX_SIGNIN_DAYS);
      // `static/` is reserved for configured clients (Taskcluster refuses to create one there): a static caller's clients go under the rest of its id.
      const under = me.startsWith(STATIC_PREFIX) ? me.slice(STATIC_PREFIX.length) : me;
      const clientId = `${under}/${name}-${crypto.randomBytes(SIGNIN_RANDOM_BYTES).toString('hex')}`;
      const c = await (
        await clientFor('auth', settings)
      ).createClient(clientId, {
        expires: expires.toJSON(),
        scopes,
        description: `Temporary client for use on the command line (tcq signin by ${me})`,
        deleteOnExpiration: true,
      });
      const vars = { TASKCLUSTER_CLIENT_ID: c.clientId, TASKCLUSTER_ACCESS_TOKEN: c.accessToken, TASKCLUSTER_ROOT_URL: settings.rootUrl };
      const line = ([k, v]: [string, string]) => (flags.csh ? `setenv ${k} ${shellQuote(v)}` : `export ${k}=${shellQuote(v)}`);
      // No certificate from the client before: its temporary credentials would outrank the new client's.
      const unset = flags.csh ? 'unsetenv TASKCLUSTER_CERTIFICATE' : 'unset TASKCLUSTER_CERTIFICATE';
      return { json: c, text: [...Object.entries(vars).map(line), unset].join('\n') };
    },
  },
];

/** `signin --check`: whether the credentials are valid (exit 1 if they give no scopes). */
async function check(settings: Settings) {
  const { scopes } = await (await clientFor('auth', settings)).currentScopes();
  if (!scopes?.length) throw Object.assign(new Error('No valid credentials were found'), { code: 'NotSignedIn' });
  return {
    json: { clientId: settings.credentials?.clientId, scopes },
    text: fields({ clientId: settings.credentials?.clientId ?? '(anonymous)', scopes: scopes.join(' ') }),
  };
}

/** Taskcluster's slug patterns (slugid-go's README): a v4 slug, and a v4 UUID. */
const SLUG_V4 = /^[A-Za-z0-9_-]{8}[Q-T][A-Za-z0-9_-][CGKOSWaeimquy26-][A-Za-z0-9_-]{10}[AQgw]$/;
const UUID_V4 = /^[a-f0-9]{8}-[a-f0-9]{4}-4[a-f0-9]{3}-[89ab][a-f0-9]{3}-[a-f0-9]{12}$/;

/** Commands that call no service: they run without TASKCLUSTER_ROOT_URL. */
export interface OfflineCommand {
  words: string[];
  args: string[];
  summary: string;
  /** The arguments are one, with spaces (`from-now 2 days 3 hours`). */
  joined?: boolean;
  run(args: string[], flags: Flags): { json: unknown; text: string };
}

const plain = (s: string) => ({ json: s, text: s });
/** from-now's bound in days (leap years included). */
const MAX_FROM_NOW_DAYS = MAX_FROM_NOW_YEARS * 366;

export const OFFLINE: OfflineCommand[] = [
  {
    words: ['from-now'],
    args: ['duration'],
    joined: true,
    summary: 'the time <duration> from now (1d, 2 hours, 30 min, 1 year), as a task definition takes it',
    run: ([d]) => plain(fromNow('the duration', d, MAX_FROM_NOW_DAYS).toJSON()),
  },
  { words: ['slugid'], args: [], summary: 'a new slug id (--nice: a nice one)', run: (_a, f) => plain(f.nice ? slugid.nice() : slugid.v4()) },
  { words: ['slugid', 'generate'], args: [], summary: 'a new slug id (--nice: a nice one)', run: (_a, f) => plain(f.nice ? slugid.nice() : slugid.v4()) },
  { words: ['slugid', 'v4'], args: [], summary: 'a new slug id', run: () => plain(slugid.v4()) },
  { words: ['slugid', 'nice'], args: [], summary: 'a new nice slug id (starts with a letter: never read as a flag)', run: () => plain(slugid.nice()) },
  {
    words: ['slugid', 'decode'],
    args: ['slug'],
    summary: 'the UUID of a slug id',
    run: ([s]) => {
      if (!SLUG_V4.test(s)) throw new UsageError(`invalid slug format '${s}'`);
      return plain(slugid.decode(s));
    },
  },
  {
    words: ['slugid', 'encode'],
    args: ['uuid'],
    summary: 'the slug id of a v4 UUID',
    run: ([u]) => {
      if (!UUID_V4.test(u)) throw new UsageError(`invalid uuid format '${u}'`);
      return plain(slugid.encode(u));
    },
  },
];
