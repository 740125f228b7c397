/**
 * The bench's cost model (bench/cost.ts): known measurements and prices give known dollars.
 */
import { costPerMillionLifecycles, idleWorkerMonth, txKind } from '../../bench/cost';
import { AZURE_PRICES, SECONDS_PER_MONTH } from '../../bench/prices';

const prices = {
  ...AZURE_PRICES,
  tableTxPer10k: 0.001,
  queueOpPer10k: 0.01,
  blobWritePer10k: 0.1,
  blobReadPer10k: 0.02,
  flexPerGbS: 0.00002,
  flexPerMillionExecutions: 0.5,
  flexInstanceMb: 2048,
};

test('storage ops are billed by kind: table names, the artifact container (writes and reads), queues', () => {
  expect(['Tasks.insert', 'Subscriptions.query', 'artifacts.commit', 'artifacts.download', 'claim.put', 'pending.get', 'events.delete'].map(txKind)).toEqual([
    'table',
    'table',
    'blobWrite',
    'blobRead',
    'queue',
    'queue',
    'queue',
  ]);
});

test('a million lifecycles: storage by kind, Flex GB-s from the CPU time, one execution per request', () => {
  const c = costPerMillionLifecycles(
    {
      opsPerLifecycle: { 'Tasks.insert': 4, 'TaskQueues.get': 3, 'claim.put': 2, 'pending.get': 3, 'artifacts.putBlock': 0.5, 'artifacts.exists': 0.5 },
      cpuMsPerLifecycle: 10,
      requestsPerLifecycle: 3,
    },
    prices,
  );
  expect(c.txPerLifecycle).toEqual({ table: 7, queue: 5, blobWrite: 0.5, blobRead: 0.5 });
  // 7 M table tx at $0.001/10k = $0.70; 5 M queue ops at $0.01/10k = $5; 0.5 M blob writes $5, reads $1.
  expect(c.storage.table).toBeCloseTo(0.7, 10);
  expect(c.storage.queue).toBeCloseTo(5, 10);
  expect(c.storage.blobWrite).toBeCloseTo(5, 10);
  expect(c.storage.blobRead).toBeCloseTo(1, 10);
  // 2 GB × 10 ms × 1 M = 20,000 GB-s at $0.00002 = $0.40; 3 M executions at $0.50/M = $1.50.
  expect(c.gbS).toBeCloseTo(20_000, 6);
  expect(c.compute).toBeCloseTo(0.4, 10);
  expect(c.executions).toBeCloseTo(1.5, 10);
  expect(c.total).toBeCloseTo(0.7 + 5 + 5 + 1 + 0.4 + 1.5, 10);
});

test('idle workers: claimWork pays its measured polls, one execution per long poll and the instance it keeps executing; poll URLs only queue GETs', () => {
  const cw = idleWorkerMonth({ mode: 'claimWork', opsPerWorkerS: { 'pending.get': 0.2 }, pollS: 20 }, prices);
  // 0.2 ops/s × 2,628,000 s = 525,600 queue ops at $0.01/10k = $0.5256.
  expect(SECONDS_PER_MONTH).toBe(2_628_000);
  expect(cw.storagePerWorker).toBeCloseTo(0.5256, 10);
  expect(cw.executionsPerWorker).toBe(131_400);
  expect(cw.executionDollarsPerWorker).toBeCloseTo(0.0657, 10);
  // 2 GB × 2,628,000 s × $0.00002.
  expect(cw.instancePerMonth).toBeCloseTo(105.12, 10);

  const urls = idleWorkerMonth({ mode: 'pollUrls', queues: 2, passS: 1 }, prices);
  // 2 GETs/s × 2,628,000 s = 5,256,000 ops at $0.01/10k = $5.256.
  expect(urls).toEqual({ storagePerWorker: expect.closeTo(5.256, 10), executionsPerWorker: 0, executionDollarsPerWorker: 0, instancePerMonth: 0 });
});
