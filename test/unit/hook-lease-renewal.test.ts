/**
 * While a scheduled fire runs, its claim's lease is renewed every third of the lease (so a slow
 * fire keeps its tick, and a crashed one loses it within the lease); renewing stops with the fire
 * or once the hook changed under it.
 */
import { renewLease } from '../../shared/hooks/schedule';
import type { HookStore, HookRecord } from '../../shared/hooks/store';
import type { HookDeps } from '../../shared/hooks/hooks';

const LEASE_S = 9;

function setup(failOn = Infinity) {
  let now = Date.parse('2026-01-01T00:00:00.000Z');
  const writes: string[] = [];
  const store = {
    replace: async (h: HookRecord) => {
      if (writes.length + 1 >= failOn) return false; // the hook changed: its ETag no longer matches
      writes.push(h.pendingFire!.leaseUntil);
      return true;
    },
  } as unknown as HookStore;
  const d = { now: () => new Date(now), tuning: { hookLeaseS: LEASE_S } } as unknown as HookDeps;
  const claimed = { pendingFire: { taskId: 't', scheduled: 's', time: 's', leaseUntil: new Date(now + LEASE_S * 1000).toJSON() } } as HookRecord;
  return { d, store, claimed, writes, advance: (ms: number) => (now += ms) };
}

beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

test('the lease moves ahead of the clock every third of it while the fire runs, and stops with it', async () => {
  const { d, store, claimed, writes, advance } = setup();
  const renewal = renewLease(d, store, claimed);
  for (let i = 0; i < 5; i++) {
    advance(3000);
    await jest.advanceTimersByTimeAsync(3000);
  }
  expect(writes).toHaveLength(5);
  expect(writes[4]).toBe(new Date(Date.parse('2026-01-01T00:00:15.000Z') + LEASE_S * 1000).toJSON());
  expect(claimed.pendingFire!.leaseUntil).toBe(writes[4]);
  await renewal.stop();
  await jest.advanceTimersByTimeAsync(30_000);
  expect(writes).toHaveLength(5);
});

test('a renewal that conflicts (the hook changed) stops renewing and keeps the last lease it wrote', async () => {
  const { d, store, claimed, writes } = setup(3);
  const renewal = renewLease(d, store, claimed);
  await jest.advanceTimersByTimeAsync(30_000);
  expect(writes).toHaveLength(2);
  expect(claimed.pendingFire!.leaseUntil).toBe(writes[1]);
  await renewal.stop();
});
