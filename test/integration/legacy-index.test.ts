/**
 * Rows that older versions wrote to the deployment-wide `Indexes latest` and `Indexes resolved`
 * partitions are read by nothing: the reaper deletes them, a bounded share per pass, and once they
 * are gone its passes make no call for them.
 */
import { startTestService, TestService } from '../helpers/service';
import { runReaper } from '../../shared/reaper/reaper';
import { LEGACY_INDEX_PARTITIONS, LEGACY_ROWS_PER_PASS } from '../../shared/ops/legacy-index';
import { MAX_TRANSACTION_ACTIONS } from '../../shared/storage/storage';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => svc?.close());

const indexes = () => svc.services.storage.table('Indexes');

async function rowsIn(pk: string): Promise<number> {
  let n = 0;
  let continuation: string | undefined;
  do {
    const page = await indexes().page({ partitionKey: pk, select: ['RowKey'] }, 1000, continuation);
    n += page.items.length;
    continuation = page.continuation;
  } while (continuation);
  return n;
}

test('legacy index rows are deleted by the reaper, a bounded share per pass, then cost nothing', async () => {
  // More rows than one pass deletes in 'latest', a few in 'resolved'.
  const counts: Record<string, number> = { latest: LEGACY_ROWS_PER_PASS + 150, resolved: 30 };
  for (const pk of LEGACY_INDEX_PARTITIONS) {
    const rows = Array.from({ length: counts[pk] }, (_, i) => ({ partitionKey: pk, rowKey: `n~old~${String(i).padStart(6, '0')}`, taskId: `t${i}` }));
    for (let i = 0; i < rows.length; i += MAX_TRANSACTION_ACTIONS) {
      await indexes().transact(rows.slice(i, i + MAX_TRANSACTION_ACTIONS).map((entity) => ({ op: 'upsert' as const, entity })));
    }
  }
  // A process starting on this deployment finds them (the test service started before they existed).
  await svc.services.legacyIndex.start();
  await runReaper(svc.services);
  expect(await rowsIn('latest')).toBe(150);
  expect(await rowsIn('resolved')).toBe(30);
  for (let pass = 0; pass < 4; pass++) await runReaper(svc.services);
  expect(await rowsIn('latest')).toBe(0);
  expect(await rowsIn('resolved')).toBe(0);
  // Nothing left: a pass reads and deletes nothing in the Indexes table (its one Indexes call is the
  // health stamp's upsert, as in every pass).
  const meter = svc.services.storage.meter;
  const before = meter.snapshot().byOp;
  await runReaper(svc.services);
  const after = meter.snapshot().byOp;
  const used = (op: string) => (after[op] ?? 0) - (before[op] ?? 0);
  expect({ query: used('Indexes.query'), transaction: used('Indexes.transaction'), delete: used('Indexes.delete') }).toEqual({
    query: 0,
    transaction: 0,
    delete: 0,
  });
}, 60_000);
