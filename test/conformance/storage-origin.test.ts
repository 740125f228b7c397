/**
 * On the in-memory store the local host serves the blob and queue endpoints too: from an origin of
 * their own, never the app's (where the dashboard keeps the signed-in user's credentials), as
 * Azure's blob endpoint is another origin.
 */
import { startTestService, TestService } from '../helpers/service';
import { runningTask } from '../helpers/work';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => svc?.close());

const inAnHour = () => new Date(Date.now() + 3600_000).toJSON();
const PAGE = '<script>document.title = sessionStorage.length</script>';

test("an HTML artifact is served from the storage origin only, never from the app's", async () => {
  const { taskId, wq } = await runningTask(svc);
  const res = await wq.createArtifact(taskId, 0, 'public/page.html', { storageType: 's3', contentType: 'text/html', expires: inAnHour() });
  expect(new URL(res.putUrl).origin).not.toBe(new URL(svc.rootUrl).origin);
  expect((await fetch(res.putUrl, { method: 'PUT', headers: { 'content-type': 'text/html' }, body: PAGE })).status).toBe(201);
  await wq.reportCompleted(taskId, 0);

  const signed = svc.queue().buildSignedUrl(svc.queue().getArtifact, taskId, 0, 'public/page.html');
  const redirect = await fetch(signed, { redirect: 'manual' });
  const location = redirect.headers.get('location')!;
  expect(new URL(location).origin).toBe(new URL(res.putUrl).origin);
  expect(await (await fetch(location)).text()).toBe(PAGE);

  // The same blob URL on the app's origin is no blob at all.
  const onApp = new URL(location);
  onApp.host = new URL(svc.rootUrl).host;
  const refused = await fetch(onApp);
  expect(refused.status).toBe(404);
  expect(await refused.text()).not.toContain('<script>');
});

test('the storage origin serves no API or dashboard: a page is sent to the app origin, a call refused', async () => {
  const { taskId, wq } = await runningTask(svc);
  const { putUrl } = await wq.createArtifact(taskId, 0, 'public/a.txt', { storageType: 's3', contentType: 'text/plain', expires: inAnHour() });
  const storageOrigin = new URL(putUrl).origin;
  const page = await fetch(`${storageOrigin}/api/dashboard`, { redirect: 'manual' });
  expect(page.status).toBe(302);
  expect(page.headers.get('location')).toBe(`${svc.rootUrl}/api/dashboard`);
  const call = await fetch(`${storageOrigin}/api/queue/v1/ping`, { method: 'POST' });
  expect(call.status).toBe(404);
});
