/**
 * The health check (`__heartbeat__`): 200 while storage answers and the reaper has run recently;
 * 500 with the reason otherwise. And the dashboard's static files are served.
 */
import crypto from 'node:crypto';
import { startTestService, TestService, expectError } from '../helpers/service';
import { checkHealth } from '../../shared/ops/health';
import { passTime } from '../helpers/work';
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

test('every service answers its load-balancer check and its heartbeat, through its own client', async () => {
  await svc.runReaper();
  const opts = { rootUrl: svc.rootUrl };
  const clients = {
    queue: new svc.tc.Queue(opts),
    auth: new svc.tc.Auth(opts),
    index: new svc.tc.Index(opts),
    hooks: new svc.tc.Hooks(opts),
    object: new svc.tc.Object(opts),
    secrets: new svc.tc.Secrets(opts),
  };
  for (const [name, c] of Object.entries(clients)) {
    expect([name, await c.lbheartbeat()]).toEqual([name, {}]);
    expect([name, await c.heartbeat()]).toEqual([name, expect.objectContaining({ healthy: true, storage: 'ok' })]);
  }
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
    await passTime(1200);
    const err = await expectError(fresh.queue(null).heartbeat(), 500);
    expect(err.message).toMatch(/reaper has never finished a pass/);
  } finally {
    await fresh.close();
  }
});

test('the dashboard is served as static files with their content types, and its config names the public root URL', async () => {
  const get = async (file: string) => {
    const res = await fetch(`${svc.rootUrl}/api/dashboard${file}`);
    return { status: res.status, type: res.headers.get('content-type'), csp: res.headers.get('content-security-policy'), text: await res.text() };
  };
  const page = await get('');
  expect(page).toMatchObject({ status: 200, type: expect.stringMatching(/^text\/html/), csp: expect.stringContaining("default-src 'self'") });
  expect(page.csp).not.toContain('unsafe-inline');
  expect(page.text).toContain('<script src="/api/dashboard/dashboard.js"');
  expect(page.text).toContain('<link rel="stylesheet" href="/api/dashboard/dashboard.css">');
  const script = await get('/dashboard.js');
  expect(script).toMatchObject({ status: 200, type: expect.stringMatching(/^text\/javascript/) });
  expect(script.text).toContain('crypto.subtle.importKey');
  expect(await get('/dashboard.css')).toMatchObject({ status: 200, type: expect.stringMatching(/^text\/css/) });
  const config = await get('/config.json');
  expect(config.type).toMatch(/^application\/json/);
  expect(JSON.parse(config.text)).toEqual({ rootUrl: svc.rootUrl });
  for (const missing of ['/nope.js', '/..%2Fdashboard.ts', '/index.html.map']) {
    const res = await get(missing);
    expect(res.status).toBe(404);
    expect(JSON.parse(res.text).code).toBe('ResourceNotFound');
  }
});
