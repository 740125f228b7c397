import { Worker } from '../../worker/worker';
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
