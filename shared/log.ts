/**
 * Structured logs: one JSON line per event, of the events registered in shared/log-events.ts
 * (with their level and fields: anything else fails type-checking).
 */
import type { LogEventAt, LogFields } from './log-events';

export interface Logger {
  request(fields: LogFields<'request'>): void;
  info<E extends LogEventAt<'info'>>(event: E, fields: LogFields<E>): void;
  warn<E extends LogEventAt<'warn'>>(event: E, fields: LogFields<E>): void;
  error<E extends LogEventAt<'error'>>(event: E, fields: LogFields<E>): void;
}

export function jsonLogger(write: (line: string) => void = (l) => process.stdout.write(l + '\n'), quiet = false): Logger {
  const emit = (level: string, event: string, fields: object) => {
    if (quiet && level === 'info') return;
    write(JSON.stringify({ time: new Date().toJSON(), level, event, ...fields }));
  };
  return {
    request: (f) => emit('info', 'request', f),
    info: (e, f) => emit('info', e, f),
    warn: (e, f) => emit('warn', e, f),
    error: (e, f) => emit('error', e, f),
  };
}

/** Collects log records in memory (tests assert on them). */
export function memoryLogger(): Logger & { records: Record<string, unknown>[] } {
  const records: Record<string, unknown>[] = [];
  const push = (level: string) => (event: string, fields: object) => void records.push({ level, event, ...fields });
  return {
    records,
    request: (f) => records.push({ level: 'info', event: 'request', ...f }),
    info: push('info'),
    warn: push('warn'),
    error: push('error'),
  };
}
