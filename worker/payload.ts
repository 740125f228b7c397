/**
 * The payload this worker understands, and its validation. The queue never validates
 * `task.payload`, so the worker must: an invalid payload is resolved `exception/malformed-payload`
 * with every problem written to the task log, since another run would fail the same way.
 */
import path from 'node:path';

/** Longest command run the worker accepts (a day, like generic-worker's limit). */
export const MAX_RUN_TIME_S = 86_400;
/** When the payload names none: an hour, so a first task runs as written and a hung one still ends. */
export const DEFAULT_MAX_RUN_TIME_S = 3_600;
/** Artifact names are path-like; the queue stores them in table keys, so keep them bounded. */
const MAX_ARTIFACT_NAME = 1024;
/** The log artifact the worker itself uploads. */
export const LIVE_LOG_NAME = 'public/logs/live.log';
/** The complete log, uploaded when the run ends; LIVE_LOG_NAME then links to it (generic-worker's names). */
export const LIVE_BACKING_LOG_NAME = 'public/logs/live_backing.log';
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Longest default resume delay a payload may ask for (a week: a task that long is past its deadline anyway). */
export const MAX_RESUME_AFTER_S = 7 * 86_400;

export interface ArtifactSpec {
  type: 'file';
  /** Relative to the task directory. */
  path: string;
  name: string;
  expires: string;
  /** A required artifact that is missing after a successful command makes the run malformed-payload. */
  required: boolean;
  contentType?: string;
}

export interface Payload {
  command: string[];
  env: Record<string, string>;
  maxRunTime: number;
  artifacts: ArtifactSpec[];
  /** Present when the command may suspend the run (suspendRun); resumeAfter is the default delay in seconds. */
  suspend?: { resumeAfter: number };
}

export type Validation = { ok: true; payload: Payload } | { ok: false; problems: string[] };

export const PAYLOAD_SHAPE =
  "{command: [program, ...args], env?: {NAME: 'value'}, maxRunTime?: seconds (1.." +
  MAX_RUN_TIME_S +
  ', default ' +
  DEFAULT_MAX_RUN_TIME_S +
  "), artifacts?: [{type: 'file', path: 'relative/path', name: 'public/...', expires?: date, required?: boolean, contentType?: string}], suspend?: {resumeAfter?: seconds (0.." +
  MAX_RESUME_AFTER_S +
  ')}}';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const show = (v: unknown) => {
  const s = JSON.stringify(v);
  return s === undefined ? String(v) : s.length > 120 ? s.slice(0, 117) + '...' : s;
};

function unknownKeys(obj: Record<string, unknown>, allowed: string[], where: string, problems: string[]): void {
  for (const k of Object.keys(obj)) {
    if (!allowed.includes(k)) problems.push(`${where} has an unknown property '${k}' (allowed: ${allowed.join(', ')})`);
  }
}

/** A relative path that stays inside the task directory, or undefined. */
export function safeRelativePath(p: string): string | undefined {
  if (p === '' || path.isAbsolute(p) || p.includes('\0')) return undefined;
  const norm = path.normalize(p);
  if (norm === '..' || norm.startsWith('..' + path.sep) || norm === '.') return undefined;
  return norm;
}

/**
 * Checks `payload` for a task expiring at `taskExpires`. Collects every problem rather than the
 * first, so the task author can fix them all at once.
 */
