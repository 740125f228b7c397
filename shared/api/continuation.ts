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

/**
 * Decodes a token this service handed out; anything else (not base64 JSON, or not of the shape
 * `valid` accepts) is a 400, so a forged token never reaches storage.
 */
export function decodeToken<T>(token: string | undefined, valid: (v: unknown) => v is T): T | undefined {
  if (token === undefined || token === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
  } catch {
    throw badArgs('continuationToken is not valid');
  }
  if (!valid(value)) throw badArgs('continuationToken is not valid');
  return value;
}

/** Token shapes. */
export const isOffset = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
export const isString = (v: unknown): v is string => typeof v === 'string' && v !== '';
/** `{c}`: a storage continuation passed through. */
export const isPageToken = (v: unknown): v is { c: string } => typeof v === 'object' && v !== null && isString((v as { c?: unknown }).c);

export function pageLimit(raw: string | undefined, dflt = MAX_LIMIT): number {
  if (raw === undefined) return dflt;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw badArgs('limit must be a non-negative integer');
  return Math.max(1, Math.min(MAX_LIMIT, n));
}
