/**
 * Issue 16 item 6: a storage account that accepts connections and never answers must not hold a
 * request past the client's 30 s timeout. Each storage call has a deadline, so the request fails
 * fast with a 5xx (which clients retry), and the service works again once storage answers.
 */
import { startTestService, TestService, taskDef, slugid, expectError } from '../helpers/service';
import { HangProxy } from '../helpers/hang-proxy';
import { STORAGE_CALL_TIMEOUT_MS } from '../../shared/storage/azure';

/** taskcluster-client gives up on a request after 30 s. */
const CLIENT_TIMEOUT_MS = 30_000;

let proxy: HangProxy;
let svc: TestService;
beforeAll(async () => {
  proxy = await HangProxy.start(process.env.TEST_STORAGE_CONNECTION!);
  svc = await startTestService({ QUEUE_STORAGE_CONNECTION: proxy.connectionString });
});
afterAll(async () => {
  await svc?.close();
  await proxy?.close();
});

test('a hung storage account fails a request fast with a 5xx; it works again when storage answers', async () => {
  const q = svc.queue();
  const taskId = slugid();
  await q.createTask(taskId, taskDef('hang/wt'));
  expect(STORAGE_CALL_TIMEOUT_MS).toBeLessThan(CLIENT_TIMEOUT_MS / 2);

  proxy.hang();
  const started = Date.now();
  const err = await expectError(q.task(taskId), 500);
  const elapsed = Date.now() - started;
  expect(err.message).toMatch(/Internal Server Error/);
  expect(elapsed).toBeGreaterThanOrEqual(STORAGE_CALL_TIMEOUT_MS - 1000);
  expect(elapsed).toBeLessThan(CLIENT_TIMEOUT_MS / 2);

  proxy.resume();
  expect((await q.task(taskId)).metadata).toBeDefined();
  expect((await q.status(taskId)).status.state).toBe('pending');
}, 60_000);
