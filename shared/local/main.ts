/**
 * `npm start`: the service on this machine. Starts embedded Azurite unless
 * QUEUE_STORAGE_CONNECTION is set (in memory, or on disk under .local/azurite with `--persist` or
 * QUEUE_LOCAL_PERSIST=true), serves the route table on PORT (default 7071) under /api, runs the
 * reaper on its schedule, grants the `anonymous` role `queue:get-artifact:public/*` (unless
 * QUEUE_LOCAL_ANONYMOUS_ROLE=false), and prints the root URL and credentials.
 *
 * A start-up mistake (port in use, unusable storage) is one message naming the setting to fix,
 * and the embedded Azurite is stopped whatever failed.
 */
import net from 'node:net';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Config, loadConfig } from '../config';
import { startApp } from '../app';
import { jsonLogger, type Logger } from '../log';
import { humanLogger, terminalSink, type LogSink } from './human-log';
import { startHost, LocalHost } from './host';
import { startAzurite as defaultStartAzurite, Azurite } from './azurite';
import { ensureLocalSecrets, loadLocalSettings } from './secrets';
import { describeStorageError } from './storage-errors';

/** Locally the reaper runs every few seconds so expiry is visible quickly. */
const LOCAL_REAPER_SCHEDULE = '*/5 * * * * *';
/** The Functions host's local default, so URLs match `func start`. */
const DEFAULT_PORT = 7071;
/** Where `--persist` keeps Azurite's data, under the git-ignored .local/. */
const PERSIST_DIR = path.join('.local', 'azurite');
/** What every Taskcluster deployment lets anyone read: public artifacts. */
export const ANONYMOUS_SCOPES = ['queue:get-artifact:public/*'];
/** Marks the anonymous role as made by `npm start`, so turning the setting off removes only ours. */
const ANONYMOUS_DESCRIPTION = 'npm start: public artifacts need no credentials (QUEUE_LOCAL_ANONYMOUS_ROLE=false turns this off)';

/** How `npm start` logs: a line per task transition, warning or error, or every event as JSON. */
const LOG_FORMATS = ['human', 'json'] as const;
type LogFormat = (typeof LOG_FORMATS)[number];

export const USAGE = `Usage: npm start [-- --persist] [-- --json]

Runs the queue on this machine: http://localhost:$PORT (default ${DEFAULT_PORT}), with its own Azurite
unless QUEUE_STORAGE_CONNECTION is set.

  --persist    keep Azurite's data in ${PERSIST_DIR}/ across restarts (also QUEUE_LOCAL_PERSIST=true);
               delete that folder to start afresh
  --json       log every event as a JSON line, as on Azure (also QUEUE_LOG_FORMAT=json); by default a
               line per task transition, warning and error, and a status line
  -h, --help

Settings (environment or local.settings.json Values): PORT, HOST (default 127.0.0.1),
QUEUE_STORAGE_CONNECTION, QUEUE_LOCAL_PERSIST, QUEUE_LOCAL_ANONYMOUS_ROLE (default true),
QUEUE_LOG_FORMAT (human or json), and every
QUEUE_* setting of the deployed app.`;

/** A start-up mistake: printed as one message, without a stack. */
export class StartupError extends Error {}

export interface LocalService {
  config: Config;
  host: LocalHost;
  azurite?: Azurite;
  logFormat: LogFormat;
  stop(): Promise<void>;
}

export interface StartOptions {
  argv?: string[];
  env?: NodeJS.ProcessEnv;
  /** The repository root (local.settings.json, .local/). */
  root?: string;
  startAzurite?: typeof defaultStartAzurite;
  /** Where log lines go (default: stdout, with the status line drawn on a terminal). */
  out?: LogSink;
  /** The service's clock (tests move it). */
  now?: () => Date;
  /** Run the reaper on its schedule (default); tests run it by hand with `host.runTimer`. */
  runTimers?: boolean;
}

/** The logger `--json` or QUEUE_LOG_FORMAT chose, writing to `out`. */
function localLogger(format: LogFormat, out: LogSink, now: () => Date): Logger {
  return format === 'json' ? jsonLogger((l) => out.line(l)) : humanLogger(out, now);
}

