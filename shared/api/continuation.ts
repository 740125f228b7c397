/**
 * Opaque continuation tokens: base64url JSON of whatever the listing needs to resume.
 */
import { badArgs } from '../errors';

/** Taskcluster caps page sizes at 1000. */
export const MAX_LIMIT = 1000;

export function encodeToken(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

export function decodeToken<T>(token: string | undefined): T | undefined {
  if (token === undefined || token === '') return undefined;
  try {
    return JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as T;
  } catch {
    throw badArgs('continuationToken is not valid');
  }
}

export function pageLimit(raw: string | undefined, dflt = MAX_LIMIT): number {
  if (raw === undefined) return dflt;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw badArgs('limit must be a non-negative integer');
  return Math.max(1, Math.min(MAX_LIMIT, n));
}
