/**
 * The one place that reads the environment. Everything else receives a Config.
 */
import { parseSchedule } from './cron';

/** Azurite's well-known development account; used when no connection string is configured. */
export const DEVSTORE_ACCOUNT = 'devstoreaccount1';
export const DEVSTORE_KEY = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';

export interface Config {
  /** Storage connection string (tables, queues, blobs) of the first data account. */
  storageConnection: string;
  /** Connection strings of further data accounts, in the order they were added (shared/storage/accounts.ts). */
  moreStorageConnections: string[];
  /** Storage accounts Auth's azureTableSAS / azureContainerSAS delegate, by the name clients give them (QUEUE_AZURE_ACCOUNTS). */
  azureAccounts: Record<string, DelegatedAccountSetting>;
  /** Prefix for every table, queue and container name, so deployments and tests can share an account. */
  storagePrefix: string;
  /** Root URL clients use; Hawk signatures cover its host and port. */
  publicUrl: string;
  rootClientId: string;
  rootAccessToken: string;
  /** 32-byte key (base64) encrypting client access tokens at rest. */
  tokenEncryptionKey: Buffer;
  /** Client id the queue signs run credentials with; its token is derived from the root token. */
  issuerClientId: string;
  claimTimeoutS: number;
  /** How long claimWork waits for work before answering `{tasks: []}`. */
  claimWorkPollS: number;
  /** Delay after a task's deadline before the reaper resolves it. */
  deadlineDelayS: number;
  /** NCRONTAB schedule of the reaper timer. */
  reaperSchedule: string;
  /** The health endpoint fails once the reaper has not finished a pass for this long. */
  reaperStaleS: number;
  /** Queue endpoint workers can reach, for SAS poll URLs (defaults to the storage endpoint). */
  publicQueueEndpoint?: string;
  /** Maximum task deadline in days from now. */
  maxTaskDeadlineDays: number;
  /** Schemes the poll-URL SAS allows; unset: https only, unless the queue endpoint is http (Azurite). */
  sasProtocol?: SasProtocol;
  /** Event Grid topic endpoint; events are also published there when set (shared/events/eventgrid.ts). */
  eventGridEndpoint?: string;
  /** Topic access key; unset: the app's managed identity. */
  eventGridKey?: string;
  /** Client id of the user-assigned managed identity that may send to the topic. */
  eventGridClientId?: string;
  /** Pending storage queues per (task queue, priority): the default and per-task-queue overrides (shared/tasks/pending.ts). */
  pendingShards: PendingShards;
  /** The faithful storage mode's faults (shared/storage/faults.ts); unset: storage as it answers. */
  storageFaults?: FaultSettings;
}

export interface PendingShards {
  default: number;
  byQueue: Record<string, number>;
}

/**
 * Most pending storage queues per (task queue, priority): an idle claimWork polls each of them, and
 * 16 queues carry about 32,000 hints/s, beyond one account's 20,000 transactions/s.
 */
export const MAX_PENDING_SHARDS = 16;

/** `QUEUE_PENDING_SHARDS`: `<n>` for every task queue, then optional `<taskQueueId>=<n>` overrides, whitespace-separated. */
function pendingShards(env: NodeJS.ProcessEnv): PendingShards {
  const raw = (env.QUEUE_PENDING_SHARDS ?? '').trim();
  const out: PendingShards = { default: 1, byQueue: {} };
  const count = (v: string) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1 || n > MAX_PENDING_SHARDS) {
      throw new Error(`setting QUEUE_PENDING_SHARDS: '${v}' is not a whole number from 1 to ${MAX_PENDING_SHARDS}`);
    }
    return n;
  };
  for (const part of raw.split(/\s+/).filter((p) => p !== '')) {
    const eq = part.lastIndexOf('=');
    if (eq < 0) out.default = count(part);
    else out.byQueue[part.slice(0, eq)] = count(part.slice(eq + 1));
  }
  return out;
}

