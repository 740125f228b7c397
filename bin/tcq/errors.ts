/**
 * Failed calls in words that say what to fix: rejected credentials name the client id and the
 * variables, an unreachable service names TASKCLUSTER_ROOT_URL, and a refused call keeps the
 * service's own message (which lists the scopes it needed).
 */
import type { Settings } from './settings';

interface CallError {
  statusCode?: number;
  code?: string;
  message?: string;
  cause?: { code?: string };
}

const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH']);

export function explain(err: unknown, settings: Settings, what: string): string {
  const e = (err ?? {}) as CallError;
  // Taskcluster appends a `---` block (method, errorCode, time): the status line says as much.
  const message = String(e.message ?? err)
    .split('\n---')[0]
    .trim();
  const first = message.split('\n')[0];
  const id = settings.credentials?.clientId;
  if (e.statusCode === 401)
    return id
      ? `${what}: ${settings.rootUrl} rejected client '${id}' (401: ${first}). Check TASKCLUSTER_CLIENT_ID and TASKCLUSTER_ACCESS_TOKEN (the client's current token; temporary credentials in TASKCLUSTER_CERTIFICATE expire).`
      : `${what}: 401 ${first}`;
  if (e.statusCode === 403) {
    const detail = message.split('\n').slice(0, 12).join('\n');
    return `${what}: 403 ${e.code ?? ''}\n${detail}${id ? '' : '\nNo credentials were given: set TASKCLUSTER_CLIENT_ID and TASKCLUSTER_ACCESS_TOKEN.'}`;
  }
  if (e.statusCode) return `${what}: ${e.statusCode} ${e.code ?? ''}: ${message.split('\n').slice(0, 12).join('\n')}`;
  const code = e.code ?? e.cause?.code;
  if (code && UNREACHABLE.has(code)) return `${what}: nothing answers at ${settings.rootUrl} (${code}). Is the service running? Check TASKCLUSTER_ROOT_URL.`;
  return `${what}: ${first}`;
}
