/**
 * Suspension on the command's request. A command whose payload has `suspend` finds the path of a
 * request file in TASK_SUSPEND_FILE; writing `{continuation, resumeAt?|resumeAfter?}` there and
 * exiting 0 makes the worker call suspendRun instead of reporting. The run that resumes gets the
 * continuation back in the file named by TASK_CONTINUATION_FILE.
 */
import fs from 'node:fs';

/** Env var naming the file a command writes to ask for suspension. */
export const SUSPEND_FILE_ENV = 'TASK_SUSPEND_FILE';
/** Env var naming the file holding the continuation of a resumed run. */
export const CONTINUATION_FILE_ENV = 'TASK_CONTINUATION_FILE';
/** Largest request file read; the queue takes at most 16 KiB of continuation, so more is a mistake. */
export const MAX_SUSPEND_FILE_BYTES = 64 * 1024;

export type SuspendRequest = { ok: true; continuation: unknown; resumeAt: string } | { ok: false; problem: string };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Parses a request; `resumeAfterDefault` (seconds) applies when it names no time. */
export function parseSuspendRequest(text: string, opts: { now: Date; resumeAfterDefault: number }): SuspendRequest {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    return { ok: false, problem: `it is not JSON (${(err as Error).message})` };
  }
  if (!isObject(body) || !('continuation' in body)) return { ok: false, problem: 'it must be a JSON object with a `continuation` property' };
  const extra = Object.keys(body).filter((k) => !['continuation', 'resumeAt', 'resumeAfter'].includes(k));
  if (extra.length) return { ok: false, problem: `unknown properties ${extra.join(', ')} (allowed: continuation, resumeAt, resumeAfter)` };
  const { continuation, resumeAt, resumeAfter } = body;
  if (resumeAt !== undefined && resumeAfter !== undefined) return { ok: false, problem: 'give resumeAt or resumeAfter, not both' };
  if (resumeAt !== undefined) {
    const d = typeof resumeAt === 'string' ? new Date(resumeAt) : new Date(NaN);
    if (Number.isNaN(d.getTime())) return { ok: false, problem: `resumeAt must be a date-time string, got ${JSON.stringify(resumeAt)}` };
    return { ok: true, continuation, resumeAt: d.toJSON() };
  }
  if (resumeAfter !== undefined && (typeof resumeAfter !== 'number' || !Number.isFinite(resumeAfter) || resumeAfter < 0)) {
    return { ok: false, problem: `resumeAfter must be a number of seconds >= 0, got ${JSON.stringify(resumeAfter)}` };
  }
  const seconds = (resumeAfter as number | undefined) ?? opts.resumeAfterDefault;
  return { ok: true, continuation, resumeAt: new Date(opts.now.getTime() + seconds * 1000).toJSON() };
}

/** The request the command left, or undefined when it asked for nothing. */
export async function readSuspendRequest(file: string, opts: { now: Date; resumeAfterDefault: number }): Promise<SuspendRequest | undefined> {
  const st = await fs.promises.stat(file).catch(() => undefined);
  if (!st) return undefined;
  if (!st.isFile()) return { ok: false, problem: 'it is not a regular file' };
  if (st.size > MAX_SUSPEND_FILE_BYTES) return { ok: false, problem: `it is ${st.size} bytes; at most ${MAX_SUSPEND_FILE_BYTES} are read` };
  return parseSuspendRequest(await fs.promises.readFile(file, 'utf8'), opts);
}
