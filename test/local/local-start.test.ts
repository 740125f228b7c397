/**
 * `npm start`'s start-up mistakes, each with the message a user sees, and the embedded Azurite
 * stopped whatever failed. Storage is `memory:` or a stand-in Azurite; no real emulator is needed.
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { start, StartupError, ANONYMOUS_SCOPES } from '../../shared/local/main';
import { freePort, type Azurite } from '../../shared/local/azurite';
import { describeStorageError } from '../../shared/local/storage-errors';
import { taskDef, slugid } from '../helpers/service';

let root: string;
beforeEach(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'local-start-'));
});
afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

/** A stand-in for startAzurite: records its options and whether it was stopped. */
function fakeAzurite(connectionString: string, onStart?: () => Promise<void>) {
  const calls: { location?: string }[] = [];
  let stopped = 0;
  const startAzurite = async (o: { location?: string } = {}): Promise<Azurite> => {
    calls.push(o);
    await onStart?.();
    return { connectionString, ports: { blob: 1, queue: 2, table: 3 }, pid: 0, stop: async () => void stopped++ };
  };
  return { startAzurite, calls, stopped: () => stopped };
}

async function occupy(port: number): Promise<net.Server> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(port, '127.0.0.1', r));
  return srv;
}

const failure = async (p: Promise<unknown>): Promise<string> => {
  const err = await p.then(
    () => undefined,
    (e) => e,
  );
  expect(err).toBeInstanceOf(StartupError);
  return (err as Error).message;
};

test('a port in use is one line naming PORT, before Azurite is started', async () => {
  const port = await freePort();
  const taken = await occupy(port);
  try {
    const fake = fakeAzurite('memory:');
    const message = await failure(start({ env: { PORT: String(port) }, root, startAzurite: fake.startAzurite }));
    expect(message).toBe(`port ${port} on 127.0.0.1 is in use (another \`npm start\`?): stop it, or set PORT to a free port, e.g. PORT=${port + 1} npm start`);
    expect(fake.calls).toHaveLength(0);
  } finally {
    taken.close();
  }
});

test('a port taken while Azurite started: the same line, and the embedded Azurite is stopped', async () => {
  const port = await freePort();
  let taken: net.Server | undefined;
  const fake = fakeAzurite('memory:', async () => void (taken = await occupy(port)));
  try {
    const message = await failure(start({ env: { PORT: String(port) }, root, startAzurite: fake.startAzurite }));
    expect(message).toMatch(new RegExp(`^port ${port} on 127.0.0.1 is in use .* set PORT to a free port`));
    expect(fake.stopped()).toBe(1);
  } finally {
    taken?.close();
  }
});

test('an unusable embedded Azurite stops it, and says what was tried', async () => {
  const dead = await freePort();
  const conn = `DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:${dead}/devstoreaccount1;QueueEndpoint=http://127.0.0.1:${dead}/devstoreaccount1;TableEndpoint=http://127.0.0.1:${dead}/devstoreaccount1`;
  const fake = fakeAzurite(conn);
  const message = await failure(start({ env: { PORT: String(await freePort()) }, root, startAzurite: fake.startAzurite }));
  expect(message).toContain('the embedded Azurite (');
  expect(message).toContain(`nothing answered at POST http://127.0.0.1:${dead}/devstoreaccount1/Tables (ECONNREFUSED)`);
  expect(message).toContain('AccountKey=***');
  expect(message).not.toContain('a2V5');
  expect(fake.stopped()).toBe(1);
});

