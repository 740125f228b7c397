/**
 * `npm start`'s logger for a person at a terminal: one short line per event worth reading (a task
 * transition, a warning, an error, a failed request) and a status line with the counts of the rest
 * (requests, reaper passes), so an idle service prints nothing and the banner stays on screen.
 * `--json` (QUEUE_LOG_FORMAT=json) uses jsonLogger instead; Azure always does.
 */
import type { Logger } from '../log';
import type { LogEventAt, LogFields } from '../log-events';

/** Where the lines go: `line` appends one; `status` replaces the status line (a no-op off a terminal). */
export interface LogSink {
  line(text: string): void;
  status(text: string): void;
}

/**
 * The info events a person wants to see as they happen. Anything else at info (requests, reaper
 * passes, sweeps) repeats while idle or repeats a transition's line, so it only feeds the status line.
 */
const SHOWN_INFO: ReadonlySet<LogEventAt<'info'>> = new Set(['task-transition', 'worker-declared-gone', 'hook-fire-skipped', 'hook-event-dropped'] as const);
/** A request answered at or above this is a failure on our side, worth a line of its own. */
const SERVER_ERROR = 500;

const clock = (d: Date) => d.toISOString().slice(11, 19);

/** `key=value` pairs, the error last (it is the longest). */
function pairs(fields: object): string {
  const { error, ...rest } = fields as Record<string, unknown>;
  const shown = Object.entries(rest).map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : String(v)}`);
  if (error !== undefined) shown.push(`error: ${String(error)}`);
  return shown.join(' ');
}

/** `task <id> run 0: pending → running (claimed by wg/w1) proj/linux`. */
export function transitionLine(f: LogFields<'task-transition'>): string {
  const run = f.runId === undefined ? '' : ` run ${f.runId}`;
  const change = f.from === null ? f.to : `${f.from} → ${f.to}`;
  const worker = f.workerGroup && f.workerId ? ` by ${f.workerGroup}/${f.workerId}` : '';
  const why = f.reason && f.reason !== f.transition ? `${f.transition}: ${f.reason}` : f.transition;
  return `task ${f.taskId}${run}: ${change} (${why}${worker}) ${f.taskQueueId}`;
}

export function humanLogger(sink: LogSink, now: () => Date = () => new Date()): Logger {
  const counts = { requests: 0, transitions: 0, warnings: 0, errors: 0 };
  let lastPass: Date | undefined;
  const status = () =>
    sink.status(
      `${counts.requests} requests · ${counts.transitions} transitions · ${counts.warnings} warnings · ${counts.errors} errors` +
        (lastPass ? ` · reaper ${clock(lastPass)}` : ''),
    );
  const line = (level: string, text: string) => {
    sink.line(`${clock(now())} ${level.padEnd(5)} ${text}`);
    status();
  };
  return {
    request: (f) => {
      counts.requests++;
      if (f.status >= SERVER_ERROR) line('error', `${f.method} ${f.fn} answered ${f.status} (${f.ms} ms)`);
      else status();
    },
    info: (event, fields) => {
      if (event === 'task-transition') {
        counts.transitions++;
        line('info', transitionLine(fields as LogFields<'task-transition'>));
      } else if (SHOWN_INFO.has(event)) line('info', `${event} ${pairs(fields)}`);
      else {
        if (event === 'reaper-pass') lastPass = now();
        status();
      }
    },
    warn: (event, fields) => {
      counts.warnings++;
      line('warn', `${event} ${pairs(fields)}`);
    },
    error: (event, fields) => {
      counts.errors++;
      line('error', `${event} ${pairs(fields)}`);
    },
  };
}

/** Keeps the status line on one row (a wrapped one cannot be redrawn in place). */
const STATUS_MARGIN = 1;

/** A LogSink on a stream: the status line is drawn in place on a terminal, and left out otherwise. */
export function terminalSink(out: NodeJS.WriteStream): LogSink {
  const tty = out.isTTY === true;
  let shown = '';
  const fit = (s: string) => (out.columns ? s.slice(0, Math.max(0, out.columns - STATUS_MARGIN)) : s);
  return {
    line: (text) => void out.write(tty && shown ? `\r\x1b[K${text}\n${shown}` : `${text}\n`),
    status: (text) => {
      if (!tty) return;
      shown = fit(text);
      out.write(`\r\x1b[K${shown}`);
    },
  };
}