export interface FaultSettings {
  /** Seed of every random choice (the same seed and the same calls give the same faults). */
  seed: number;
  /** Probability that a query answers a short or empty page (with a continuation). */
  pages: number;
  /** Probability that a write applies and its caller's attempt still fails (then retried). */
  ambiguous: number;
  /** Probability that a call is refused with 503 ServerBusy before it applies (then retried). */
  throttle: number;
  /** Probability that a queue receive leases messages and its answer is lost (the retry receives again). */
  lostReceive: number;
  /** Bound of each app instance's clock offset from storage's, in ms (either way). */
  skewMs: number;
  /** Which instance this process is (instances of one seed get different clock offsets). */
  instance: number;
  /** Retries after the first attempt, as the SDKs' default retry policy (3). */
  retries: number;
  /** First back-off delay in ms, doubled per retry (the SDKs: 800 ms to 1 s; 0 in tests). */
  backoffMs: number;
}

/** The SDKs' exponential retry policy retries a failed call this many times. */
export const SDK_RETRIES = 3;
/** The data-tables SDK's first back-off delay. */
export const SDK_BACKOFF_MS = 800;

const PROBABILITIES = { pages: 'pages', ambiguous: 'ambiguous', throttle: 'throttle', 'lost-receive': 'lostReceive' } as const;
const COUNTS = { seed: 'seed', 'skew-ms': 'skewMs', instance: 'instance', retries: 'retries', 'backoff-ms': 'backoffMs' } as const;

/**
 * Parses `QUEUE_STORAGE_FAULTS` (the faithful storage mode, shared/storage/faults.ts): space-separated `key=value` pairs, e.g.
 * `seed=7 pages=0.3 ambiguous=0.05 throttle=0.02 skew-ms=2000`. Probabilities are per call, from 0
 * to 1; the other keys are whole numbers. Empty: undefined (faults off). Throws naming the setting.
 */
export function parseFaults(raw: string | undefined, setting = 'QUEUE_STORAGE_FAULTS'): FaultSettings | undefined {
  const text = (raw ?? '').trim();
  if (text === '') return undefined;
  const out: FaultSettings = {
    seed: 1,
    pages: 0,
    ambiguous: 0,
    throttle: 0,
    lostReceive: 0,
    skewMs: 0,
    instance: 0,
    retries: SDK_RETRIES,
    backoffMs: SDK_BACKOFF_MS,
  };
  for (const part of text.split(/\s+/)) {
    const eq = part.indexOf('=');
    const key = eq < 0 ? part : part.slice(0, eq);
    const value = eq < 0 ? '' : part.slice(eq + 1);
    const n = Number(value);
    if (key in PROBABILITIES) {
      if (value === '' || !Number.isFinite(n) || n < 0 || n > 1)
        throw new Error(`setting ${setting}: ${key} must be a probability from 0 to 1, got '${value}'`);
      out[PROBABILITIES[key as keyof typeof PROBABILITIES]] = n;
    } else if (key in COUNTS) {
      if (value === '' || !Number.isInteger(n) || n < 0) throw new Error(`setting ${setting}: ${key} must be a whole number, got '${value}'`);
      out[COUNTS[key as keyof typeof COUNTS]] = n;
    } else {
      const known = [...Object.keys(PROBABILITIES), ...Object.keys(COUNTS)].join(', ');
      throw new Error(`setting ${setting}: unknown key '${key}' (known: ${known})`);
    }
  }
  return out;
}

/** Values of the SAS `spr` field (Azure and Azurite reject a request whose scheme it excludes). */
export const SAS_PROTOCOLS = ['https', 'https,http'] as const;
export type SasProtocol = (typeof SAS_PROTOCOLS)[number];

/** Default claim timeout: workers reclaim about 3 minutes before takenUntil, so keep it well above that. */
const DEFAULT_CLAIM_TIMEOUT_S = 1200;
/** The real queue's long-poll; the JS client times out a request after 30 s. */
const DEFAULT_CLAIM_WORK_POLL_S = 20;
/** Five minutes without a reaper pass: many missed runs of any sensible schedule, so it is down. */
const DEFAULT_REAPER_STALE_S = 300;
/** Grace after a deadline so a worker reporting at the last second still wins. */
const DEFAULT_DEADLINE_DELAY_S = 60;

function num(env: NodeJS.ProcessEnv, name: string, dflt: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return dflt;
  const v = Number(raw);
  if (!Number.isFinite(v) || v < 0) throw new Error(`setting ${name} must be a non-negative number, got '${raw}'`);
  return v;
}

/** Every 10 s: expired claims and deadlines are handled within seconds; an idle pass costs a few transactions. */
const DEFAULT_REAPER_SCHEDULE = '*/10 * * * * *';

