/**
 * Builds everything the handlers need from a Config, once per process.
 */
import { Config } from './config';
import { createStorage } from './storage/storage';
import { storageOriginFor } from './storage/memory';
import { clockSkewMs, Sleep } from './storage/faults';
import { ClientStore } from './auth/clients';
import { Authenticator } from './auth/authenticate';
import { TaskStore } from './tasks/store';
import { PendingQueues } from './tasks/pending';
import { Triggers } from './tasks/triggers';
import { GROUP_PREFIX, TaskGroups, groupRowKey } from './tasks/groups';
import { taskRowKey } from './tasks/model';
import type { AccountRoots } from './storage/accounts';
import { ExpiryIndex, FORGET_LINGER_MS } from './tasks/expiry';
import { Pollers } from './work/poller';
import { HintRepairSchedule } from './reaper/hints';
import { DelegatedAccounts, DelegatedAccountsOptions } from './storage/delegated-accounts';
import type { LifecycleDeps } from './lifecycle/ports';
import { Logger, jsonLogger } from './log';
import { RECENT_TASKS_WRITE_MS, WorkerRegistry } from './ops/workers';
import { IndexWrites, ReadModels } from './ops/read-models';
import { currentActor } from './ops/actor';
import { INDEX_LINGER_MS, IndexBatcher } from './ops/indexes';
import { ROLLUP_FLUSH_MS, Rollups } from './ops/rollups';
import { EventRecorder } from './events/recorder';
import { taskEventPort } from './lifecycle/events';
import { EventDispatcher, EventSink } from './events/dispatch';
import { SUBSCRIPTION_CACHE_MS, Subscriptions, SYSTEM_SUBSCRIPTION_ID } from './events/subscriptions';
import { createSubscriptionQueue } from './storage/subscription-queues';
import { eventGridSink } from './events/eventgrid';
import { commitRunUploads } from './artifacts/commit';
import { liveLogBlob } from './artifacts/blobs';
import { SYNC_DEPENDENCIES } from './lifecycle/create';
import { Sandbox, sandbox as processSandbox } from './sandbox/sandbox';

/**
 * The rows that exist whenever a task or group does: how several accounts find one stored before an
 * account was added. A Tasks partition holds a task, or a group (its meta row), or both.
 */
const ACCOUNT_ROOTS: AccountRoots = {
  task: (id) => [
    { table: 'Tasks', pk: id, rk: taskRowKey(id) },
    { table: 'Tasks', pk: id, rk: GROUP_PREFIX + groupRowKey(id) },
  ],
};

/**
 * Message leases. Not operator settings: production uses the defaults; crash-safety tests shorten
 * them so a message leased by a call that then "crashed" comes back within the test.
 */
export interface Tuning {
  /** A leased pending hint stays invisible to other pollers this long while we try to claim it. */
  hintLeaseS: number;
  /** A trigger message being handled stays invisible this long; if we crash it comes back then. */
  triggerLeaseS: number;
  /** A claimed schedule tick stays claimed this long unless renewed; if the instance dies, another fires it then. */
  hookLeaseS: number;
  /** The resolution safety net fires this long after a report, if the report's propagation was cut short. */
  resolvedNetDelayS: number;
  /** A run pending this long without a visible hint gets a fresh one (see shared/reaper/hints.ts). */
  hintRepairAfterS: number;
  /** How often one instance's reaper looks for such runs. */
  hintRepairEveryS: number;
  /** Events not delivered this long after their write are delivered by the reaper (shared/events/outbox.ts). */
  eventSweepDelayS: number;
  /** createTask tracks up to this many dependencies before answering, more in the background (shared/lifecycle/create.ts). */
  syncDependencies: number;
  /** A partition's queued index writes wait this long for others (shared/ops/indexes.ts); 0 = at once (a fixed call order for crash sweeps). */
  indexLingerMs: number;
  /** An expiry-index partition's queued deletes (a run's claim-expiry row at its end) wait this long for others (shared/tasks/expiry.ts `forget`); 0 = at once (a fixed call order for crash sweeps). */
  forgetLingerMs: number;
  /** How often the chart rollups' finished minutes are written (shared/ops/rollups.ts); 0 = only at close and when a chart is read (a fixed call order for crash sweeps). */
  rollupFlushMs: number;
  /** An instance writes a worker's recentTasks at most once per this, on the service's clock (shared/ops/workers.ts). */
  recentTasksWriteMs: number;
  /** How long an instance uses the subscription list it read (shared/events/subscriptions.ts). */
  subscriptionCacheMs: number;
}

