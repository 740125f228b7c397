/**
 * Bad input gets a 4xx that says why, never a 5xx: continuation tokens of the wrong shape, deeply
 * nested bodies, an invalid Host header, and values the schemas let through but no reader could
 * use (non-http reference URLs, uploads larger than one PUT carries, clients that expired already).
 */
import http from 'node:http';
import Hawk from 'hawk';
import { startTestService, TestService, taskDef, expectError } from '../helpers/service';
import { uniqueQueue, claimOne } from '../helpers/work';

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
/** Tokens of every wrong shape: JSON that is not what the listing wrote, Azure-looking tokens, garbage. */
const BAD_TOKENS = [
  b64({}),
  b64(-5),
  b64(1.5),
  b64({ c: 7 }),
  b64({ nextPartitionKey: 5 }),
  b64('x'),
  Buffer.from('{}').toString('base64'),
  'not base64 !!',
  '%%',
];

function raw(port: number, method: string, path: string, headers: Record<string, string>, body?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    // The app's origin (on the in-memory store, 127.0.0.1 is its storage's: shared/storage/memory.ts storageOriginFor).
    const req = http.request({ host: '127.0.0.1', port, method, path, headers: { host: `localhost:${port}`, ...headers } }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

describe('bad input', () => {
  let svc: TestService;
  let taskId: string;
  let taskQueueId: string;
  let runId: number;

  beforeAll(async () => {
    svc = await startTestService();
    taskQueueId = uniqueQueue();
    taskId = svc.tc.slugid();
    await svc.queue().createTask(taskId, taskDef(taskQueueId));
    runId = (await claimOne(svc, taskQueueId, taskId)).runId;
  });
  afterAll(() => svc?.close());

  it('a continuation token of the wrong shape is a 400 on every listing', async () => {
    const q = svc.queue();
    const auth = svc.auth();
    const [prov, wt] = taskQueueId.split('/');
    const listings: [string, (token: string) => Promise<unknown>][] = [
      ['listClients', (t) => auth.listClients({ continuationToken: t })],
      ['listWorkers', (t) => q.listWorkers(prov, wt, { continuationToken: t })],
      ['listArtifacts', (t) => q.listArtifacts(taskId, runId, { continuationToken: t })],
      ['listLatestArtifacts', (t) => q.listLatestArtifacts(taskId, { continuationToken: t })],
      ['listTaskGroup', (t) => q.listTaskGroup(taskId, { continuationToken: t })],
      ['listDependentTasks', (t) => q.listDependentTasks(taskId, { continuationToken: t })],
      ['tasks', (t) => q.tasks({ taskIds: [taskId] }, { continuationToken: t })],
      ['statuses', (t) => q.statuses({ taskIds: [taskId] }, { continuationToken: t })],
      ['listProvisioners', (t) => q.listProvisioners({ continuationToken: t })],
      ['listWorkerTypes', (t) => q.listWorkerTypes(prov, { continuationToken: t })],
      ['listTaskQueues', (t) => q.listTaskQueues({ continuationToken: t })],
    ];
    const answers: string[] = [];
    for (const [name, call] of listings) {
      for (const token of BAD_TOKENS) {
        try {
          await call(token);
          answers.push(`${name} ${token}: 200`);
        } catch (err: any) {
          if (err.statusCode !== 400) answers.push(`${name} ${token}: ${err.statusCode} ${err.code}`);
        }
      }
    }
    // Listings that page in memory by a plain key may accept an unknown key as "after that key".
    expect(answers.filter((a) => !/^list(Provisioners|WorkerTypes|TaskQueues) .*: 200$/.test(a))).toEqual([]);
  });

  it('a deeply nested body is a 400 before anything else, and the service is fine afterwards', async () => {
    const path = `/api/queue/v1/task/${svc.tc.slugid()}`;
    const headers = {
      'content-type': 'application/json',
      authorization: Hawk.client.header(`${svc.rootUrl}${path}`, 'PUT', {
        credentials: { id: svc.root.clientId, key: svc.root.accessToken, algorithm: 'sha256' },
      }).header,
    };
    const res = await raw(svc.host.port, 'PUT', path, headers, '['.repeat(50_000) + ']'.repeat(50_000));
    expect(res.status).toBe(400);
    const body = JSON.parse(res.body);
    expect(body.code).toBe('MalformedPayload');
    expect(body.message).toMatch(/nests deeper than 100 levels/);
    expect((await svc.queue().ping()).alive).toBe(true);
  });

  it('a body above 10 MB is a 413', async () => {
    const path = `/api/queue/v1/task/${svc.tc.slugid()}`;
    const res = await raw(svc.host.port, 'PUT', path, { 'content-type': 'application/json' }, `{"a":"${'x'.repeat(11 * 1024 * 1024)}"}`);
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body).code).toBe('InputTooLarge');
  });

  it('an invalid Host header is a 400 with the error shape', async () => {
    const res = await raw(svc.host.port, 'GET', '/api/queue/v1/ping', { host: 'exa mple.com:99999' });
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body).code).toBe('InvalidRequestArguments');
  });

  it('a reference artifact must point at an http(s) URL', async () => {
    const q = svc.queue();
    const expires = new Date(Date.now() + 3600_000).toJSON();
    for (const url of ['javascript:alert(1)', 'data:text/html,<script>alert(1)</script>', 'file:///etc/passwd', 'ftp://example.com/x']) {
      // Some of these already fail the schema's `uri` format (InputValidationError); none is stored.
      const err = await expectError(q.createArtifact(taskId, runId, 'public/ref', { storageType: 'reference', expires, contentType: 'text/plain', url }), 400);
      if (err.code === 'InputError') expect(err.message).toMatch(/http or https URL/);
    }
    await expectError(q.getArtifact(taskId, runId, 'public/ref'), 404);
    await q.createArtifact(taskId, runId, 'public/ref', { storageType: 'reference', expires, contentType: 'text/plain', url: 'https://example.com/x' });
  });

  it('an s3 artifact larger than one PUT can carry is refused up front', async () => {
    const expires = new Date(Date.now() + 3600_000).toJSON();
    const err = await expectError(
      svc.queue().createArtifact(taskId, runId, 'public/huge', { storageType: 's3', expires, contentType: 'text/plain', contentLength: 5 * 1024 ** 3 }),
      400,
      'InputError',
    );
    expect(err.message).toMatch(/larger than one upload can carry/);
  });

  it('createClient with an expiry in the past is a 400', async () => {
    const err = await expectError(
      svc.auth().createClient('bad-input/expired', { description: 'x', expires: new Date(Date.now() - 60_000).toJSON(), scopes: [] }),
      400,
      'InputError',
    );
    expect(err.message).toMatch(/in the past/);
    await expectError(svc.auth().client('bad-input/expired'), 404);
  });
});