/** An NCRONTAB setting; an invalid one stops start-up rather than running the timer at some other time. */
function schedule(env: NodeJS.ProcessEnv, name: string, dflt: string): string {
  const v = env[name] || dflt;
  try {
    parseSchedule(v);
  } catch (err) {
    throw new Error(`setting ${name}: ${(err as Error).message}`, { cause: err });
  }
  return v;
}

function required(env: NodeJS.ProcessEnv, name: string): string {
  const v = env[name];
  if (!v) throw new Error(`setting ${name} is required`);
  // Azure leaves the literal reference in place when a Key Vault reference fails to resolve.
  if (v.startsWith('@Microsoft.KeyVault(')) throw new Error(`setting ${name} is an unresolved Key Vault reference`);
  return v;
}

/** Base64 with its padding: what every Azure account key is (64 bytes, 88 characters). */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Refuses a connection string whose AccountKey is not base64, naming the setting, before any network
 * call: the SDKs' own message for it speaks of endpoints or SAS ("Invalid QueueEndpoint in the
 * provided SAS Connection String"), or it fails later at the first signed call. The key is not shown.
 */
export function checkAccountKey(connection: string, setting: string): string {
  const m = /(?:^|;)\s*AccountKey=([^;]*)/i.exec(connection);
  if (!m) return connection;
  const key = m[1].trim();
  if (key !== '' && BASE64.test(key)) return connection;
  const what = key === '' ? 'is empty' : `(${key.length} characters) is not base64`;
  throw new Error(
    `setting ${setting}: its AccountKey ${what}, so it is not a storage account key; copy key1 or key2 whole (the portal's Access keys, or \`az storage account keys list\`)`,
  );
}

/**
 * One account of QUEUE_AZURE_ACCOUNTS: signed with its key (an account-key connection string), or
 * reached through the app's managed identity (`{"identity": true, ...}`, no key in the settings).
 */
export type DelegatedAccountSetting = { kind: 'key'; connection: string } | IdentityAccountSetting;

export interface IdentityAccountSetting {
  kind: 'identity';
  /** The storage account's own name: resourceId's last segment, else the name clients give it. */
  accountName: string;
  blobEndpoint: string;
  tableEndpoint: string;
  /** Client id of the user-assigned identity; unset: DefaultAzureCredential's own choice (a system-assigned identity). */
  clientId?: string;
  /** ARM id of the account: with it, table SAS are signed with the key read through ARM's listKeys (tables have no user delegation SAS in the SDK). */
  resourceId?: string;
  /** Azure Resource Manager's endpoint (a sovereign cloud's, or a test's). */
  managementEndpoint: string;
}

const AZURE_ACCOUNTS_SHAPE =
  'a JSON object of account name to an account-key connection string or {"identity": true, "clientId"?, "resourceId"?, "blobEndpoint"?, "tableEndpoint"?, "managementEndpoint"?}';
/** Azure's storage account names. */
const STORAGE_ACCOUNT_NAME = /^[a-z0-9]{3,24}$/;
/** ARM's id of a storage account; the account name is the last segment. */
const STORAGE_ACCOUNT_ID = /^\/subscriptions\/[^/]+\/resourceGroups\/[^/]+\/providers\/Microsoft\.Storage\/storageAccounts\/([^/]+)$/i;
const IDENTITY_FIELDS = ['identity', 'clientId', 'resourceId', 'blobEndpoint', 'tableEndpoint', 'managementEndpoint'];
/** Public Azure; another cloud's endpoints are given with the account. */
const STORAGE_SUFFIX = 'core.windows.net';
const MANAGEMENT_ENDPOINT = 'https://management.azure.com';

/** An https URL without its trailing slashes: the identity's bearer tokens are refused over http (by Azure and the SDKs alike). */
function httpsUrl(v: unknown, what: string): string {
  let url: URL | undefined;
  try {
    url = typeof v === 'string' ? new URL(v) : undefined;
  } catch {
    // reported below
  }
  if (url?.protocol !== 'https:') throw new Error(`${what} must be an https URL, got ${JSON.stringify(v)}`);
  return (v as string).replace(/\/+$/, '');
}