/**
 * A claim takes milliseconds, so a hint's lease only has to outlive one claim attempt; it is also
 * how long the pending runs an instance had just dequeued stay invisible after that instance dies.
 */
export const HINT_LEASE_S = 10;

/** A fire takes well under a second and renews its claim every third of this; a crashed one is taken over this soon. */
export const HOOK_LEASE_S = 10;

export const DEFAULT_TUNING: Tuning = {
  hintLeaseS: HINT_LEASE_S,
  triggerLeaseS: 5 * 60,
  hookLeaseS: HOOK_LEASE_S,
  resolvedNetDelayS: 2 * 60,
  // Far beyond any lease (10 s) a hint is normally hidden by, so only lost or hijacked hints qualify.
  hintRepairAfterS: 15 * 60,
  hintRepairEveryS: 5 * 60,
  // Delivery normally follows the write within milliseconds; the sweep only catches a crash in between.
  eventSweepDelayS: 60,
  syncDependencies: SYNC_DEPENDENCIES,
  indexLingerMs: INDEX_LINGER_MS,
  forgetLingerMs: FORGET_LINGER_MS,
  rollupFlushMs: ROLLUP_FLUSH_MS,
  recentTasksWriteMs: RECENT_TASKS_WRITE_MS,
  subscriptionCacheMs: SUBSCRIPTION_CACHE_MS,
};

export interface Services extends LifecycleDeps {
  config: Config;
  tuning: Tuning;
  clients: ClientStore;
  authenticator: Authenticator;
  startedAt: Date;
  /** Task queues and workers (seen, quarantine). */
  workers: WorkerRegistry;
  /** Queued operator index writes: index queries and close() wait for them (shared/ops/indexes.ts). */
  indexes: IndexWrites;
  /** Per-minute tallies for the dashboard's charts, flushed once a minute (shared/ops/rollups.ts). */
  rollups: Rollups;
  /** This instance's claimWork long polls, per task queue (shared/work/poller.ts); `wake` reaches them. */
  pollers: Pollers;
  /** When the reaper last looked for hidden hints (shared/reaper/hints.ts). */
  hintRepair: HintRepairSchedule;
  /** Storage accounts Auth hands out table and container SAS for (QUEUE_AZURE_ACCOUNTS). */
  delegatedAccounts: DelegatedAccounts;
  /** Event recording and delivery (shared/events). */
  events: EventRecorder;
  /** Errors of a task built outside HTTP (a hook's rendered task) against createTask's request schema, which the HTTP layer owns. */
  checkTask: TaskCheck;
  /** Where hook templates render and trigger schemas run (shared/sandbox/sandbox.ts). */
  sandbox: Sandbox;
}

export type TaskCheck = (task: unknown) => string[];

export interface ServiceOptions {
  log?: Logger;
  now?: () => Date;
  tuning?: Partial<Tuning>;
  /** Extra event delivery targets (Event Grid). */
  eventSinks?: EventSink[];
  /** How the faithful storage mode waits between retries (tests: no real time). */
  sleep?: Sleep;
  /** The sandbox pool; the process's own by default (its children serve every instance of the process). */
  sandbox?: Sandbox;
  /** How identity accounts of QUEUE_AZURE_ACCOUNTS are reached (tests: a fake credential and a local HTTPS Azurite). */
  delegation?: Pick<DelegatedAccountsOptions, 'credential' | 'tlsOptions'>;
}

