/**
 * The operator commands on top of `tcq call`: each turns a question ("why is this stuck", "rerun
 * this group", "quarantine that worker") into the calls that answer it, and prints a table (or,
 * with --json, the answers as they came).
 */
import fs from 'node:fs';
import { clientFor, findEntry, findService, Client } from './services';
import { table, fields, Row } from './table';
import { Settings, UsageError } from './settings';
import { MAX_LIMIT, untilDate, wholeNumber } from './bounds';
import { safeLine } from './safe';
import { LOG_NAME, followLog, logSource } from './follow';

export interface Flags {
  json?: boolean;
  payload?: string;
  query?: string[];
  run?: string;
  until?: string;
  reason?: string;
  limit?: string;
  [k: string]: unknown;
}

export interface Output {
  /** What --json prints. */
  json: unknown;
  /** What a terminal gets; undefined when the command printed as it went (a followed log). */
  text: string | undefined;
}

/** Where a command that prints as it goes writes, and what stops it (Ctrl-C). */
export interface Terminal {
  out: (s: string) => void;
  stop?: AbortSignal;
}

export interface Command {
  /** e.g. ['task', 'status'] */
  words: string[];
  args: string[];
  summary: string;
  run(settings: Settings, args: string[], flags: Flags, terminal?: Terminal): Promise<Output>;
}

/** Pages fetched for a listing before stopping (a listing of a huge group stays interactive). */
const MAX_PAGES = 100;
/** Default rows of a pending list. */
const DEFAULT_LIMIT = 100;

/** All pages of a listing, up to `max` items (a continuation token is not the end). */
export async function pages<T>(
  fetchPage: (token?: string) => Promise<{ continuationToken?: string } & Record<string, unknown>>,
  key: string,
  max = Infinity,
): Promise<T[]> {
  const out: T[] = [];
  let token: string | undefined;
  for (let i = 0; i < MAX_PAGES && out.length < max; i++) {
    const page = await fetchPage(token);
    out.push(...((page[key] as T[]) ?? []));
    token = page.continuationToken;
    if (!token) break;
  }
  return out.slice(0, max);
}

export function runIdOf(flags: Flags): number | undefined {
  if (flags.run === undefined) return undefined;
  if (!/^\d+$/.test(flags.run)) throw new UsageError(`--run must be a run number (0, 1, ...), got '${flags.run}'`);
  return Number(flags.run);
}

export function taskQueueParts(taskQueueId: string): [string, string] {
  const [p, w, ...rest] = taskQueueId.split('/');
  if (!p || !w || rest.length) throw new UsageError(`a task queue id is provisionerId/workerType, got '${taskQueueId}'`);
  return [p, w];
}