function identityAccount(name: string, v: Record<string, unknown>): IdentityAccountSetting {
  const where = `setting QUEUE_AZURE_ACCOUNTS (${name})`;
  const unknown = Object.keys(v).filter((k) => !IDENTITY_FIELDS.includes(k));
  if (unknown.length) throw new Error(`${where}: unknown field ${unknown.join(', ')} (known: ${IDENTITY_FIELDS.join(', ')})`);
  if (v.identity !== true) throw new Error(`${where}: an account reached through the app's identity says "identity": true`);
  for (const f of ['clientId', 'resourceId'] as const) {
    if (v[f] !== undefined && (typeof v[f] !== 'string' || v[f] === '')) throw new Error(`${where}: ${f} must be a non-empty string`);
  }
  const resourceId = v.resourceId as string | undefined;
  const fromId = resourceId === undefined ? undefined : STORAGE_ACCOUNT_ID.exec(resourceId);
  if (fromId === null) {
    throw new Error(`${where}: resourceId must be /subscriptions/<id>/resourceGroups/<group>/providers/Microsoft.Storage/storageAccounts/<account>`);
  }
  const accountName = fromId?.[1] ?? name;
  if (!STORAGE_ACCOUNT_NAME.test(accountName)) {
    throw new Error(
      `${where}: '${accountName}' is not a storage account name (3-24 lowercase letters and digits); name the account by it, or give its resourceId`,
    );
  }
  const endpoint = (field: string, service: string) =>
    v[field] === undefined ? `https://${accountName}.${service}.${STORAGE_SUFFIX}` : httpsUrl(v[field], `${where}: ${field}`);
  return {
    kind: 'identity',
    accountName,
    blobEndpoint: endpoint('blobEndpoint', 'blob'),
    tableEndpoint: endpoint('tableEndpoint', 'table'),
    clientId: v.clientId as string | undefined,
    resourceId,
    managementEndpoint: v.managementEndpoint === undefined ? MANAGEMENT_ENDPOINT : httpsUrl(v.managementEndpoint, `${where}: managementEndpoint`),
  };
}

function keyConnection(name: string, connection: string): string {
  if (!/(?:^|;)\s*AccountName=[^;]+/i.test(connection) || !/(?:^|;)\s*AccountKey=/i.test(connection)) {
    throw new Error(`setting QUEUE_AZURE_ACCOUNTS (${name}): its connection string needs AccountName and AccountKey, or use {"identity": true}`);
  }
  return checkAccountKey(connection, `QUEUE_AZURE_ACCOUNTS (${name})`);
}