test('a QUEUE_STORAGE_CONNECTION that is not a connection string names the setting and the accepted shapes', async () => {
  const message = await failure(start({ env: { PORT: String(await freePort()), QUEUE_STORAGE_CONNECTION: 'garbage' }, root }));
  expect(message).toMatch(/^QUEUE_STORAGE_CONNECTION \(garbage\) is not a storage connection string: expected 'DefaultEndpointsProtocol=https;AccountName=/);
  expect(message).toContain("'UseDevelopmentStorage=true'");
});

test('a QUEUE_STORAGE_CONNECTION whose AccountKey is not base64 is one line naming the setting, before any storage call', async () => {
  const conn = 'DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=not-a-key!;EndpointSuffix=core.windows.net';
  const message = await failure(start({ env: { PORT: String(await freePort()), QUEUE_STORAGE_CONNECTION: conn }, root }));
  expect(message).toMatch(
    /^setting QUEUE_STORAGE_CONNECTION: its AccountKey \(10 characters\) is not base64, so it is not a storage account key; copy key1 or key2 whole/,
  );
  expect(message).not.toContain('not-a-key!');
});

test('QUEUE_STORAGE_CONNECTION pointing at nothing names the setting, the endpoint tried, and the way out', async () => {
  const dead = await freePort();
  const conn = `DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=c2VjcmV0;TableEndpoint=http://127.0.0.1:${dead}/devstoreaccount1;QueueEndpoint=http://127.0.0.1:${dead}/devstoreaccount1;BlobEndpoint=http://127.0.0.1:${dead}/devstoreaccount1`;
  const message = await failure(start({ env: { PORT: String(await freePort()), QUEUE_STORAGE_CONNECTION: conn }, root }));
  expect(message).toMatch(/^QUEUE_STORAGE_CONNECTION \(DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=\*\*\*;/);
  expect(message).toContain(`nothing answered at POST http://127.0.0.1:${dead}/devstoreaccount1/Tables (ECONNREFUSED)`);
  expect(message).toContain('Unset QUEUE_STORAGE_CONNECTION to let `npm start` run its own Azurite');
});

test('storage errors: an unknown host and a refused key say what to check', () => {
  const tried = { url: 'https://typo.table.core.windows.net/Tables?sv=secret', method: 'POST' };
  expect(describeStorageError({ name: 'RestError', code: 'ENOTFOUND', request: tried }, 'AccountName=typo;AccountKey=k')).toBe(
    'QUEUE_STORAGE_CONNECTION (AccountName=typo;AccountKey=***): the host of POST https://typo.table.core.windows.net/Tables was not found (ENOTFOUND). Check AccountName and EndpointSuffix.',
  );
  expect(describeStorageError({ name: 'RestError', statusCode: 403, code: 'AuthenticationFailed', request: tried }, 'AccountName=typo;AccountKey=k')).toContain(
    'refused POST https://typo.table.core.windows.net/Tables (403 AuthenticationFailed). Check AccountKey',
  );
  expect(describeStorageError(new Error('not storage'), 'x')).toBeUndefined();
});

test('a bad PORT, and --persist with QUEUE_STORAGE_CONNECTION, are named', async () => {
  expect(await failure(start({ env: { PORT: 'http' }, root }))).toBe("PORT must be a port number (0..65535), got 'http'");
  expect(await failure(start({ argv: ['--persist'], env: { PORT: String(await freePort()), QUEUE_STORAGE_CONNECTION: 'memory:' }, root }))).toContain(
    'QUEUE_STORAGE_CONNECTION is set, so none is started',
  );
  expect(await failure(start({ argv: ['--presist'], env: {}, root }))).toContain("Unknown option '--presist'");
});

test('--persist (or QUEUE_LOCAL_PERSIST) keeps Azurite data under .local/azurite', async () => {
  for (const [argv, env] of [
    [['--persist'], {}],
    [[], { QUEUE_LOCAL_PERSIST: 'true' }],
  ] as const) {
    const fake = fakeAzurite('memory:');
    const s = await start({ argv: [...argv], env: { PORT: String(await freePort()), ...env }, root, startAzurite: fake.startAzurite });
    await s.stop();
    expect(fake.calls).toEqual([{ location: path.join(root, '.local', 'azurite') }]);
  }
  const fake = fakeAzurite('memory:');
  const s = await start({ env: { PORT: String(await freePort()) }, root, startAzurite: fake.startAzurite });
  await s.stop();
  expect(fake.calls).toEqual([{}]);
});

test('the anonymous role lets anyone read public artifacts; QUEUE_LOCAL_ANONYMOUS_ROLE=false turns it off', async () => {
  const tc = (await import('taskcluster-client')).default;
  /** Status of an unauthenticated GET of a public artifact on a fresh `npm start`. */
  const publicArtifactStatus = async (settings: Record<string, string>) => {
    const env: NodeJS.ProcessEnv = { PORT: String(await freePort()), QUEUE_STORAGE_CONNECTION: 'memory:', ...settings };
    const s = await start({ env, root });
    try {
      const rootUrl = s.config.publicUrl;
      const queue = new tc.Queue({ rootUrl, credentials: { clientId: s.config.rootClientId, accessToken: s.config.rootAccessToken } });
      const taskId = slugid();
      await queue.createTask(taskId, taskDef('local/start'));
      await queue.claimWork('local/start', { workerGroup: 'g', workerId: 'w', tasks: 1 });
      const expires = new Date(Date.now() + 3600_000).toJSON();
      await queue.createArtifact(taskId, 0, 'public/x', { storageType: 'reference', url: 'https://example.com/x', expires, contentType: 'text/plain' });
      const res = await fetch(`${rootUrl}/api/queue/v1/task/${taskId}/runs/0/artifacts/public/x`, { redirect: 'manual' });
      return res.status;
    } finally {
      await s.stop();
    }
  };
  expect(ANONYMOUS_SCOPES).toEqual(['queue:get-artifact:public/*']);
  expect(await publicArtifactStatus({})).toBe(303);
  expect(await publicArtifactStatus({ QUEUE_LOCAL_ANONYMOUS_ROLE: 'false' })).toBe(403);
});

test('on memory:, the SAS URLs work over plain HTTP: downloadArtifact, and a v10 worker polling its queue', async () => {
  const tc = (await import('taskcluster-client')).default;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const tc10 = require('tc10');
  const s = await start({ env: { PORT: String(await freePort()), QUEUE_STORAGE_CONNECTION: 'memory:' }, root });
  try {
    const rootUrl = s.config.publicUrl;
    const credentials = { clientId: s.config.rootClientId, accessToken: s.config.rootAccessToken };
    const queue = new tc.Queue({ rootUrl, credentials });
    const worker = { workerGroup: 'g', workerId: 'w' };

    // An s3 artifact: the worker PUTs to the putUrl, downloadArtifact follows the redirect (got).
    const first = slugid();
    await queue.createTask(first, taskDef('local/sas'));
    const { tasks } = await queue.claimWork('local/sas', { ...worker, tasks: 1 });
    const wq = new tc.Queue({ rootUrl, credentials: tasks[0].credentials });
    const expires = new Date(Date.now() + 3600_000).toJSON();
    const { putUrl } = await wq.createArtifact(first, 0, 'public/hello.txt', { storageType: 's3', contentType: 'text/plain', expires });
    expect(putUrl.startsWith(`${rootUrl.replace('localhost', '127.0.0.1')}/memory-storage/`)).toBe(true);
    const put = await fetch(putUrl, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'hello over http' });
    expect(put.status).toBe(201);
    const got = await tc.downloadArtifact({ taskId: first, runId: 0, name: 'public/hello.txt', queue, streamFactory: collect });
    expect(got).toBe('text/plain');
    expect(Buffer.concat(chunks).toString()).toBe('hello over http');

    // pollTaskUrls through taskcluster-client@10, then raw HTTP as an old worker polls and deletes.
    const second = slugid();
    await queue.createTask(second, taskDef('local/poll'));
    const q10 = new tc10.Queue({ rootUrl, credentials });
    const urls = await q10.pollTaskUrls('local', 'poll');
    let polled: { taskId: string; messageId: string; popReceipt: string } | undefined;
    for (const u of urls.queues) {
      const res = await fetch(u.signedPollUrl);
      expect(res.status).toBe(200);
      const xml = await res.text();
      const text = /<MessageText>([^<]*)<\/MessageText>/.exec(xml)?.[1];
      if (!text) continue;
      const body = JSON.parse(Buffer.from(text, 'base64').toString());
      polled = { taskId: body.taskId, messageId: /<MessageId>([^<]*)</.exec(xml)![1], popReceipt: /<PopReceipt>([^<]*)</.exec(xml)![1] };
      break;
    }
    expect(polled?.taskId).toBe(second);
    const claim = await q10.claimTask(second, 0, worker);
    expect(claim.status.state).toBe('running');
    const del = urls.queues.map((u: { signedDeleteUrl: string }) =>
      u.signedDeleteUrl.replace('{{messageId}}', encodeURIComponent(polled!.messageId)).replace('{{popReceipt}}', encodeURIComponent(polled!.popReceipt)),
    );
    const statuses = await Promise.all(del.map(async (url: string) => (await fetch(url, { method: 'DELETE' })).status));
    expect(statuses.filter((st: number) => st === 204)).toHaveLength(1);
    // A URL altered by hand is refused as Azure refuses it.
    const forged = await fetch(urls.queues[0].signedPollUrl.replace('sp=p', 'sp=raup'));
    expect(forged.status).toBe(403);
    expect(forged.headers.get('x-ms-error-code')).toBe('AuthenticationFailed');
  } finally {
    await s.stop();
  }
});

const chunks: Buffer[] = [];
/** A stream factory for downloadArtifact that keeps what it is given (a retry starts afresh). */
async function collect(): Promise<import('node:stream').Writable> {
  const { Writable } = await import('node:stream');
  chunks.length = 0;
  return new Writable({
    write(chunk, _enc, done) {
      chunks.push(Buffer.from(chunk));
      done();
    },
  });
}