export async function buildServices(config: Config, opts: ServiceOptions & { checkTask: TaskCheck }): Promise<Services> {
  // The faithful storage mode sets this instance's clock off storage's by up to `skew-ms`.
  const skew = config.storageFaults ? clockSkewMs(config.storageFaults) : 0;
  const base = opts.now ?? (() => new Date());
  const now = skew === 0 ? base : () => new Date(base().getTime() + skew);
  const log = opts.log ?? jsonLogger();
  const storage = createStorage(config.storageConnection, config.storagePrefix, {
    faults: config.storageFaults,
    sleep: opts.sleep,
    origin: storageOriginFor(config.publicUrl),
    more: config.moreStorageConnections,
    roots: ACCOUNT_ROOTS,
    // A hint lives until its task's deadline, at most this long after it was put.
    hintLifetimeMs: config.maxTaskDeadlineDays * 24 * 3600 * 1000,
    now,
    // Storage's own clock (message visibility, SAS expiry) is the unskewed one.
    storageNow: () => base().getTime(),
  });
  await storage.ensureAll();
  // The system subscription's queue (index and hooks consumers) lives as long as the deployment.
  await createSubscriptionQueue(storage, SYSTEM_SUBSCRIPTION_ID);
  const clients = new ClientStore(storage, {
    rootClientId: config.rootClientId,
    rootAccessToken: config.rootAccessToken,
    issuerClientId: config.issuerClientId,
    encryptionKey: config.tokenEncryptionKey,
    now,
  });
  const tuning: Tuning = { ...DEFAULT_TUNING, ...opts.tuning };
  const expiry = new ExpiryIndex(storage, tuning.forgetLingerMs);
  const sinks =
    opts.eventSinks ??
    (config.eventGridEndpoint
      ? [
          eventGridSink({
            endpoint: config.eventGridEndpoint,
            key: config.eventGridKey,
            managedIdentityClientId: config.eventGridClientId,
            source: config.publicUrl,
          }),
        ]
      : []);
  const dispatcher = new EventDispatcher(storage, new Subscriptions(storage, expiry, now, tuning.subscriptionCacheMs), sinks, now);
  const background = new Set<Promise<void>>();
  const events = new EventRecorder(storage, dispatcher, log, { sweepDelayS: () => tuning.eventSweepDelayS });
  const groups = new TaskGroups(storage);
  const rollups = new Rollups(storage, now, (event, fields) => log.warn(event, fields), tuning.rollupFlushMs);
  const readModels = new ReadModels(storage, log, new IndexBatcher(storage, tuning.indexLingerMs), rollups);
  const svc: Services = {
    config,
    tuning,
    storage,
    clients,
    authenticator: new Authenticator(clients, now),
    tasks: new TaskStore(storage),
    readModels,
    actor: currentActor,
    indexes: readModels,
    rollups,
    pending: new PendingQueues(storage, clients.issuerAccessToken(), config.pendingShards, now),
    triggers: new Triggers({ storage, expiry, deadlineDelayS: config.deadlineDelayS, now, resolvedNetDelayS: tuning.resolvedNetDelayS }),
    groups,
    expiry,
    uploads: {
      commit: async (taskId, runId) => void (await commitRunUploads(storage, taskId, runId)),
      sealLiveLog: (taskId, runId) => storage.artifacts.seal(liveLogBlob(taskId, runId)),
    },
    now,
    log,
    startedAt: now(),
    workers: new WorkerRegistry(storage, now, tuning.recentTasksWriteMs),
    events,
    checkTask: opts.checkTask,
    sandbox: opts.sandbox ?? processSandbox,
    background,
    wake: (taskQueueId, hinted) => svc.pollers.wake(taskQueueId, hinted),
    waiting: (taskQueueId) => svc.pollers.take(taskQueueId),
    hintRepair: new HintRepairSchedule(),
    delegatedAccounts: new DelegatedAccounts(config.azureAccounts, { ...opts.delegation, now }),
    // Set below: the pollers claim through the services they are part of.
    pollers: undefined as unknown as Pollers,
    taskEvents: taskEventPort(events, { hasOpen: (id) => groups.hasOpen(id), log }),
  };
  svc.pollers = new Pollers(svc);
  return svc;
}
