/**
 * The health check (`__heartbeat__`): 200 while storage answers and the reaper has run recently;
 * 500 with the reason otherwise. And the dashboard page is served.
 */
import crypto from 'node:crypto';
import { startTestService, TestService, expectError } from '../helpers/service';
import { checkHealth } from '../../shared/ops/health';
import { createStorage } from '../../shared/storage/storage';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ QUEUE_REAPER_STALE_S: '60' });
});
afterAll(async () => svc?.close());

const reaperRow = () => svc.services.storage.table('Indexes');

test('healthy after a reaper pass; 500 naming the reaper once its last pass is too old', async () => {
  const anon = svc.queue(null);
  // Just started, no pass yet: still within the grace period.
  expect(await anon.heartbeat()).toMatchObject({ healthy: true, storage: 'ok' });
  await svc.runReaper();
  const h = await anon.heartbeat();
  expect(h).toMatchObject({ healthy: true, problems: [], storage: 'ok', reaper: { staleAfterS: 60, ageS: expect.any(Number), lastRun: expect.any(String) } });
  expect(h.reaper.ageS).toBeLessThan(10);

  await reaperRow().upsert({ partitionKey: 'reaper', rowKey: 'last-run', at: new Date(Date.now() - 120_000).toJSON() });
  const err = await expectError(anon.heartbeat(), 500);
  expect(err.message).toMatch(/reaper last finished a pass 1[12]\d s ago/);
  expect(err.body).toMatchObject({ healthy: false, storage: 'ok', reaper: { ageS: expect.any(Number) } });
  await svc.runReaper();
  expect((await anon.heartbeat()).healthy).toBe(true);
});

test('500 when storage fails', async () => {
  svc.services.storage.meter.failAfterCall(1);
  const err = await expectError(svc.queue(null).heartbeat(), 500);
  svc.services.storage.meter.disarm();
  expect(err.body).toMatchObject({ healthy: false, storage: 'unreachable' });
  expect(err.message).toMatch(/table storage is unreachable/);
});

test('unreachable storage (connection refused) is reported, not thrown', async () => {
  const dead = createStorage(
    'DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=' +
      crypto.randomBytes(32).toString('base64') +
      ';TableEndpoint=http://127.0.0.1:9/devstoreaccount1;QueueEndpoint=http://127.0.0.1:9/devstoreaccount1;BlobEndpoint=http://127.0.0.1:9/devstoreaccount1',
    'dead',
  );
  const h = await checkHealth({ ...svc.services, storage: dead });
  expect(h).toMatchObject({ healthy: false, storage: 'unreachable' });
}, 60_000);

test('a reaper that never ran is unhealthy once the grace period has passed', async () => {
  const fresh = await startTestService({ QUEUE_REAPER_STALE_S: '1' });
  try {
    await new Promise((r) => setTimeout(r, 1200));
    const err = await expectError(fresh.queue(null).heartbeat(), 500);
    expect(err.message).toMatch(/reaper has never finished a pass/);
  } finally {
    await fresh.close();
  }
});

test('the dashboard page is served as HTML with the public root URL filled in', async () => {
  const res = await fetch(`${svc.rootUrl}/api/dashboard`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/html/);
  const html = await res.text();
  expect(html).toContain(`var ROOT_URL = ${JSON.stringify(svc.rootUrl)};`);
  expect(html).not.toMatch(/__ROOT_URL__|\$\{/);
  expect(html).toContain('crypto.subtle.importKey');
});
