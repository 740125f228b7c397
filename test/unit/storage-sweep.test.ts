/**
 * A crash sweep counts the calls of the operation it runs, not those of work already running: an
 * instance's loops or an earlier request's lingering calls would otherwise move which call fails.
 */
import { StorageMeter, Sweep, invocationTally, newInvocation, InjectedFault } from '../../shared/storage/counter';

const call = (meter: StorageMeter, op: string) => meter.run(op, async () => op);

test('an armed meter fails the n-th call of the swept operation, whatever runs beside it', async () => {
  const meter = new StorageMeter();
  const earlier = newInvocation();
  meter.failAfterCall(2);
  // A loop with no invocation, and a request that started before the sweep was armed.
  await call(meter, 'loop.get');
  await invocationTally.run(earlier, () => call(meter, 'earlier.get'));
  const swept = Sweep.run(async () => {
    await call(meter, 'Tasks.get');
    await call(meter, 'Tasks.transaction');
  });
  await expect(swept).rejects.toEqual(new InjectedFault(2, 'Tasks.transaction'));
  expect(meter.armedOps).toEqual(['Tasks.get', 'Tasks.transaction']);
  // Every call is still counted for billing.
  expect(meter.total).toBe(4);
});

test('a request started while the sweep is armed counts as part of the operation', async () => {
  const meter = new StorageMeter();
  meter.startCounting();
  await invocationTally.run(newInvocation(), () => call(meter, 'pending.put'));
  await call(meter, 'loop.get');
  expect(meter.disarm()).toBe(1);
  expect(meter.armedOps).toEqual(['pending.put']);
});
