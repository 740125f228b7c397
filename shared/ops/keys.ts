/**
 * Row keys for the operator read models. Keys sort as strings, so times are ISO strings (oldest
 * first) or inverted epoch milliseconds (newest first), and `~` separates parts: every character
 * a key part may contain sorts below `~`, so `prefix + '~'` bounds a prefix range.
 */
import { encodeKey } from '../storage/keys';
import type { KeyRange } from '../storage/storage';

/** A free-text key part (task names): table-safe and free of the `~` separator. */
export function part(s: string): string {
  return encodeKey(s).replace(/~/g, '!7e');
}

/** Largest epoch milliseconds we invert (year 2286), so inverted times have a fixed width. */
const MAX_MS = 9_999_999_999_999;

/** Newest-first sort key for an ISO time. */
export function inverted(iso: string): string {
  return String(MAX_MS - Date.parse(iso)).padStart(13, '0');
}

/** The ISO time an inverted key part stands for. */
export function fromInverted(s: string): string {
  return new Date(MAX_MS - Number(s)).toJSON();
}

/** The key range of keys starting with `prefix` (all key characters sort below '~'). */
export function prefixRange(prefix: string): KeyRange {
  return { ge: prefix, lt: prefix + '~' };
}