/** QUEUE_AZURE_ACCOUNTS: a JSON object, account name as clients give it → a connection string or the identity form. */
function azureAccountsOf(raw: string | undefined): Record<string, DelegatedAccountSetting> {
  if (!raw?.trim()) return {};
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    throw new Error(`setting QUEUE_AZURE_ACCOUNTS must be ${AZURE_ACCOUNTS_SHAPE}`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error(`setting QUEUE_AZURE_ACCOUNTS must be ${AZURE_ACCOUNTS_SHAPE}`);
  const out: Record<string, DelegatedAccountSetting> = {};
  for (const [name, c] of Object.entries(v)) {
    if (typeof c === 'string') out[name] = { kind: 'key', connection: keyConnection(name, c) };
    else if (typeof c === 'object' && c !== null && !Array.isArray(c)) out[name] = identityAccount(name, c as Record<string, unknown>);
    else throw new Error(`setting QUEUE_AZURE_ACCOUNTS (${name}): must be a connection string or {"identity": true, ...}`);
  }
  return out;
}

/** Every setting the code reads, for the deployment cross-check. */
export const SETTING_NAMES = [
  'QUEUE_STORAGE_CONNECTION',
  'QUEUE_STORAGE_MORE_CONNECTIONS',
  'QUEUE_AZURE_ACCOUNTS',
  'QUEUE_STORAGE_PREFIX',
  'QUEUE_PUBLIC_URL',
  'QUEUE_ROOT_CLIENT_ID',
  'QUEUE_ROOT_ACCESS_TOKEN',
  'QUEUE_TOKEN_ENCRYPTION_KEY',
  'QUEUE_ISSUER_CLIENT_ID',
  'QUEUE_CLAIM_TIMEOUT_S',
  'QUEUE_CLAIM_WORK_POLL_S',
  'QUEUE_DEADLINE_DELAY_S',
  'QUEUE_REAPER_SCHEDULE',
  'QUEUE_REAPER_STALE_S',
  'QUEUE_PUBLIC_QUEUE_ENDPOINT',
  'QUEUE_MAX_TASK_DEADLINE_DAYS',
  'QUEUE_SAS_PROTOCOL',
  'QUEUE_EVENTGRID_ENDPOINT',
  'QUEUE_EVENTGRID_KEY',
  'QUEUE_EVENTGRID_CLIENT_ID',
  'QUEUE_PENDING_SHARDS',
] as const;

/** Settings for development and tests only, never deployed: the faithful storage mode's faults. */
export const DEV_SETTING_NAMES = ['QUEUE_STORAGE_FAULTS'] as const;

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const keyRaw = required(env, 'QUEUE_TOKEN_ENCRYPTION_KEY');
  const key = Buffer.from(keyRaw, 'base64');
  if (key.length !== 32) throw new Error('setting QUEUE_TOKEN_ENCRYPTION_KEY must be 32 bytes, base64-encoded');
  const rootAccessToken = required(env, 'QUEUE_ROOT_ACCESS_TOKEN');
  if (rootAccessToken.length < 22) throw new Error('setting QUEUE_ROOT_ACCESS_TOKEN must be at least 22 characters');
  const sasProtocol = env.QUEUE_SAS_PROTOCOL || undefined;
  if (sasProtocol !== undefined && !(SAS_PROTOCOLS as readonly string[]).includes(sasProtocol)) {
    throw new Error(`setting QUEUE_SAS_PROTOCOL must be one of ${SAS_PROTOCOLS.join(' | ')}, got '${sasProtocol}'`);
  }
  const publicUrl = required(env, 'QUEUE_PUBLIC_URL').replace(/\/+$/, '');
  new URL(publicUrl); // throws on a malformed URL
  return {
    storageConnection: checkAccountKey(required(env, 'QUEUE_STORAGE_CONNECTION'), 'QUEUE_STORAGE_CONNECTION'),
    // Whitespace-separated: connection strings hold ';' and '=', never whitespace.
    moreStorageConnections: (env.QUEUE_STORAGE_MORE_CONNECTIONS ?? '')
      .split(/\s+/)
      .filter((c) => c !== '')
      .map((c, i) => checkAccountKey(c, `QUEUE_STORAGE_MORE_CONNECTIONS (connection ${i + 1})`)),
    azureAccounts: azureAccountsOf(env.QUEUE_AZURE_ACCOUNTS),
    storagePrefix: (env.QUEUE_STORAGE_PREFIX || 'tcq').toLowerCase(),
    publicUrl,
    rootClientId: env.QUEUE_ROOT_CLIENT_ID || 'static/root',
    rootAccessToken,
    tokenEncryptionKey: key,
    issuerClientId: env.QUEUE_ISSUER_CLIENT_ID || 'static/taskcluster/queue',
    claimTimeoutS: num(env, 'QUEUE_CLAIM_TIMEOUT_S', DEFAULT_CLAIM_TIMEOUT_S),
    claimWorkPollS: num(env, 'QUEUE_CLAIM_WORK_POLL_S', DEFAULT_CLAIM_WORK_POLL_S),
    deadlineDelayS: num(env, 'QUEUE_DEADLINE_DELAY_S', DEFAULT_DEADLINE_DELAY_S),
    reaperSchedule: schedule(env, 'QUEUE_REAPER_SCHEDULE', DEFAULT_REAPER_SCHEDULE),
    reaperStaleS: num(env, 'QUEUE_REAPER_STALE_S', DEFAULT_REAPER_STALE_S),
    publicQueueEndpoint: env.QUEUE_PUBLIC_QUEUE_ENDPOINT || undefined,
    maxTaskDeadlineDays: num(env, 'QUEUE_MAX_TASK_DEADLINE_DAYS', 5),
    sasProtocol: sasProtocol as SasProtocol | undefined,
    eventGridEndpoint: env.QUEUE_EVENTGRID_ENDPOINT || undefined,
    eventGridKey: env.QUEUE_EVENTGRID_KEY || undefined,
    eventGridClientId: env.QUEUE_EVENTGRID_CLIENT_ID || undefined,
    pendingShards: pendingShards(env),
    storageFaults: parseFaults(env.QUEUE_STORAGE_FAULTS),
  };
}