export function validatePayload(payload: unknown, opts: { taskExpires: string; now?: Date }): Validation {
  const now = opts.now ?? new Date();
  const problems: string[] = [];
  if (!isObject(payload)) return { ok: false, problems: [`payload must be an object, got ${show(payload)}`] };
  unknownKeys(payload, ['command', 'env', 'maxRunTime', 'artifacts', 'suspend'], 'payload', problems);

  const { command, env, maxRunTime, artifacts, suspend } = payload;
  if (command === undefined) problems.push('payload.command is required: an array [program, ...args], e.g. ["sh", "-c", "make test"]');
  else if (!Array.isArray(command) || command.length === 0) {
    problems.push(`payload.command must be a non-empty array [program, ...args], e.g. ["sh", "-c", "make test"]; got ${show(command)}`);
  } else {
    command.forEach((c, i) => {
      if (typeof c !== 'string') problems.push(`payload.command[${i}] must be a string, got ${show(c)}`);
    });
    if (typeof command[0] === 'string' && command[0].trim() === '') problems.push('payload.command[0] (the program to run) is empty');
  }

  if (env !== undefined) {
    if (!isObject(env)) problems.push(`payload.env must be an object of NAME: 'value' strings, got ${show(env)}`);
    else {
      for (const [k, v] of Object.entries(env)) {
        if (!ENV_NAME.test(k)) problems.push(`payload.env name '${k}' is not a valid variable name (letters, digits and _, not starting with a digit)`);
        if (typeof v !== 'string') problems.push(`payload.env.${k} must be a string, got ${show(v)}`);
      }
    }
  }

  if (maxRunTime !== undefined && (typeof maxRunTime !== 'number' || !Number.isInteger(maxRunTime) || maxRunTime < 1 || maxRunTime > MAX_RUN_TIME_S)) {
    problems.push(`payload.maxRunTime must be an integer number of seconds between 1 and ${MAX_RUN_TIME_S}, got ${show(maxRunTime)}`);
  }

  const specs: ArtifactSpec[] = [];
  const taskExpires = new Date(opts.taskExpires);
  if (artifacts !== undefined) {
    if (!Array.isArray(artifacts)) problems.push(`payload.artifacts must be an array, got ${show(artifacts)}`);
    else {
      const names = new Set<string>();
      artifacts.forEach((a, i) => {
        const where = `payload.artifacts[${i}]`;
        if (!isObject(a)) {
          problems.push(`${where} must be an object like {type: 'file', path, name}, got ${show(a)}`);
          return;
        }
        const before = problems.length;
        unknownKeys(a, ['type', 'path', 'name', 'expires', 'required', 'contentType'], where, problems);
        if (a.type !== 'file') problems.push(`${where}.type must be 'file' (the only artifact type this worker uploads), got ${show(a.type)}`);
        let rel: string | undefined;
        if (typeof a.path !== 'string' || a.path === '') problems.push(`${where}.path is required: the file's path relative to the task directory`);
        else if (!(rel = safeRelativePath(a.path))) problems.push(`${where}.path '${a.path}' must be a relative path inside the task directory`);
        if (typeof a.name !== 'string' || a.name === '') problems.push(`${where}.name is required: the artifact name, e.g. 'public/build/output.txt'`);
        else if (a.name.length > MAX_ARTIFACT_NAME) problems.push(`${where}.name is longer than ${MAX_ARTIFACT_NAME} characters`);
        else if (a.name === LIVE_LOG_NAME || a.name === LIVE_BACKING_LOG_NAME) problems.push(`${where}.name '${a.name}' is reserved for the task log`);
        else if (names.has(a.name)) problems.push(`${where}.name '${a.name}' is declared twice`);
        else names.add(a.name);
        let expires = opts.taskExpires;
        if (a.expires !== undefined) {
          const d = typeof a.expires === 'string' ? new Date(a.expires) : new Date(NaN);
          if (Number.isNaN(d.getTime())) problems.push(`${where}.expires must be a date-time string, got ${show(a.expires)}`);
          else if (d <= now) problems.push(`${where}.expires ${a.expires} is in the past`);
          else if (d > taskExpires)
            problems.push(`${where}.expires ${a.expires} is after the task expires (${opts.taskExpires}); artifacts cannot outlive their task`);
          else expires = d.toISOString();
        }
        if (a.required !== undefined && typeof a.required !== 'boolean') problems.push(`${where}.required must be true or false, got ${show(a.required)}`);
        if (a.contentType !== undefined && (typeof a.contentType !== 'string' || !/^[\w.+-]+\/[\w.+-]+/.test(a.contentType))) {
          problems.push(`${where}.contentType must be a media type like 'text/plain', got ${show(a.contentType)}`);
        }
        if (problems.length === before) {
          specs.push({
            type: 'file',
            path: rel!,
            name: a.name as string,
            expires,
            required: a.required === true,
            ...(a.contentType ? { contentType: a.contentType as string } : {}),
          });
        }
      });
    }
  }

  let resumeAfter = 0;
  if (suspend !== undefined) {
    if (!isObject(suspend)) problems.push(`payload.suspend must be an object like {resumeAfter: 60}, got ${show(suspend)}`);
    else {
      unknownKeys(suspend, ['resumeAfter'], 'payload.suspend', problems);
      const r = suspend.resumeAfter;
      if (r !== undefined && (typeof r !== 'number' || !Number.isInteger(r) || r < 0 || r > MAX_RESUME_AFTER_S)) {
        problems.push(`payload.suspend.resumeAfter must be an integer number of seconds between 0 and ${MAX_RESUME_AFTER_S}, got ${show(r)}`);
      } else if (typeof r === 'number') resumeAfter = r;
    }
  }

  if (problems.length) return { ok: false, problems };
  return {
    ok: true,
    payload: {
      command: command as string[],
      env: (env as Record<string, string>) ?? {},
      maxRunTime: (maxRunTime as number | undefined) ?? DEFAULT_MAX_RUN_TIME_S,
      artifacts: specs,
      ...(suspend !== undefined ? { suspend: { resumeAfter } } : {}),
    },
  };
}
