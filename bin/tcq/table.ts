/** Plain-text tables for a terminal: a header, aligned columns, `-` for what is missing. */
import { safeLine } from './safe';

export type Row = Record<string, unknown>;

/** A value as one line: a cell's text comes from task data, which may hold control characters. */
function cell(v: unknown): string {
  if (v === undefined || v === null || v === '') return '-';
  return safeLine(typeof v === 'string' ? v : typeof v === 'object' ? JSON.stringify(v) : String(v));
}

export function table(rows: Row[], columns: string[]): string {
  if (!rows.length) return '(none)';
  const cells = rows.map((r) => columns.map((c) => cell(r[c])));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((r) => r[i].length)));
  const line = (vs: string[]) =>
    vs
      .map((v, i) => (i === vs.length - 1 ? v : v.padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.toUpperCase())), ...cells.map(line)].join('\n');
}

/** `key: value` lines, keys aligned. */
export function fields(obj: Row): string {
  const keys = Object.keys(obj).filter((k) => obj[k] !== undefined);
  const w = Math.max(...keys.map((k) => k.length));
  return keys.map((k) => `${(k + ':').padEnd(w + 1)} ${cell(obj[k])}`).join('\n');
}
