/**
 * `npm run worker -- --task-queue prov/type ...`: the reference worker's command line.
 */
import fs from 'node:fs';
import { parseConfig, UsageError, USAGE, WorkerConfig } from './config';
import { lineLogger } from './logger';
import { modernQueues, legacyQueue, objectUploader } from './clients';
import { abortableClaimWork } from './claim-request';
import { ClaimWorkSource } from './protocols/claim-work';
import { PollTaskUrlsSource } from './protocols/poll-task-urls';
import type { WorkSource } from './protocols/source';
import { runTask } from './task-run';
import { startTaskProxy } from './proxy';
import { Worker } from './worker';
import { signalHandler } from './signals';
import type { WorkerLog } from './types';

/** Variables a command inherits from the worker's environment; nothing else (no credentials). */
const INHERITED_ENV = ['PATH', 'LANG', 'LC_ALL', 'TZ', 'SystemRoot', 'ComSpec', 'PATHEXT'];

export async function startWorker(config: WorkerConfig, log: WorkerLog, env: NodeJS.ProcessEnv = process.env): Promise<Worker> {
  const queueFor = await modernQueues(config.rootUrl);
  const uploadObject = config.objectArtifacts ? await objectUploader(config.rootUrl) : undefined;
  const ids = { workerGroup: config.workerGroup, workerId: config.workerId, log };
  const source: WorkSource =
    config.protocol === 'claimWork'
      ? new ClaimWorkSource({ queue: abortableClaimWork(config.rootUrl, config.credentials), taskQueueId: config.taskQueueId, ...ids })
      : new PollTaskUrlsSource({
          queue: legacyQueue(config.rootUrl, config.credentials),
          provisionerId: config.provisionerId,
          workerType: config.workerType,
          ...ids,
        });
  await fs.promises.mkdir(config.workDir, { recursive: true });
  const baseEnv: Record<string, string> = {};
  for (const k of INHERITED_ENV) if (env[k] !== undefined) baseEnv[k] = env[k]!;
  return new Worker({
    source,
    concurrency: config.concurrency,
    log,
    maxTasks: config.maxTasks,
    shutdownGraceMs: config.shutdownGraceS * 1000,
    runTask: (claim, shutdown) =>
      runTask(claim, shutdown, {
        queueFor,
        log,
        rootUrl: config.rootUrl,
        workDir: config.workDir,
        workerGroup: config.workerGroup,
        workerId: config.workerId,
        baseEnv,
        reclaimMarginMs: config.reclaimMarginS * 1000,
        startProxy: config.proxy ? (o) => startTaskProxy({ rootUrl: config.rootUrl, ...o }) : undefined,
        uploadObject,
      }),
  });
}

export async function main(argv = process.argv.slice(2), env = process.env): Promise<number> {
  let config: WorkerConfig | undefined;
  try {
    config = parseConfig(argv, env);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    process.stderr.write(`error: ${err.message}\n\n${USAGE}\n`);
    return 2;
  }
  if (!config) {
    process.stdout.write(USAGE + '\n');
    return 0;
  }
  const log = lineLogger();
  const worker = await startWorker(config, log, env);
  const onSignal = signalHandler(worker, log, (code) => process.exit(code));
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  log.info('worker-started', {
    rootUrl: config.rootUrl,
    taskQueueId: config.taskQueueId,
    workerGroup: config.workerGroup,
    workerId: config.workerId,
    protocol: config.protocol,
    concurrency: config.concurrency,
    clientId: config.credentials.clientId,
    proxy: config.proxy || undefined,
    objectArtifacts: config.objectArtifacts || undefined,
  });
  await worker.run();
  log.info('worker-stopped', { tasks: worker.outcomes.length });
  if (worker.fatal) {
    process.stderr.write(
      `error: the queue at ${config.rootUrl} rejected client '${config.credentials.clientId}' (401: ${worker.fatal.detail}).\n` +
        '  Check TASKCLUSTER_CLIENT_ID and TASKCLUSTER_ACCESS_TOKEN (or --client-id and --access-token): the access token must be\n' +
        "  this client's current one, and temporary credentials (TASKCLUSTER_CERTIFICATE) must not have expired.\n",
    );
    return 1;
  }
  return 0;
}

if (require.main === module) {
  main().then(
    // Exit explicitly: the HTTP clients keep sockets alive.
    (code) => process.exit(code),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
