/**
 * Request bodies: size and nesting are bounded before anything recursive (parsing, validation,
 * logging) touches them, so no body can exhaust the stack or the memory of an instance.
 */
import { ApiError } from '../errors';

/** lib-api's input limit; the function host caps bodies at 100 MB anyway. */
export const MAX_BODY_BYTES = 10 * 1024 * 1024;
/**
 * Deepest JSON nesting accepted. Real task definitions and payloads nest a handful of levels; the
 * recursive steps after parsing (schema validation, logging) overflow the stack at a few thousand.
 */
export const MAX_JSON_DEPTH = 100;

/** The deepest nesting of arrays and objects in a JSON text, counted without parsing it. */
export function jsonDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) max = Math.max(max, ++depth);
    else if (c === 0x5d || c === 0x7d) depth--;
  }
  return max;
}

/** Refuses a body whose declared length is already too large, before reading it. */
export function checkDeclaredLength(contentLength: string | null): void {
  if (contentLength !== null && Number(contentLength) > MAX_BODY_BYTES) {
    throw new ApiError('InputTooLarge', `request body is larger than ${MAX_BODY_BYTES} bytes`);
  }
}

/** Parses a request body: undefined when empty, else a JSON object within the limits. */
export function parseBody(buf: Buffer): unknown {
  if (buf.length > MAX_BODY_BYTES) throw new ApiError('InputTooLarge', `request body is larger than ${MAX_BODY_BYTES} bytes`);
  const text = buf.toString('utf8');
  if (text.trim() === '') return undefined;
  if (jsonDepth(text) > MAX_JSON_DEPTH) throw new ApiError('MalformedPayload', `request body nests deeper than ${MAX_JSON_DEPTH} levels`);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (e) {
    throw new ApiError('MalformedPayload', `request body is not valid JSON: ${(e as Error).message}`);
  }
  if (typeof body !== 'object' || body === null) throw new ApiError('MalformedPayload', 'request body must be a JSON object');
  return body;
}
