/**
 * Hawk signatures over every character a path parameter may hold, signed by the unmodified
 * client: its Hawk header and its bewit URLs (buildSignedUrl) cover the path as Node's legacy URL
 * parser escapes it, while the request goes out as WHATWG parsing leaves it (`'` differs).
 */
import { startTestService, TestService, slugid } from '../helpers/service';
import { runningTask } from '../helpers/work';
import { signedForms } from '../../shared/auth/authenticate';

let svc: TestService;
let index: any;
beforeAll(async () => {
  svc = await startTestService();
  index = new svc.tc.Index({ rootUrl: svc.rootUrl, credentials: svc.root, retries: 0 });
});
afterAll(async () => svc?.close());

const inAnHour = () => new Date(Date.now() + 3600_000).toJSON();
/** Every printable ASCII character. */
const PRINTABLE = Array.from({ length: 0x7f - 0x20 }, (_, i) => String.fromCharCode(0x20 + i));
/** What a namespace word may hold besides letters and digits (shared/index/index.ts). */
const NAMESPACE_EXTRA = [..."_!~*'()%-"];

test('signedForms: the resource as sent, and as percent-encoded by the legacy parser', () => {
  expect(signedForms('/api/index/v1/task/a.b')).toEqual(['/api/index/v1/task/a.b']);
  expect(signedForms("/api/index/v1/task/a.it's?x='")).toEqual(["/api/index/v1/task/a.it's?x='", '/api/index/v1/task/a.it%27s?x=%27']);
});

test.each(NAMESPACE_EXTRA)('an index namespace with %s: insertTask and findTask signed by the client', async (c) => {
  const ns = `hawk${Math.random().toString(36).slice(2, 8)}.a${c}b`;
  const taskId = slugid();
  await index.insertTask(ns, { taskId, rank: 1, data: {}, expires: inAnHour() });
  expect((await index.findTask(ns)).taskId).toBe(taskId);
});

test("every printable character in an artifact name: the run's createArtifact, artifactInfo, and a bewit URL", async () => {
  const { taskId, wq } = await runningTask(svc);
  const expires = inAnHour();
  const queue = svc.queue();
  const refused: string[] = [];
  for (const c of PRINTABLE) {
    const name = `public/x${c}y`;
    try {
      await wq.createArtifact(taskId, 0, name, { storageType: 'reference', url: 'https://example.com/', expires, contentType: 'text/plain' });
      expect((await queue.artifactInfo(taskId, 0, name)).name).toBe(name);
      const signed = queue.buildSignedUrl(queue.artifactInfo, taskId, 0, name, { expiration: 600 });
      const res = await fetch(signed);
      expect(res.status).toBe(200);
      expect((await res.json()).name).toBe(name);
    } catch (e) {
      refused.push(`${JSON.stringify(c)}: ${(e as Error).message.split('\n')[0]}`);
    }
  }
  expect(refused).toEqual([]);
});
