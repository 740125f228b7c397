/**
 * The worker's own log: one line per event, `<time> <LEVEL> <event> key=value ...`, on stdout.
 */
import type { WorkerLog } from './types';

function render(v: unknown): string {
  if (typeof v === 'string' && /^[^\s"=]+$/.test(v)) return v;
  if (v instanceof Error) return JSON.stringify(v.message);
  return JSON.stringify(v);
}

export function formatLine(level: string, event: string, fields: Record<string, unknown> = {}, now = new Date()): string {
  const kv = Object.entries(fields)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${render(v)}`);
  return [now.toISOString(), level.toUpperCase().padEnd(5), event, ...kv].join(' ');
}

export function lineLogger(write: (line: string) => void = (l) => process.stdout.write(l + '\n')): WorkerLog {
  return {
    info: (e, f) => write(formatLine('info', e, f)),
    warn: (e, f) => write(formatLine('warn', e, f)),
    error: (e, f) => write(formatLine('error', e, f)),
  };
}

/** Collects events in memory, for unit tests. */
export function memoryLog(): WorkerLog & { events: { level: string; event: string; fields: Record<string, unknown> }[] } {
  const events: { level: string; event: string; fields: Record<string, unknown> }[] = [];
  const push =
    (level: string) =>
    (event: string, fields: Record<string, unknown> = {}) =>
      events.push({ level, event, fields });
  return { events, info: push('info'), warn: push('warn'), error: push('error') };
}
