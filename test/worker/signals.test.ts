import { signalHandler, DUPLICATE_SIGNAL_MS } from '../../worker/signals';
import { memoryLog } from '../../worker/logger';

function fakeWorker(graceful: boolean) {
  const calls: string[] = [];
  const w = {
    stopping: false,
    stoppingTasks: false,
    shutdown(reason: string) {
      calls.push(reason);
      if (w.stopping) w.stoppingTasks = true;
      w.stopping = true;
      if (!graceful) w.stoppingTasks = true;
    },
  };
  return { w, calls };
}

test('one Ctrl-C delivered twice (terminal and npm) counts once: the worker is not killed', () => {
  let t = 0;
  const exits: number[] = [];
  const { w, calls } = fakeWorker(false);
  const on = signalHandler(
    w,
    memoryLog(),
    (c) => void exits.push(c),
    () => t,
  );
  on('SIGINT');
  t += 5;
  on('SIGINT');
  expect(calls).toEqual(['SIGINT']);
  expect(exits).toEqual([]);
  // A deliberate second Ctrl-C once tasks are stopping exits at once.
  t += DUPLICATE_SIGNAL_MS;
  on('SIGINT');
  expect(exits).toEqual([1]);
});

test('with a grace period: the second signal stops the tasks, the third exits', () => {
  let t = 0;
  const exits: number[] = [];
  const { w, calls } = fakeWorker(true);
  const on = signalHandler(
    w,
    memoryLog(),
    (c) => void exits.push(c),
    () => t,
  );
  on('SIGTERM');
  expect(w.stoppingTasks).toBe(false);
  t += 2 * DUPLICATE_SIGNAL_MS;
  on('SIGTERM');
  expect(calls).toEqual(['SIGTERM', 'SIGTERM']);
  expect(w.stoppingTasks).toBe(true);
  expect(exits).toEqual([]);
  t += 2 * DUPLICATE_SIGNAL_MS;
  on('SIGTERM');
  expect(exits).toEqual([1]);
});
