/**
 * `npm start`'s human log: which events get a line, how a line reads, and the status line drawn
 * in place on a terminal only.
 */
import { humanLogger, terminalSink } from '../../shared/local/human-log';

const at = () => new Date('2026-11-27T12:34:56Z');

function sink() {
  const s = { lines: [] as string[], last: '', line: (t: string) => void s.lines.push(t), status: (t: string) => void (s.last = t) };
  return s;
}

test('warnings and errors are a line each, the error last; requests and reaper passes only count', () => {
  const out = sink();
  const log = humanLogger(out, at);
  log.request({ fn: 'status', method: 'GET', status: 200, ms: 3, storageCalls: 1 });
  log.info('reaper-pass', { deadline: 0, claim: 0, resolved: 0, events: 0, expired: 0, rehinted: 0, deferred: 0, failed: 0, transitions: 0, ms: 4 });
  log.warn('index-write-failed', { error: 'boom', taskId: 'T' });
  log.error('claim-failed', { taskId: 'T', runId: 0, error: 'gone' });
  log.request({ fn: 'createTask', method: 'PUT', status: 500, ms: 9, storageCalls: 2 });
  expect(out.lines).toEqual([
    '12:34:56 warn  index-write-failed taskId=T error: boom',
    '12:34:56 error claim-failed taskId=T runId=0 error: gone',
    '12:34:56 error PUT createTask answered 500 (9 ms)',
  ]);
  expect(out.last).toBe('2 requests · 0 transitions · 1 warnings · 1 errors · reaper 12:34:56');
});

test('a transition reads as the run state change, its reason and worker', () => {
  const out = sink();
  humanLogger(out, at).info('task-transition', {
    taskId: 'T',
    taskQueueId: 'p/w',
    transition: 'resolved',
    seq: 3,
    time: '',
    runId: 1,
    from: 'running',
    to: 'failed',
    reason: 'failed',
    workerGroup: 'g',
    workerId: 'w',
  });
  expect(out.lines).toEqual(['12:34:56 info  task T run 1: running → failed (resolved: failed by g/w) p/w']);
});

/** A stand-in for process.stdout. */
function stream(isTTY: boolean) {
  const written: string[] = [];
  return { written, out: { isTTY, columns: 20, write: (s: string) => written.push(s) > 0 } as unknown as NodeJS.WriteStream };
}

test('on a terminal the status line is redrawn under each new line (and cut to its width); elsewhere it is left out', () => {
  const tty = stream(true);
  const t = terminalSink(tty.out);
  t.status('status that is longer than the terminal');
  t.line('hello');
  expect(tty.written).toEqual(['\r\x1b[Kstatus that is long', '\r\x1b[Khello\nstatus that is long']);

  const pipe = stream(false);
  const p = terminalSink(pipe.out);
  p.status('status');
  p.line('hello');
  expect(pipe.written).toEqual(['hello\n']);
});
