/**
 * A service process killed with SIGKILL between dequeuing a pending hint and claiming its run: the
 * run must become claimable again within the hint lease (HINT_LEASE_S), not minutes later.
 *
 * The service runs as a child process whose queue endpoint goes through a proxy in this test; the
 * proxy kills the child the moment Azure Storage hands it a hint, before the child can see it.
 */
import http from 'node:http';
import path from 'node:path';
import crypto from 'node:crypto';
import { spawn, ChildProcess } from 'node:child_process';
import { buildWorker, until } from './worker-process';
import { freePort } from '../../shared/local/azurite';
import { HINT_LEASE_S } from '../../shared/services';
import { generateAccessToken } from '../../shared/auth/clients';
import { taskDef } from '../helpers/service';
import { uniqueQueue } from '../helpers/work';

const DIST = path.resolve(__dirname, '..', '..', '.local', 'e2e-service-dist');
/** Start-up of a child service, and slack for the poller's back-off after the lease ends. */
const SLACK_S = 5;

function endpoint(conn: string, name: string): URL {
  const m = new RegExp(`${name}Endpoint=([^;]+)`, 'i').exec(conn);
  if (!m) throw new Error(`no ${name}Endpoint in the test connection string`);
  return new URL(m[1]);
}

/** Forwards to Azure Storage's queue endpoint; once armed, kills `victim` when a dequeue returns a message. */
function queueProxy(target: URL, onHint: () => boolean) {
  return http.createServer((req, res) => {
    const up = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (upRes) => {
      const chunks: Buffer[] = [];
      upRes.on('data', (c) => chunks.push(c));
      upRes.on('end', () => {
        const body = Buffer.concat(chunks);
        const dequeue = req.method === 'GET' && /\/messages(\?|$)/.test(req.url ?? '') && !/peekonly=true/i.test(req.url ?? '');
        if (dequeue && body.includes('<QueueMessage>') && onHint()) {
          res.destroy(); // the caller is dead already; the message stays leased in storage
          return;
        }
        res.writeHead(upRes.statusCode ?? 500, upRes.headers);
        res.end(body);
      });
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
}

function startService(env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, [path.join(DIST, 'shared', 'local', 'main.js')], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.resume();
  child.stderr!.resume();
  return child;
}

describe('recovery after kill -9 between dequeue and claim', () => {
  const children: ChildProcess[] = [];
  let proxy: http.Server | undefined;

  beforeAll(() => buildWorker(DIST), 120_000);
  afterAll(async () => {
    children.forEach((c) => c.kill('SIGKILL'));
    await new Promise((r) => (proxy ? proxy.close(r) : r(undefined)));
  });

  it(`the run is claimable again within the ${HINT_LEASE_S} s hint lease`, async () => {
    const conn = process.env.TEST_STORAGE_CONNECTION!;
    const armed: { victim?: ChildProcess } = {};
    let killedAt = 0;
    proxy = queueProxy(endpoint(conn, 'Queue'), () => {
      if (!armed.victim || killedAt) return false;
      armed.victim.kill('SIGKILL');
      killedAt = Date.now();
      return true;
    });
    const proxyPort = await freePort();
    await new Promise<void>((r) => proxy!.listen(proxyPort, '127.0.0.1', r));
    const queueEp = endpoint(conn, 'Queue');
    const proxied = conn.replace(/QueueEndpoint=[^;]+/i, `QueueEndpoint=http://127.0.0.1:${proxyPort}${queueEp.pathname}`);

    const port = await freePort();
    const rootUrl = `http://localhost:${port}`;
    const root = { clientId: 'static/root', accessToken: generateAccessToken() };
    const env = {
      QUEUE_STORAGE_CONNECTION: proxied,
      QUEUE_STORAGE_PREFIX: 'k' + crypto.randomBytes(5).toString('hex'),
      QUEUE_PUBLIC_URL: rootUrl,
      PORT: String(port),
      QUEUE_ROOT_ACCESS_TOKEN: root.accessToken,
      QUEUE_TOKEN_ENCRYPTION_KEY: crypto.randomBytes(32).toString('base64'),
      QUEUE_CLAIM_WORK_POLL_S: '5',
    };
    const tc = (await import('taskcluster-client')).default;
    const queue = new tc.Queue({ rootUrl, credentials: root, retries: 0 });
    const up = () => until(() => queue.ping().then(() => true), 30_000, 'the service to answer');

    const first = startService(env);
    children.push(first);
    await up();
    const taskQueueId = uniqueQueue();
    const taskId = tc.slugid();
    await queue.createTask(taskId, taskDef(taskQueueId));

    armed.victim = first;
    await expect(queue.claimWork(taskQueueId, { workerGroup: 'wg', workerId: 'w1', tasks: 1 })).rejects.toThrow();
    expect(killedAt).toBeGreaterThan(0);
    if (first.exitCode === null && first.signalCode === null) await new Promise((r) => first.once('exit', r));
    expect(first.signalCode).toBe('SIGKILL');

    const second = startService(env);
    children.push(second);
    await up();
    expect((await queue.status(taskId)).status.state).toBe('pending');
    let claimedAt = 0;
    while (!claimedAt && Date.now() - killedAt < (HINT_LEASE_S + SLACK_S) * 1000) {
      const r = await queue.claimWork(taskQueueId, { workerGroup: 'wg', workerId: 'w2', tasks: 1 });
      if (r.tasks.length) {
        expect(r.tasks[0].status.taskId).toBe(taskId);
        claimedAt = Date.now();
      }
    }
    const recoveryS = (claimedAt - killedAt) / 1000;
    console.log(`recovery after kill -9: claimed again ${recoveryS.toFixed(1)} s after the kill (hint lease ${HINT_LEASE_S} s)`);
    expect(claimedAt).toBeGreaterThan(0);
  }, 120_000);
});
