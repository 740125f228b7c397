/**
 * The local host runs a timer at the times its NCRONTAB schedule gives (shared/cron.ts), on a
 * fake clock with real I/O.
 */
import { startHost } from '../../shared/local/host';

test('the local host runs a timer at the times its schedule gives and refuses one it cannot run', async () => {
  // The host's timers run on a fake clock (real I/O), so the times are exact on a loaded machine too.
  jest.useFakeTimers({ now: new Date('2026-11-21T12:00:00.400Z'), doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
  const runs: string[] = [];
  const timer = { name: 'tick', schedule: '%TICK%', handler: async () => void runs.push(new Date().toISOString()) };
  const services = async () => {
    throw new Error('no services in this test');
  };
  const app = { routes: [], services, timers: [timer] };
  try {
    const host = await startHost({ app, runTimers: true, quiet: true, settings: { TICK: '*/2 * * * * *' } });
    try {
      await jest.advanceTimersByTimeAsync(5_000);
    } finally {
      await host.close();
    }
    await jest.advanceTimersByTimeAsync(5_000); // closed: no more runs
  } finally {
    jest.useRealTimers();
  }
  expect(runs).toEqual(['2026-11-21T12:00:02.000Z', '2026-11-21T12:00:04.000Z']);
  await expect(startHost({ app, runTimers: true, settings: { TICK: '* * * * *  * *' } })).rejects.toThrow(/^timer tick: .* is not an NCRONTAB schedule/);
  await expect(startHost({ app, runTimers: true, settings: {} })).rejects.toThrow(/TICK, which is not set/);
});