/** --payload: inline JSON, @file, or - (stdin). */
export function readPayload(raw: string | undefined): unknown {
  if (raw === undefined) return undefined;
  let text = raw;
  let from = '--payload';
  if (raw === '-') {
    text = fs.readFileSync(0, 'utf8');
    from = 'the payload on stdin';
  } else if (raw.startsWith('@')) {
    try {
      text = fs.readFileSync(raw.slice(1), 'utf8');
    } catch (err) {
      throw new UsageError(`--payload ${raw}: ${(err as Error).message}`);
    }
    from = raw.slice(1);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${from} is not JSON: ${(err as Error).message}`);
  }
}

export function statusText(status: Row & { runs?: Row[] }, name?: string): string {
  const head = fields({
    task: `${status.taskId}${name ? `  ${name}` : ''}`,
    state: status.state,
    taskQueue: status.taskQueueId,
    taskGroup: status.taskGroupId,
    retriesLeft: status.retriesLeft,
    deadline: status.deadline,
  });
  const runs = (status.runs ?? []).map((r) => ({ ...r, worker: r.workerId ? `${r.workerGroup}/${r.workerId}` : undefined }));
  return `${head}\n\n${table(runs, ['runId', 'state', 'reasonCreated', 'reasonResolved', 'worker', 'scheduled', 'started', 'resolved'])}`;
}

/** Fetches an artifact (following the queue's redirect) and returns its body. */
async function artifactText(settings: Settings, taskId: string, name: string, runId: number | undefined): Promise<string> {
  const queue = await clientFor('queue', settings);
  const build = (m: unknown, ...a: unknown[]) => (settings.credentials ? queue.buildSignedUrl(m, ...a) : queue.buildUrl(m, ...a));
  const url = runId === undefined ? build(queue.getLatestArtifact, taskId, name) : build(queue.getArtifact, taskId, runId, name);
  const res = await fetch(url);
  const body = await res.text();
  const where = `${name} of task ${taskId}${runId === undefined ? ' (latest run)' : ` run ${runId}`}`;
  if (res.status === 424) {
    let why = body;
    try {
      const e = JSON.parse(body);
      why = e.message ?? body;
    } catch {
      // not JSON: the body as it is
    }
    throw new UsageError(`${where} is an error artifact: ${why.split('\n')[0]}`);
  }
  if (res.status === 404) throw new UsageError(`${where} does not exist (yet): a worker uploads ${LOG_NAME} when the run ends`);
  if (!res.ok) throw Object.assign(new Error(body.slice(0, 500)), { statusCode: res.status, code: `fetching ${where}` });
  return body;
}

export const COMMANDS: Command[] = [
  {
    words: ['task', 'status'],
    args: ['taskId'],
    summary: "a task's state and runs",
    async run(settings, [taskId]) {
      const queue = await clientFor('queue', settings);
      const [{ status }, task] = await Promise.all([queue.status(taskId), queue.task(taskId).catch(() => undefined)]);
      return { json: { status, task }, text: statusText(status, task?.metadata?.name) };
    },
  },
  {
    words: ['task', 'log'],
    args: ['taskId'],
    summary: `a task's log (${LOG_NAME}), followed while the run runs until it resolves; --run N for another run than the latest`,
    async run(settings, [taskId], flags, terminal) {
      const { runId, follow } = await logSource(settings, taskId, runIdOf(flags));
      if (!follow) {
        const text = await artifactText(settings, taskId, LOG_NAME, runId);
        return { json: { taskId, runId, name: LOG_NAME, text }, text: text.replace(/\n$/, '') };
      }
      // --json prints the whole log once it is complete; a terminal gets each line as it comes.
      const text = await followLog(settings, taskId, runId, flags.json ? undefined : terminal?.out, terminal?.stop);
      return { json: { taskId, runId, name: LOG_NAME, text }, text: undefined };
    },
  },
  {
    words: ['task', 'artifacts'],
    args: ['taskId'],
    summary: "a task's artifacts (latest run; --run N)",
    async run(settings, [taskId], flags) {
      const queue = await clientFor('queue', settings);
      const runId = runIdOf(flags);
      const artifacts = await pages<Row>(
        (continuationToken) =>
          runId === undefined
            ? queue.listLatestArtifacts(taskId, continuationToken ? { continuationToken } : {})
            : queue.listArtifacts(taskId, runId, continuationToken ? { continuationToken } : {}),
        'artifacts',
      );
      return { json: { artifacts }, text: table(artifacts, ['name', 'storageType', 'contentType', 'expires']) };
    },
  },
  {
    words: ['task', 'artifact'],
    args: ['taskId', 'name'],
    summary: 'prints one artifact (latest run; --run N)',
    async run(settings, [taskId, name], flags) {
      const text = await artifactText(settings, taskId, name, runIdOf(flags));
      return { json: { taskId, name, text }, text: text.replace(/\n$/, '') };
    },
  },
  {
    words: ['task', 'rerun'],
    args: ['taskId'],
    summary: 'reruns a resolved task (a new run, pending)',
    async run(settings, [taskId]) {
      const { status } = await (await clientFor('queue', settings)).rerunTask(taskId);
      return { json: { status }, text: statusText(status) };
    },
  },
  {
    words: ['task', 'cancel'],
    args: ['taskId'],
    summary: 'cancels a task (exception/canceled; a running worker is told at its next reclaim)',
    async run(settings, [taskId]) {
      const { status } = await (await clientFor('queue', settings)).cancelTask(taskId);
      return { json: { status }, text: statusText(status) };
    },
  },
  {
    words: ['group', 'status'],
    args: ['taskGroupId'],
    summary: "a task group's tasks and how many are in each state",
    async run(settings, [taskGroupId]) {
      const queue = await clientFor('queue', settings);
      const tasks = await pages<{ status: Row & { runs?: Row[] }; task: { metadata?: { name?: string } } }>(
        (continuationToken) => queue.listTaskGroup(taskGroupId, continuationToken ? { continuationToken } : {}),
        'tasks',
      );
      const counts: Record<string, number> = {};
      for (const t of tasks) counts[String(t.status.state)] = (counts[String(t.status.state)] ?? 0) + 1;
      const rows = tasks.map((t) => ({ taskId: t.status.taskId, state: t.status.state, runs: t.status.runs?.length ?? 0, name: t.task?.metadata?.name }));
      const summary = `${tasks.length} tasks: ${Object.entries(counts)
        .map(([s, n]) => `${n} ${safeLine(s)}`)
        .join(', ')}`;
      return { json: { taskGroupId, counts, tasks }, text: `${summary}\n\n${table(rows, ['taskId', 'state', 'runs', 'name'])}` };
    },
  },
  {
    words: ['group', 'rerun'],
    args: ['taskGroupId'],
    summary: 'reruns every failed or exception task of a group',
    async run(settings, [taskGroupId]) {
      const queue = await clientFor('queue', settings);
      const tasks = await pages<{ status: Row }>(
        (continuationToken) => queue.listTaskGroup(taskGroupId, continuationToken ? { continuationToken } : {}),
        'tasks',
      );
      const rows: Row[] = [];
      for (const t of tasks.filter((x) => x.status.state === 'failed' || x.status.state === 'exception')) {
        const taskId = t.status.taskId;
        try {
          const { status } = await queue.rerunTask(taskId);
          rows.push({ taskId, was: t.status.state, now: status.state });
        } catch (err) {
          rows.push({ taskId, was: t.status.state, now: `not rerun: ${String((err as Error).message).split('\n')[0]}` });
        }
      }
      return { json: { taskGroupId, reran: rows }, text: rows.length ? table(rows, ['taskId', 'was', 'now']) : 'no failed or exception task in this group' };
    },
  },
  {
    words: ['group', 'cancel'],
    args: ['taskGroupId'],
    summary: 'seals a group (no new tasks) and cancels every unresolved task in it',
    async run(settings, [taskGroupId]) {
      const queue = await clientFor('queue', settings);
      // The queue cancels only a sealed group: otherwise tasks created meanwhile would escape.
      await queue.sealTaskGroup(taskGroupId);
      const res = await queue.cancelTaskGroup(taskGroupId);
      return { json: res, text: fields({ taskGroupId: res.taskGroupId, sealed: 'yes', taskGroupSize: res.taskGroupSize, cancelled: res.cancelledCount }) };
    },
  },
  {
    words: ['queue', 'counts'],
    args: ['taskQueueId'],
    summary: "a task queue's pending and claimed counts",
    async run(settings, [taskQueueId]) {
      taskQueueParts(taskQueueId);
      const res = await (await clientFor('queue', settings)).taskQueueCounts(taskQueueId);
      return { json: res, text: fields({ taskQueue: taskQueueId, pending: res.pendingTasks, claimed: res.claimedTasks }) };
    },
  },
  {
    words: ['queue', 'pending'],
    args: ['taskQueueId'],
    summary: `a task queue's pending tasks, oldest first (--limit N, default ${DEFAULT_LIMIT}, at most ${MAX_LIMIT})`,
    async run(settings, [taskQueueId], flags) {
      taskQueueParts(taskQueueId);
      const limit = flags.limit === undefined ? DEFAULT_LIMIT : wholeNumber('limit', flags.limit, 1, MAX_LIMIT);
      const queue = await clientFor('queue', settings);
      const tasks = await pages<{ taskId: string; runId: number; inserted: string; task: { priority?: string; metadata?: { name?: string } } }>(
        (continuationToken) =>
          queue.listPendingTasks(taskQueueId, { limit: String(Math.min(limit, 1000)), ...(continuationToken ? { continuationToken } : {}) }),
        'tasks',
        limit,
      );
      const rows = tasks.map((t) => ({ taskId: t.taskId, runId: t.runId, inserted: t.inserted, priority: t.task?.priority, name: t.task?.metadata?.name }));
      return { json: { tasks }, text: table(rows, ['taskId', 'runId', 'inserted', 'priority', 'name']) };
    },
  },
  {
    words: ['worker', 'quarantine'],
    args: ['taskQueueId', 'workerGroup', 'workerId'],
    summary: 'quarantines a worker (--until 2h|ISO time|now to lift; --reason text): its claimWork calls get no tasks',
    async run(settings, [taskQueueId, workerGroup, workerId], flags) {
      const [provisionerId, workerType] = taskQueueParts(taskQueueId);
      const quarantineUntil = untilDate(flags.until);
      const w = await (
        await clientFor('queue', settings)
      ).quarantineWorker(provisionerId, workerType, workerGroup, workerId, { quarantineUntil, ...(flags.reason ? { quarantineInfo: flags.reason } : {}) });
      return {
        json: w,
        text: fields({ worker: `${taskQueueId} ${workerGroup}/${workerId}`, quarantineUntil: w.quarantineUntil, lastDateActive: w.lastDateActive }),
      };
    },
  },
  {
    words: ['hook', 'trigger'],
    args: ['hookGroupId', 'hookId'],
    summary: 'triggers a hook (--payload JSON|@file|-, default {}); prints the task it created',
    async run(settings, [hookGroupId, hookId], flags) {
      const res = await (await clientFor('hooks', settings)).triggerHook(hookGroupId, hookId, readPayload(flags.payload) ?? {});
      return { json: res, text: res?.taskId ? fields({ taskId: res.taskId }) : 'the hook rendered no task' };
    },
  },
  {
    words: ['index', 'find'],
    args: ['namespace'],
    summary: 'the task an index path points at',
    async run(settings, [namespace]) {
      const res = await (await clientFor('index', settings)).findTask(namespace);
      return { json: res, text: fields({ namespace: res.namespace, taskId: res.taskId, rank: res.rank, expires: res.expires, data: res.data }) };
    },
  },
];

