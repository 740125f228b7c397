/**
 * Text from the service (task names, logs, artifact names, error messages) is written by whoever
 * made the task, so a terminal must not obey it: control characters would clear the screen, set
 * the clipboard (OSC 52), move the cursor over real rows or fake new ones, and bidi overrides would
 * show text in another order than it is. `tcq` shows each such character as a visible escape
 * (`\u001b`, `\n`) instead. The escapes are JSON's, so JSON output stays valid JSON meaning the same.
 */

/**
 * What a terminal may act on: C0 controls, DEL and C1 controls (0x9b alone starts a control
 * sequence on some terminals), the bidi marks, embeddings, overrides and isolates, and the
 * Unicode line and paragraph separators (a line break to some terminals).
 */
// eslint-disable-next-line no-control-regex -- finding control characters is the point
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
/** The same, but keeping newline and tab (lines and indents of a log or of JSON) and CR before LF. */
// eslint-disable-next-line no-control-regex -- as above
const UNSAFE_IN_TEXT = /(?!\r\n)[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
/** JSON's short escapes, for the characters a reader knows by them. */
const SHORT: Record<string, string> = { '\n': '\\n', '\t': '\\t', '\r': '\\r', '\b': '\\b', '\f': '\\f' };

function escape(c: string): string {
  return SHORT[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
}

/** Multi-line text (a log, a message, JSON): its lines as they are, every other control escaped. */
export function safeText(s: string): string {
  return s.replace(UNSAFE_IN_TEXT, escape);
}

/** One line (a table cell, an event line): newlines and tabs escaped too, so it cannot fake rows. */
export function safeLine(s: string): string {
  return s.replace(UNSAFE, escape);
}
