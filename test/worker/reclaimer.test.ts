import { Reclaimer, reclaimDelayMs, RECLAIM_MARGIN_MS } from '../../worker/reclaimer';
import { memoryLog } from '../../worker/logger';

const at = (ms: number) => new Date(Date.now() + ms).toJSON();
const cred = (n: number) => ({ clientId: `c${n}`, accessToken: `t${n}` });

beforeEach(() => jest.useFakeTimers({ now: new Date('2030-01-01T00:00:00Z') }));
afterEach(() => jest.useRealTimers());

test('reclaims minutes before takenUntil, or half way for short claims', () => {
  const now = new Date('2030-01-01T00:00:00Z');
  const plus = (ms: number) => new Date(now.getTime() + ms);
  expect(RECLAIM_MARGIN_MS).toBe(180_000);
  expect(reclaimDelayMs(plus(20 * 60_000), now)).toBe(17 * 60_000);
  expect(reclaimDelayMs(plus(10_000), now)).toBe(5_000);
  expect(reclaimDelayMs(plus(-1), now)).toBe(0);
});

test('each reclaim uses the newest credentials and schedules the next one', async () => {
  const calls: string[] = [];
  let n = 1;
  const log = memoryLog();
  const lost = jest.fn();
  const r = new Reclaimer(
    {
      taskId: 't',
      runId: 0,
      log,
      onLost: lost,
      reclaim: async (c) => {
        calls.push(c.clientId);
        n++;
        return { takenUntil: at(10_000), credentials: cred(n) };
      },
    },
    { takenUntil: at(10_000), credentials: cred(1) },
  );
  r.start();
  await jest.advanceTimersByTimeAsync(4_999);
  expect(calls).toEqual([]);
  await jest.advanceTimersByTimeAsync(1);
  expect(calls).toEqual(['c1']);
  expect(r.current.credentials).toEqual(cred(2));
  await jest.advanceTimersByTimeAsync(5_000);
  expect(calls).toEqual(['c1', 'c2']);
  r.stop();
  await jest.advanceTimersByTimeAsync(60_000);
  expect(calls).toHaveLength(2);
  expect(lost).not.toHaveBeenCalled();
});

test('a 409 means the run is gone: onLost once, no more reclaims', async () => {
  const reclaim = jest.fn(async () => {
    throw Object.assign(new Error('run is exception'), { statusCode: 409 });
  });
  const lost = jest.fn();
  const r = new Reclaimer({ taskId: 't', runId: 0, log: memoryLog(), onLost: lost, reclaim }, { takenUntil: at(10_000), credentials: cred(1) });
  r.start();
  await jest.advanceTimersByTimeAsync(60_000);
  expect(reclaim).toHaveBeenCalledTimes(1);
  expect(lost).toHaveBeenCalledWith('conflict');
  expect(lost).toHaveBeenCalledTimes(1);
});

test('other failures are retried until takenUntil passes, then the claim is lost', async () => {
  const reclaim = jest.fn(async () => {
    throw Object.assign(new Error('Internal Server Error'), { statusCode: 500 });
  });
  const lost = jest.fn();
  const log = memoryLog();
  const r = new Reclaimer({ taskId: 't', runId: 0, log, onLost: lost, reclaim }, { takenUntil: at(10_000), credentials: cred(1) });
  r.start();
  await jest.advanceTimersByTimeAsync(9_000);
  expect(reclaim.mock.calls.length).toBeGreaterThan(1);
  expect(lost).not.toHaveBeenCalled();
  await jest.advanceTimersByTimeAsync(2_000);
  expect(lost).toHaveBeenCalledWith('claim-expired');
  expect(log.events.filter((e) => e.event === 'reclaim-failed').length).toBe(reclaim.mock.calls.length);
});