/** `tcq call <service> [<method> args...]`: any method of any service; the answer as JSON. */
export async function call(settings: Settings, [service, method, ...args]: string[], flags: Flags): Promise<Output> {
  if (!service) throw new UsageError('usage: tcq call <service> <method> [args...] [--payload JSON|@file|-] [--query key=value]');
  const ref = findService(service);
  if (!method) {
    const rows = ref.entries.map((e) => ({
      method: e.name,
      args: e.args.join(' ') + (e.input ? ' --payload' : ''),
      http: `${e.method.toUpperCase()} ${e.route}`,
      stability: e.stability,
    }));
    return { json: ref, text: table(rows, ['method', 'args', 'http', 'stability']) };
  }
  const entry = findEntry(ref, method);
  if (args.length !== entry.args.length)
    throw new UsageError(
      `${service}.${method} takes ${entry.args.length ? entry.args.map((a) => `<${a}>`).join(' ') : 'no arguments'}, got ${args.length ? args.join(' ') : 'none'}`,
    );
  const payload = readPayload(flags.payload);
  if (entry.input && payload === undefined)
    throw new UsageError(`${service}.${method} needs a payload: --payload '{...}', --payload @file.json or --payload - (stdin)`);
  if (!entry.input && payload !== undefined) throw new UsageError(`${service}.${method} takes no payload`);
  const query: Record<string, string> = {};
  for (const q of flags.query ?? []) {
    const i = q.indexOf('=');
    if (i <= 0) throw new UsageError(`--query takes key=value, got '${q}'`);
    const k = q.slice(0, i);
    if (!entry.query.includes(k))
      throw new UsageError(`${service}.${method} has no query parameter '${k}'${entry.query.length ? ` (it has ${entry.query.join(', ')})` : ''}`);
    query[k] = q.slice(i + 1);
  }
  const client: Client = await clientFor(service, settings);
  const callArgs: unknown[] = [...args];
  if (entry.input) callArgs.push(payload);
  if (Object.keys(query).length) callArgs.push(query);
  const res = await client[method](...callArgs);
  return { json: res ?? null, text: JSON.stringify(res ?? null, null, 2) };
}
