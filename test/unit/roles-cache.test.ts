/**
 * Role expansion reads the Roles table once per cache period per instance: requests that find the
 * cache missing or stale at the same moment (16 workers' claims, say) share that one read.
 */
import crypto from 'node:crypto';
import { MemoryStorage } from '../../shared/storage/memory';
import { ClientStore } from '../../shared/auth/clients';

async function setup() {
  const storage = new MemoryStorage('rc');
  await storage.ensureAll();
  const store = new ClientStore(storage, {
    rootClientId: 'root',
    rootAccessToken: 'r'.repeat(44),
    issuerClientId: 'issuer',
    encryptionKey: crypto.randomBytes(32),
  });
  const queries = () => storage.meter.byOp.get('Roles.query') ?? 0;
  return { store, queries };
}

test('16 expansions that find no cached roles read the Roles table once', async () => {
  const { store, queries } = await setup();
  await store.putRole('worker-pool:p/w', '', ['queue:claim-work:p/w'], 'create');
  const before = queries();
  const expanded = await Promise.all(Array.from({ length: 16 }, () => store.expand(['assume:worker-pool:p/w'])));
  expect(queries() - before).toBe(1);
  for (const e of expanded) expect(e).toContain('queue:claim-work:p/w');
});

test('a role changed while a read is under way is seen by the next expansion', async () => {
  const { store } = await setup();
  const inFlight = store.expand(['assume:late']);
  await store.putRole('late', '', ['queue:late'], 'create');
  await inFlight;
  expect(await store.expand(['assume:late'])).toContain('queue:late');
});
