/**
 * A run's live log ends with its run: the worker's append URL (createLiveLog, through a client
 * built by taskcluster-client's createClient from the served reference, as the reference worker
 * builds it) appends while the run runs and never after; it cannot create the log again or empty
 * it; readers get at most LIVE_LOG_MAX_BYTES.
 */
import { startTestService, TestService } from '../helpers/service';
import { runningTask } from '../helpers/work';
import { LIVE_LOG_MAX_BYTES } from '../../shared/artifacts/live-log';

let svc: TestService;
let Ext: any;
let Ops: any;
const reference = async (name: string) => (await fetch(`${svc.rootUrl}/api/references/${name}/v1/api.json`)).json();
beforeAll(async () => {
  svc = await startTestService();
  const ref = await reference('queue');
  Ext = svc.tc.createClient({ ...ref, entries: ref.entries.filter((e: any) => e.name === 'createLiveLog') }, 'queue');
  Ops = svc.tc.createClient(await reference('queue-ops'), 'queue');
});
afterAll(async () => svc?.close());

const append = (url: string, text: string) => fetch(url.replace('?', '?comp=appendblock&'), { method: 'PUT', body: text });
const readAll = async (taskId: string) => (await new Ops({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 }).liveLog(taskId, 0)).text;

test('appends land while the run runs and are refused once it resolved', async () => {
  const { taskId, wq, c } = await runningTask(svc);
  const ext = new Ext({ rootUrl: svc.rootUrl, credentials: c.credentials, retries: 0 });
  const { url, maxBytes } = await ext.createLiveLog(taskId, 0);
  expect(maxBytes).toBe(LIVE_LOG_MAX_BYTES);
  expect((await append(url, 'step 1\n')).status).toBe(201);
  // A second createLiveLog (a worker's retry) hands out a URL to the same log.
  const again = await ext.createLiveLog(taskId, 0);
  expect((await append(again.url, 'step 2\n')).status).toBe(201);
  expect(await readAll(taskId)).toBe('step 1\nstep 2\n');

  await wq.reportCompleted(taskId, 0);
  expect((await append(url, 'after the end\n')).status).toBe(412);
  expect(await readAll(taskId)).toBe('step 1\nstep 2\n');
  await expect(ext.createLiveLog(taskId, 0)).rejects.toMatchObject({ statusCode: 409 });
});

test('the append URL can neither create the log again nor empty it', async () => {
  const { taskId, c } = await runningTask(svc);
  const { url } = await new Ext({ rootUrl: svc.rootUrl, credentials: c.credentials, retries: 0 }).createLiveLog(taskId, 0);
  expect((await append(url, 'kept\n')).status).toBe(201);
  const recreate = await fetch(url, { method: 'PUT', headers: { 'x-ms-blob-type': 'AppendBlob' }, body: '' });
  expect(recreate.status).toBe(403);
  expect(await readAll(taskId)).toBe('kept\n');
});

test('a log written past the cap (a worker ignoring maxBytes) is read up to the cap and sealed', async () => {
  const { taskId, c } = await runningTask(svc);
  const { url } = await new Ext({ rootUrl: svc.rootUrl, credentials: c.credentials, retries: 0 }).createLiveLog(taskId, 0);
  const block = 'x'.repeat(4 * 1024 * 1024);
  for (let i = 0; i < LIVE_LOG_MAX_BYTES / block.length; i++) expect((await append(url, block)).status).toBe(201);
  expect((await append(url, 'over\n')).status).toBe(201);
  const reader = new Ops({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
  const r = await reader.liveLog(taskId, 0, { offset: String(LIVE_LOG_MAX_BYTES - 3) });
  expect(r).toMatchObject({ text: 'xxx', next: LIVE_LOG_MAX_BYTES, size: LIVE_LOG_MAX_BYTES });
  expect((await reader.liveLog(taskId, 0, { offset: String(LIVE_LOG_MAX_BYTES) })).text).toBe('');
  expect((await append(url, 'more\n')).status).toBe(412);
});
