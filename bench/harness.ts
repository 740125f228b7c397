/**
 * Service instances for the benchmark: each is the real service (route table, local host, pollers)
 * with its own Services — and so its own storage meter — on one shared embedded Azurite, so a phase
 * counts only the storage calls it caused.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import * as slugid from 'slugid';
import { loadConfig } from '../shared/config';
import type { Services } from '../shared/services';
import { startApp } from '../shared/app';
import { startHost, LocalHost } from '../shared/local/host';
import { freePort } from '../shared/local/azurite';
import { generateAccessToken } from '../shared/auth/clients';
import type { Logger } from '../shared/log';

/** The taskcluster-client default agent allows 50 sockets; 50 idle workers plus traffic need more. */
const CLIENT_MAX_SOCKETS = 256;

export interface Credentials {
  clientId: string;
  accessToken: string;
  certificate?: string;
}

/** Secrets shared by instances that serve one deployment (same storage names). */
export interface Deployment {
  connection: string;
  prefix: string;
  rootAccessToken: string;
  encryptionKey: string;
}

export interface Instance {
  name: string;
  rootUrl: string;
  services: Services;
  host: LocalHost;
  log: ReturnType<typeof benchLogger>;
  /** A v87 Queue client; root credentials unless others are given. */
  queue(credentials?: Credentials): any;
  close(): Promise<void>;
}

let tcModule: any;

/** taskcluster-client v87 is ESM; a dynamic import works from this CommonJS output. */
export async function taskcluster(): Promise<any> {
  if (!tcModule) {
    tcModule = (await import('taskcluster-client')).default;
    tcModule.agents.http.maxSockets = CLIENT_MAX_SOCKETS;
  }
  return tcModule;
}

export function newDeployment(connection: string, label: string): Deployment {
  return {
    connection,
    prefix: `b${label}${crypto.randomBytes(3).toString('hex')}`,
    rootAccessToken: generateAccessToken(),
    encryptionKey: crypto.randomBytes(32).toString('base64'),
  };
}

/** Counts warnings and errors (and prints the first few) without keeping records in memory. */
export function benchLogger(name: string): Logger & { warnings: number; errors: number } {
  const PRINT_LIMIT = 5;
  const log = {
    warnings: 0,
    errors: 0,
    request: () => undefined,
    info: () => undefined,
    warn: (event: string, fields?: Record<string, unknown>) => {
      if (log.warnings++ < PRINT_LIMIT) console.error(`[${name}] warn ${event}`, JSON.stringify(fields ?? {}));
    },
    error: (event: string, fields?: Record<string, unknown>) => {
      if (log.errors++ < PRINT_LIMIT) console.error(`[${name}] error ${event}`, JSON.stringify(fields ?? {}));
    },
  };
  return log;
}

export async function startInstance(name: string, dep: Deployment, env: Record<string, string> = {}): Promise<Instance> {
  const port = await freePort();
  const rootUrl = `http://localhost:${port}`;
  const config = loadConfig({
    QUEUE_STORAGE_CONNECTION: dep.connection,
    QUEUE_STORAGE_PREFIX: dep.prefix,
    QUEUE_PUBLIC_URL: rootUrl,
    QUEUE_ROOT_ACCESS_TOKEN: dep.rootAccessToken,
    QUEUE_TOKEN_ENCRYPTION_KEY: dep.encryptionKey,
    ...env,
  });
  const log = benchLogger(name);
  const app = await startApp(config, { log });
  const services = app.svc;
  // Timers are not scheduled: the reaper runs only when a phase calls it, so counts stay attributable.
  const host = await startHost({ app, port, quiet: true });
  const tc = await taskcluster();
  const root = { clientId: config.rootClientId, accessToken: dep.rootAccessToken };
  return {
    name,
    rootUrl,
    services,
    host,
    log,
    queue: (credentials = root) => new tc.Queue({ rootUrl, credentials, retries: 0 }),
    close: async () => {
      await app.close();
      await host.close();
    },
  };
}

/** A minimal valid task definition. */
export function taskDef(taskQueueId: string, deadlineInMs = 3600_000): Record<string, unknown> {
  const now = Date.now();
  return {
    taskQueueId,
    created: new Date(now).toJSON(),
    deadline: new Date(now + deadlineInMs).toJSON(),
    payload: { command: ['echo', 'hello'] },
    metadata: { name: 'bench task', description: 'a benchmark task', owner: 'bench@example.com', source: 'https://example.com/bench' },
  };
}

export const newTaskId = (): string => slugid.nice();

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Peak RSS of this process, sampled, plus the kernel's high-water mark for a pid. */
export class RssSampler {
  peak = 0;
  private timer: NodeJS.Timeout;

  constructor(intervalMs = 100) {
    this.sample();
    this.timer = setInterval(() => this.sample(), intervalMs);
    this.timer.unref();
  }

  sample(): void {
    this.peak = Math.max(this.peak, process.memoryUsage().rss);
  }

  stop(): void {
    clearInterval(this.timer);
    this.sample();
  }
}

/** VmHWM (peak resident set) of a process from /proc, in bytes; undefined where unavailable. */
export function peakRssOf(pid: number | 'self'): number | undefined {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}
