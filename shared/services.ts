/**
 * Builds everything the handlers need from a Config, once per process.
 */
import { Config } from './config';
import { Storage } from './storage/storage';
import { ClientStore } from './auth/clients';
import { Authenticator } from './auth/authenticate';
import { TaskStore } from './tasks/store';
import { PendingQueues } from './tasks/pending';
import { Triggers } from './tasks/triggers';
import { TaskGroups } from './tasks/groups';
import { TaskDeps } from './tasks/deps';
import { Logger, jsonLogger } from './log';
import { WorkerRegistry } from './ops/workers';
import { opsObserver } from './ops/observer';

export interface Services extends TaskDeps {
  config: Config;
  clients: ClientStore;
  authenticator: Authenticator;
  startedAt: Date;
  /** Task queues and workers (seen, quarantine). */
  workers: WorkerRegistry;
  /** Hooks other modules attach to (e.g. the claimWork pollers). */
  wakeListeners: Set<(taskQueueId: string) => void>;
}

export interface ServiceOptions {
  log?: Logger;
  now?: () => Date;
}

export async function buildServices(config: Config, opts: ServiceOptions = {}): Promise<Services> {
  const now = opts.now ?? (() => new Date());
  const log = opts.log ?? jsonLogger();
  const storage = new Storage(config.storageConnection, config.storagePrefix);
  await storage.ensureAll();
  const clients = new ClientStore(storage, {
    rootClientId: config.rootClientId,
    rootAccessToken: config.rootAccessToken,
    issuerClientId: config.issuerClientId,
    encryptionKey: config.tokenEncryptionKey,
    now,
  });
  const wakeListeners = new Set<(taskQueueId: string) => void>();
  return {
    config,
    storage,
    clients,
    authenticator: new Authenticator(clients, now),
    tasks: new TaskStore(storage, opsObserver(storage, log, now)),
    pending: new PendingQueues(storage, clients.issuerAccessToken()),
    triggers: new Triggers(storage, config.deadlineDelayS, now),
    groups: new TaskGroups(storage),
    now,
    log,
    startedAt: now(),
    workers: new WorkerRegistry(storage, now),
    wakeListeners,
    wake: (taskQueueId) => wakeListeners.forEach((fn) => fn(taskQueueId)),
  };
}
