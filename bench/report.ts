/**
 * Prints the benchmark's figures as a readable table.
 */
export interface Row {
  metric: string;
  value: string;
  target?: string;
  verdict?: 'ok' | 'MISSED' | '';
}

export function table(title: string, rows: Row[]): string {
  const w0 = Math.max(6, ...rows.map((r) => r.metric.length));
  const w1 = Math.max(5, ...rows.map((r) => r.value.length));
  const w2 = Math.max(6, ...rows.map((r) => (r.target ?? '').length));
  const line = (a: string, b: string, c: string, d: string) => `  ${a.padEnd(w0)}  ${b.padStart(w1)}  ${c.padEnd(w2)}  ${d}`.trimEnd();
  return [
    `\n${title}`,
    line('metric', 'value', 'target', ''),
    line('-'.repeat(w0), '-'.repeat(w1), '-'.repeat(w2), ''),
    ...rows.map((r) => line(r.metric, r.value, r.target ?? '', r.verdict ?? '')),
  ].join('\n');
}

export const verdict = (ok: boolean): 'ok' | 'MISSED' => (ok ? 'ok' : 'MISSED');

export const mb = (bytes: number | undefined): string => (bytes === undefined ? 'n/a' : `${(bytes / 1024 / 1024).toFixed(0)} MB`);
