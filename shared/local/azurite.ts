/**
 * Starts Azurite from node_modules (in memory, on free loopback ports) for local runs and tests.
 */
import { ChildProcess, spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { QueueServiceClient } from '@azure/storage-queue';
import { TableServiceClient } from '@azure/data-tables';
import { BlobServiceClient } from '@azure/storage-blob';
import { DEVSTORE_ACCOUNT, DEVSTORE_KEY } from '../config';
import { freePort } from './ports';

export { freePort };

/** Azurite needs a few seconds to open its three ports on a busy machine. */
const START_TIMEOUT_MS = 30_000;
/** How long Azurite gets to exit on SIGTERM before it is killed. */
const STOP_GRACE_MS = 5_000;

export interface Azurite {
  connectionString: string;
  ports: { blob: number; queue: number; table: number };
  pid: number;
  stop(): Promise<void>;
}

async function waitForPort(port: number, deadline: number): Promise<void> {
  while (Date.now() < deadline) {
    const okay = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (okay) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`Azurite did not open port ${port} in time`);
}

export function connectionStringFor(ports: { blob: number; queue: number; table: number }, protocol: 'http' | 'https' = 'http'): string {
  return (
    `DefaultEndpointsProtocol=${protocol};AccountName=${DEVSTORE_ACCOUNT};AccountKey=${DEVSTORE_KEY};` +
    `BlobEndpoint=${protocol}://127.0.0.1:${ports.blob}/${DEVSTORE_ACCOUNT};` +
    `QueueEndpoint=${protocol}://127.0.0.1:${ports.queue}/${DEVSTORE_ACCOUNT};` +
    `TableEndpoint=${protocol}://127.0.0.1:${ports.table}/${DEVSTORE_ACCOUNT}`
  );
}

export interface AzuriteOptions {
  quiet?: boolean;
  location?: string;
  /**
   * Serve HTTPS with this certificate and key (PEM files) and accept Entra ID bearer tokens, checking
   * their claims but not their signature (Azurite's `--oauth basic`): the managed-identity path,
   * whose user delegation keys Azurite hands out only so.
   */
  oauth?: { cert: string; key: string };
}

/**
 * `location`: keep data in that folder instead of memory. In memory, every queue message is an
 * extent of its own, and Azurite's minutely extent sweep re-sorts the extent index once per deleted
 * message: after thousands of queue calls a sweep stalls Azurite past the 10 s storage deadline.
 * On disk, messages share extent files.
 */
export async function startAzurite(opts: AzuriteOptions = {}): Promise<Azurite> {
  const ports = { blob: await freePort(), queue: await freePort(), table: await freePort() };
  const bin = path.join(path.dirname(require.resolve('azurite/package.json')), 'dist', 'src', 'azurite.js');
  const child: ChildProcess = spawn(
    process.execPath,
    [
      bin,
      ...(opts.location ? ['--location', opts.location] : ['--inMemoryPersistence']),
      '--silent',
      '--disableTelemetry',
      '--skipApiVersionCheck',
      '--blobHost',
      '127.0.0.1',
      '--blobPort',
      String(ports.blob),
      '--queueHost',
      '127.0.0.1',
      '--queuePort',
      String(ports.queue),
      '--tableHost',
      '127.0.0.1',
      '--tablePort',
      String(ports.table),
      ...(opts.oauth ? ['--cert', opts.oauth.cert, '--key', opts.oauth.key, '--oauth', 'basic'] : []),
    ],
    { stdio: opts.quiet === false ? 'inherit' : 'ignore', detached: false },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const running = () => child.exitCode === null && child.signalCode === null;
  // A busy Azurite (an in-memory extent sweep, below) may not answer SIGTERM: left running, it
  // would outlive this process and keep a core busy.
  const stop = async () => {
    if (running()) child.kill('SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, STOP_GRACE_MS).unref())]);
    if (running()) child.kill('SIGKILL');
  };
  const deadline = Date.now() + START_TIMEOUT_MS;
  try {
    await Promise.race([
      Promise.all([waitForPort(ports.blob, deadline), waitForPort(ports.queue, deadline), waitForPort(ports.table, deadline)]),
      exited.then(() => {
        throw new Error(`Azurite exited with code ${child.exitCode} before opening its ports${opts.location ? ` (data folder ${opts.location})` : ''}`);
      }),
    ]);
  } catch (err) {
    // Never leave a half-started Azurite behind.
    await stop();
    throw err;
  }
  return { connectionString: connectionStringFor(ports, opts.oauth ? 'https' : 'http'), ports, pid: child.pid!, stop };
}

/** Empties the queues whose names start with `prefix` (a consumer that keeps up: Azurite's queue calls slow with every message the account holds). */
export async function clearQueues(connectionString: string, prefix: string): Promise<number> {
  const queues = QueueServiceClient.fromConnectionString(connectionString);
  const names: string[] = [];
  for await (const q of queues.listQueues({ prefix })) names.push(q.name);
  await Promise.all(names.map((n) => queues.getQueueClient(n).clearMessages()));
  return names.length;
}

/**
 * Deletes every queue, table and blob container whose name starts with `prefix`: a deployment
 * that is done with (the bench between phases). Azurite's queue calls scan every message in the
 * account, so messages a finished phase left behind would slow every later one.
 */
export async function dropPrefix(connectionString: string, prefix: string): Promise<{ queues: number; tables: number; containers: number }> {
  const queues = QueueServiceClient.fromConnectionString(connectionString);
  const tables = TableServiceClient.fromConnectionString(connectionString, { allowInsecureConnection: true });
  const blobs = BlobServiceClient.fromConnectionString(connectionString);
  const queueNames: string[] = [];
  for await (const q of queues.listQueues({ prefix })) queueNames.push(q.name);
  const tableNames: string[] = [];
  for await (const t of tables.listTables()) if (t.name?.startsWith(prefix)) tableNames.push(t.name);
  const containerNames: string[] = [];
  for await (const c of blobs.listContainers({ prefix })) containerNames.push(c.name);
  await Promise.all([
    ...queueNames.map((n) => queues.deleteQueue(n)),
    ...tableNames.map((n) => tables.deleteTable(n)),
    ...containerNames.map((n) => blobs.deleteContainer(n)),
  ]);
  return { queues: queueNames.length, tables: tableNames.length, containers: containerNames.length };
}
