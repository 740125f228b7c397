/**
 * Entity-group transactions go through the TableClient's pipeline without the SDK's transaction
 * client (shared/storage/table-transactions.ts). What the SDK did for them must still happen, on
 * Azurite: a throttled attempt (503 ServerBusy) is retried after the SDK's back-off; a refused
 * action reaches the port as the conflict it stands for, and nothing of the transaction is
 * written; the ETags returned are the stored rows' ETags. A delete guarded by an ETag holds in both
 * adapters. Azure's limits on a transaction are the storage port's contract
 * (test/integration/storage-port.test.ts).
 */
import crypto from 'node:crypto';
import { AzureStorage } from '../../shared/storage/azure';
import { BusyProxy } from '../helpers/busy-proxy';
import { MemoryStorage } from '../../shared/storage/memory';
import { Storage, StorageConflict } from '../../shared/storage/port';

const proxy = new BusyProxy('TableEndpoint', (path) => path.endsWith('/$batch'), {
  contentType: 'application/json',
  body: JSON.stringify({ 'odata.error': { code: 'ServerBusy', message: { value: 'Operations per second is over the account limit.' } } }),
});
let azure: AzureStorage;
beforeAll(async () => {
  await proxy.start(process.env.TEST_STORAGE_CONNECTION!);
  azure = new AzureStorage(proxy.connectionString, 'tx' + crypto.randomBytes(4).toString('hex'));
  await azure.table('Tasks').create();
});
afterAll(() => proxy.close());

async function conflictOf(p: Promise<unknown>): Promise<StorageConflict> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(StorageConflict);
  return err as StorageConflict;
}

test('a throttled transaction is retried, and its ETags are the stored rows', async () => {
  const t = azure.table('Tasks');
  const old = await t.insert({ partitionKey: 'busy', rowKey: 'old', v: 1 });
  proxy.busy = 1;
  proxy.seen.length = 0;
  const etags = await t.transact([
    { op: 'create', entity: { partitionKey: 'busy', rowKey: 'a', v: 1 } },
    { op: 'update', entity: { partitionKey: 'busy', rowKey: 'old', v: 2 }, etag: old, mode: 'Merge' },
    { op: 'upsert', entity: { partitionKey: 'busy', rowKey: 'c', s: "it's" } },
  ]);
  expect(proxy.seen).toEqual(['POST $batch', 'POST $batch']);
  expect(etags).toEqual([(await t.get('busy', 'a'))!.etag, (await t.get('busy', 'old'))!.etag, (await t.get('busy', 'c'))!.etag]);
  expect(await t.get('busy', 'old')).toMatchObject({ v: 2 });
  expect(await t.get('busy', 'c')).toMatchObject({ s: "it's" });
  // The returned ETag guards the next write.
  await t.update({ partitionKey: 'busy', rowKey: 'a', v: 3 }, etags[0]!);
}, 30_000);

test('a conflicting insert, a stale If-Match and a delete of a missing row are the conflicts they stand for; nothing is written', async () => {
  const t = azure.table('Tasks');
  const etag = await t.insert({ partitionKey: 'c', rowKey: 'taken', v: 1 });
  const exists = await conflictOf(
    t.transact([
      { op: 'upsert', entity: { partitionKey: 'c', rowKey: 'new' } },
      { op: 'create', entity: { partitionKey: 'c', rowKey: 'taken' } },
    ]),
  );
  expect([exists.reason, exists.message]).toEqual(['exists', 'Tasks: entity exists (action 1)']);

  await t.merge({ partitionKey: 'c', rowKey: 'taken', v: 2 }, etag);
  const stale = await conflictOf(
    t.transact([
      { op: 'upsert', entity: { partitionKey: 'c', rowKey: 'new' } },
      { op: 'update', entity: { partitionKey: 'c', rowKey: 'taken', v: 3 }, etag },
    ]),
  );
  expect(stale.reason).toBe('etag');

  const missing = await conflictOf(
    t.transact([
      { op: 'upsert', entity: { partitionKey: 'c', rowKey: 'new' } },
      { op: 'delete', partitionKey: 'c', rowKey: 'never' },
    ]),
  );
  expect(missing.reason).toBe('missing');

  expect(await t.get('c', 'new')).toBeUndefined();
  expect(await t.get('c', 'taken')).toMatchObject({ v: 2 });
});

describe.each([
  ['azure', () => azure],
  ['memory', () => new MemoryStorage('txm' + crypto.randomBytes(4).toString('hex'))],
])('%s adapter', (_, storageOf: () => Storage) => {
  test('a delete in a transaction guarded by an ETag deletes nothing once the row changed', async () => {
    const s = storageOf();
    await s.table('Tasks').create();
    const t = s.table('Tasks');
    const first = await t.insert({ partitionKey: 'g', rowKey: 'meta', v: 1 });
    await t.insert({ partitionKey: 'g', rowKey: 'm1' });
    const now = await t.merge({ partitionKey: 'g', rowKey: 'meta', v: 2 }, first);
    const stale = await conflictOf(
      t.transact([
        { op: 'delete', partitionKey: 'g', rowKey: 'm1' },
        { op: 'delete', partitionKey: 'g', rowKey: 'meta', etag: first },
      ]),
    );
    expect(stale.reason).toBe('etag');
    expect(await t.get('g', 'm1')).toBeDefined();
    expect(await t.get('g', 'meta')).toMatchObject({ v: 2 });

    await t.transact([
      { op: 'delete', partitionKey: 'g', rowKey: 'm1' },
      { op: 'delete', partitionKey: 'g', rowKey: 'meta', etag: now },
    ]);
    expect(await t.get('g', 'meta')).toBeUndefined();
    expect(await t.get('g', 'm1')).toBeUndefined();
  });
});