function logFormat(json: boolean | undefined, setting: string | undefined): LogFormat {
  if (json) return 'json';
  const v = (setting || 'human').trim().toLowerCase();
  if (!(LOG_FORMATS as readonly string[]).includes(v)) throw new StartupError(`QUEUE_LOG_FORMAT must be ${LOG_FORMATS.join(' or ')}, got '${setting}'`);
  return v as LogFormat;
}

const isTrue = (v: string | undefined) => v !== undefined && /^(1|true|yes|on)$/i.test(v.trim());
const isFalse = (v: string | undefined) => v !== undefined && /^(0|false|no|off)$/i.test(v.trim());

function portInUse(port: number, host: string): StartupError {
  return new StartupError(`port ${port} on ${host} is in use (another \`npm start\`?): stop it, or set PORT to a free port, e.g. PORT=${port + 1} npm start`);
}

/** Fails fast on a taken port, before Azurite is started for nothing. */
async function checkPort(port: number, host: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', (err: NodeJS.ErrnoException) =>
      reject(err.code === 'EADDRINUSE' || err.code === 'EACCES' ? portInUse(port, host) : new StartupError(`PORT ${port} on HOST ${host}: ${err.message}`)),
    );
    srv.listen(port, host, () => srv.close(() => resolve()));
  });
}

/** Starts the service; throws StartupError (with nothing left running) on a start-up mistake. */
export async function start(opts: StartOptions = {}): Promise<LocalService> {
  const env = opts.env ?? process.env;
  const root = opts.root ?? path.resolve(__dirname, '..', '..', '..');
  let values: { persist?: boolean; json?: boolean; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: opts.argv ?? [],
      options: { persist: { type: 'boolean' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
    }));
  } catch (err) {
    throw new StartupError(`${(err as Error).message}\n\n${USAGE}`);
  }
  if (values.help) throw Object.assign(new StartupError(USAGE), { help: true });
  loadLocalSettings(env, path.join(root, 'local.settings.json'));
  ensureLocalSecrets(env, path.join(root, '.local'));
  const format = logFormat(values.json, env.QUEUE_LOG_FORMAT);
  const rawPort = env.PORT || String(DEFAULT_PORT);
  const port = Number(rawPort);
  if (!/^[0-9]+$/.test(rawPort.trim()) || port > 65535) throw new StartupError(`PORT must be a port number (0..65535), got '${rawPort}'`);
  const hostName = env.HOST || '127.0.0.1';
  env.QUEUE_PUBLIC_URL ||= `http://localhost:${port}`;
  env.QUEUE_REAPER_SCHEDULE ||= LOCAL_REAPER_SCHEDULE;
  await checkPort(port, hostName);

  let azurite: Azurite | undefined;
  let app: Awaited<ReturnType<typeof startApp>> | undefined;
  let host: LocalHost | undefined;
  const persist = values.persist === true || isTrue(env.QUEUE_LOCAL_PERSIST);
  try {
    if (!env.QUEUE_STORAGE_CONNECTION) {
      try {
        azurite = await (opts.startAzurite ?? defaultStartAzurite)(persist ? { location: path.join(root, PERSIST_DIR) } : {});
      } catch (err) {
        throw new StartupError(`the embedded Azurite did not start: ${(err as Error).message}. Set QUEUE_STORAGE_CONNECTION to use other storage.`);
      }
      env.QUEUE_STORAGE_CONNECTION = azurite.connectionString;
      // A newcomer can try azureContainerSAS / azureTableSAS at once: on the embedded Azurite's account.
      if (/AccountKey=/.test(azurite.connectionString)) env.QUEUE_AZURE_ACCOUNTS ??= JSON.stringify({ devstoreaccount1: azurite.connectionString });
    } else if (persist) {
      throw new StartupError('--persist (QUEUE_LOCAL_PERSIST) keeps the embedded Azurite on disk; QUEUE_STORAGE_CONNECTION is set, so none is started');
    }
    let config: Config;
    try {
      config = loadConfig(env);
    } catch (err) {
      throw new StartupError((err as Error).message);
    }
    try {
      const now = opts.now ?? (() => new Date());
      app = await startApp(config, { log: localLogger(format, opts.out ?? terminalSink(process.stdout), now), now: opts.now });
      await localAnonymousRole(app.svc.clients, env.QUEUE_LOCAL_ANONYMOUS_ROLE);
    } catch (err) {
      const source = azurite ? 'the embedded Azurite' : 'QUEUE_STORAGE_CONNECTION';
      const described = describeStorageError(err, config.storageConnection, source);
      throw described ? new StartupError(described) : err;
    }
    try {
      host = await startHost({ app, port, host: hostName, runTimers: opts.runTimers ?? true, quiet: true, settings: env });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') throw portInUse(port, hostName);
      throw err;
    }
    const running = { app, host, azurite };
    return {
      config,
      host,
      azurite,
      logFormat: format,
      stop: async () => {
        await running.app.close();
        await running.host.close();
        await running.azurite?.stop();
      },
    };
  } catch (err) {
    await app?.close().catch(() => undefined);
    await host?.close().catch(() => undefined);
    await azurite?.stop();
    throw err;
  }
}

