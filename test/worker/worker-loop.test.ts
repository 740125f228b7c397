import { Worker } from '../../worker/worker';
import { CredentialsRejected } from '../../worker/protocols/source';
import { memoryLog } from '../../worker/logger';
import type { Claim } from '../../worker/types';
import type { Outcome } from '../../worker/task-run';

const claim = (taskId: string): Claim => ({ status: { taskId }, runId: 0 }) as Claim;

function deferred<T>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

test('asks only for free slots, never runs more than `concurrency`, and stops at maxTasks', async () => {
  const asked: number[] = [];
  let next = 0;
  let running = 0;
  let peak = 0;
  const w = new Worker({
    concurrency: 2,
    maxTasks: 5,
    log: memoryLog(),
    source: {
      async claim(max) {
        asked.push(max);
        await new Promise((r) => setTimeout(r, 5));
        return Array.from({ length: max }, () => claim(`T${next++}`));
      },
    },
    runTask: async () => {
      running++;
      peak = Math.max(peak, running);
      await new Promise((r) => setTimeout(r, 20));
      running--;
      return { kind: 'completed' };
    },
  });
  await w.run();
  expect(peak).toBe(2);
  expect(w.outcomes.map((o) => o.taskId).sort()).toEqual(['T0', 'T1', 'T2', 'T3', 'T4']);
  expect(asked[0]).toBe(2);
  expect(asked.every((n) => n >= 1 && n <= 2)).toBe(true);
});

test('shutdown stops claiming, signals running tasks, and waits for them to report', async () => {
  const gate = deferred<Outcome>();
  const signals: AbortSignal[] = [];
  let claims = 0;
  const w = new Worker({
    concurrency: 1,
    log: memoryLog(),
    source: {
      async claim() {
        claims++;
        return claims === 1 ? [claim('T0')] : new Promise<Claim[]>(() => undefined);
      },
    },
    runTask: async (_c, shutdown) => {
      signals.push(shutdown);
      shutdown.addEventListener('abort', () => gate.resolve({ kind: 'exception', reason: 'worker-shutdown' }));
      return gate.promise;
    },
  });
  const done = w.run();
  await new Promise((r) => setTimeout(r, 20));
  expect(signals).toHaveLength(1);
  expect(signals[0].aborted).toBe(false);
  w.shutdown('SIGTERM');
  await done;
  expect(signals[0].aborted).toBe(true);
  expect(w.outcomes).toEqual([{ taskId: 'T0', runId: 0, outcome: { kind: 'exception', reason: 'worker-shutdown' } }]);
  expect(claims).toBe(1);
});

/** A source whose long poll waits until its signal aborts, recording every call. */
function pollingSource(first: Claim[]) {
  const calls: { signal: AbortSignal; ended: boolean }[] = [];
  return {
    calls,
    source: {
      claim(_max: number, signal: AbortSignal): Promise<Claim[]> {
        const call = { signal, ended: false };
        calls.push(call);
        if (calls.length === 1) return Promise.resolve(first).finally(() => (call.ended = true));
        return new Promise<Claim[]>((resolve) => signal.addEventListener('abort', () => resolve([]), { once: true })).finally(() => (call.ended = true));
      },
    },
  };
}

test('shutdown aborts the long poll in flight, claims nothing more, and stops tasks only after the poll ended', async () => {
  const { calls, source } = pollingSource([claim('T0')]);
  const stopped: boolean[] = [];
  const w = new Worker({
    concurrency: 2,
    log: memoryLog(),
    source,
    runTask: (_c, stop) =>
      new Promise((resolve) =>
        stop.addEventListener('abort', () => {
          // The poll must be over before the report makes a retry it could claim.
          stopped.push(calls.every((c) => c.ended));
          resolve({ kind: 'exception', reason: 'worker-shutdown' });
        }),
      ),
  });
  const done = w.run();
  while (calls.length < 2) await new Promise((r) => setImmediate(r));
  expect(calls[1].signal.aborted).toBe(false);
  w.shutdown('SIGINT');
  expect(calls[1].signal.aborted).toBe(true);
  await done;
  expect(calls).toHaveLength(2);
  expect(stopped).toEqual([true]);
  expect(w.outcomes).toEqual([{ taskId: 'T0', runId: 0, outcome: { kind: 'exception', reason: 'worker-shutdown' } }]);
});

test('idle: shutdown ends run() as soon as the aborted poll returns', async () => {
  const { calls, source } = pollingSource([]);
  const w = new Worker({ concurrency: 1, log: memoryLog(), source, runTask: async () => ({ kind: 'completed' }) });
  const done = w.run();
  while (calls.length < 2) await new Promise((r) => setImmediate(r));
  w.shutdown('SIGTERM');
  await done;
  expect(calls).toHaveLength(2);
  expect(w.outcomes).toEqual([]);
});

test('with a grace period, running tasks may finish; a second signal stops them at once', async () => {
  const timers: { ms: number; fn: () => void; cancelled: boolean }[] = [];
  const setTimer = (ms: number, fn: () => void) => {
    const t = { ms, fn, cancelled: false };
    timers.push(t);
    return () => void (t.cancelled = true);
  };
  const finish = deferred<Outcome>();
  const { source } = pollingSource([claim('T0'), claim('T1')]);
  const stops: AbortSignal[] = [];
  const w = new Worker({
    concurrency: 2,
    log: memoryLog(),
    source,
    shutdownGraceMs: 30_000,
    setTimer,
    runTask: (c, stop) => {
      stops.push(stop);
      if (c.status.taskId === 'T0') return finish.promise;
      return new Promise((resolve) => stop.addEventListener('abort', () => resolve({ kind: 'exception', reason: 'worker-shutdown' })));
    },
  });
  const done = w.run();
  while (stops.length < 2) await new Promise((r) => setImmediate(r));
  w.shutdown('SIGTERM');
  expect(timers.map((t) => t.ms)).toEqual([30_000]);
  finish.resolve({ kind: 'completed' });
  await new Promise((r) => setImmediate(r));
  expect(stops[0].aborted).toBe(false);
  w.shutdown('SIGTERM');
  await done;
  expect(timers[0].cancelled).toBe(true);
  expect(w.outcomes).toEqual([
    { taskId: 'T0', runId: 0, outcome: { kind: 'completed' } },
    { taskId: 'T1', runId: 0, outcome: { kind: 'exception', reason: 'worker-shutdown' } },
  ]);
});

test('a 401 from the source stops the worker, naming why', async () => {
  const w = new Worker({
    concurrency: 1,
    log: memoryLog(),
    source: {
      async claim() {
        throw new CredentialsRejected('Bad mac');
      },
    },
    runTask: async () => ({ kind: 'completed' }),
  });
  await w.run();
  expect(w.fatal?.message).toContain('401');
  expect(w.outcomes).toEqual([]);
});
