/**
 * `npm start`: the service on this machine. Starts embedded Azurite unless
 * QUEUE_STORAGE_CONNECTION is set, serves the route table on PORT (default 7071) under /api, runs
 * the reaper on its schedule, and prints the root URL and credentials.
 */
import path from 'node:path';
import { loadConfig } from '../config';
import { startApp } from '../app';
import { startHost } from './host';
import { startAzurite, Azurite } from './azurite';
import { ensureLocalSecrets, loadLocalSettings } from './secrets';

/** Locally the reaper runs every few seconds so expiry is visible quickly. */
const LOCAL_REAPER_SCHEDULE = '*/5 * * * * *';

export async function main(env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const root = path.resolve(__dirname, '..', '..', '..');
  loadLocalSettings(env, path.join(root, 'local.settings.json'));
  ensureLocalSecrets(env, path.join(root, '.local'));
  const port = Number(env.PORT || 7071);
  env.QUEUE_PUBLIC_URL ||= `http://localhost:${port}`;
  env.QUEUE_REAPER_SCHEDULE ||= LOCAL_REAPER_SCHEDULE;

  let azurite: Azurite | undefined;
  if (!env.QUEUE_STORAGE_CONNECTION) {
    azurite = await startAzurite();
    env.QUEUE_STORAGE_CONNECTION = azurite.connectionString;
  }
  const config = loadConfig(env);
  const app = await startApp(config);
  const host = await startHost({
    app,
    port,
    host: env.HOST || '127.0.0.1',
    runTimers: true,
    quiet: true,
  });

  const lines = [
    '',
    `Taskcluster queue running at ${config.publicUrl}`,
    `  root URL:      ${config.publicUrl}   (taskcluster-client: new Queue({rootUrl}))`,
    `  dashboard:     ${config.publicUrl}/`,
    `  queue API:     ${config.publicUrl}/api/queue/v1/ping`,
    `  clientId:      ${config.rootClientId}`,
    `  accessToken:   ${config.rootAccessToken}`,
    `  storage:       ${azurite ? `embedded Azurite (blob ${azurite.ports.blob}, queue ${azurite.ports.queue}, table ${azurite.ports.table})` : 'QUEUE_STORAGE_CONNECTION'}`,
    '',
    'export TASKCLUSTER_ROOT_URL=' + config.publicUrl,
    'export TASKCLUSTER_CLIENT_ID=' + config.rootClientId,
    'export TASKCLUSTER_ACCESS_TOKEN=' + config.rootAccessToken,
    '',
    'Ctrl-C stops the service.',
  ];
  console.log(lines.join('\n'));

  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    console.log('stopping…');
    await app.close();
    await host.close();
    await azurite?.stop();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop());
  process.on('SIGTERM', () => void stop());
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
