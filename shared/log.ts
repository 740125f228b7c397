/**
 * Structured logs: one JSON line per function invocation and per reaper pass.
 */
export interface Logger {
  request(fields: { fn: string; method: string; status: number; ms: number; storageCalls: number }): void;
  info(event: string, fields?: Record<string, unknown>): void;
  warn(event: string, fields?: Record<string, unknown>): void;
  error(event: string, fields?: Record<string, unknown>): void;
}

export function jsonLogger(write: (line: string) => void = (l) => process.stdout.write(l + '\n'), quiet = false): Logger {
  const emit = (level: string, event: string, fields?: Record<string, unknown>) => {
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
  const push = (level: string) => (event: string, fields?: Record<string, unknown>) => records.push({ level, event, ...fields });
  return {
    records,
    request: (f) => records.push({ level: 'info', event: 'request', ...f }),
    info: push('info'),
    warn: push('warn'),
    error: push('error'),
  };
}