type Clients = Awaited<ReturnType<typeof startApp>>['svc']['clients'];

/** Creates the `anonymous` role unless one exists; with the setting off, removes the one made here. */
async function localAnonymousRole(clients: Clients, setting: string | undefined): Promise<void> {
  const existing = await clients.role('anonymous');
  if (isFalse(setting)) {
    if (existing?.description === ANONYMOUS_DESCRIPTION) await clients.deleteRole('anonymous');
    return;
  }
  if (!existing) await clients.putRole('anonymous', ANONYMOUS_DESCRIPTION, ANONYMOUS_SCOPES, 'create');
}

export function banner(s: LocalService, persistDir?: string): string {
  const { config, azurite } = s;
  const storage = azurite
    ? `embedded Azurite (blob ${azurite.ports.blob}, queue ${azurite.ports.queue}, table ${azurite.ports.table}), ${persistDir ? `data kept in ${persistDir}` : 'in memory: data is lost at exit (--persist keeps it)'}`
    : 'QUEUE_STORAGE_CONNECTION';
  return [
    '',
    `Taskcluster queue running at ${config.publicUrl}`,
    `  root URL:      ${config.publicUrl}   (taskcluster-client: new Queue({rootUrl}))`,
    `  dashboard:     ${config.publicUrl}/`,
    `  queue API:     ${config.publicUrl}/api/queue/v1/ping`,
    `  clientId:      ${config.rootClientId}`,
    `  accessToken:   ${config.rootAccessToken}`,
    `  storage:       ${storage}`,
    `  logs:          ${s.logFormat === 'json' ? 'every event as a JSON line' : 'task transitions, warnings and errors (npm start -- --json: every event as JSON)'}`,
    '  command line:  npx tcq --help   (docs/cli.md; reads the variables below)',
    '',
    'export TASKCLUSTER_ROOT_URL=' + config.publicUrl,
    'export TASKCLUSTER_CLIENT_ID=' + config.rootClientId,
    'export TASKCLUSTER_ACCESS_TOKEN=' + config.rootAccessToken,
    '',
    'Ctrl-C stops the service.',
  ].join('\n');
}

export async function main(argv = process.argv.slice(2), env: NodeJS.ProcessEnv = process.env): Promise<number | undefined> {
  let s: LocalService;
  try {
    s = await start({ argv, env });
  } catch (err) {
    if (!(err instanceof StartupError)) throw err;
    if ((err as { help?: boolean }).help) {
      console.log(err.message);
      return 0;
    }
    console.error(`error: ${err.message}`);
    return 1;
  }
  const persisted = s.azurite && (argv.includes('--persist') || isTrue(env.QUEUE_LOCAL_PERSIST)) ? PERSIST_DIR : undefined;
  console.log(banner(s, persisted));
  // Whatever ends this process (an uncaught error too), its Azurite goes with it.
  const azuritePid = s.azurite?.pid;
  if (azuritePid)
    process.once('exit', () => {
      try {
        process.kill(azuritePid);
      } catch {
        // already gone
      }
    });
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    // After the status line (a terminal's last row), not on it.
    console.log(process.stdout.isTTY ? '\nstopping…' : 'stopping…');
    await s.stop();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
  return undefined;
}

if (require.main === module) {
  main().then(
    (code) => code !== undefined && process.exit(code),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
