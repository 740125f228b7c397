/**
 * Service instances for the benchmark: each is the real service (route table, local host, pollers)
 * with its own Services — and so its own storage meter — on one shared embedded Azurite, so a phase
 * counts only the storage calls it caused.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { loadConfig } from '../shared/config';
import type { Services } from '../shared/services';
import { startApp } from '../shared/app';
import { startHost, LocalHost } from '../shared/local/host';
import { freePort } from '../shared/local/azurite';
import { generateAccessToken } from '../shared/auth/clients';
import type { Logger } from '../shared/log';
import { Credentials, QueueFactory, queueFactory } from './client';
import type { LoadProcess } from './load';

export { newTaskId, sleep, taskDef, taskcluster } from './client';
export type { Credentials } from './client';

/** Secrets shared by instances that serve one deployment (same storage names). */
export interface Deployment {
  connection: string;
  prefix: string;
  rootAccessToken: string;
  encryptionKey: string;
  /** The Azurite process behind `connection`, whose CPU the phases read from /proc. */
  azuritePid?: number;
}

export interface Instance {
  name: string;
  rootUrl: string;
  services: Services;
  host: LocalHost;
  log: ReturnType<typeof benchLogger>;
  /** A v87 Queue client; root credentials unless others are given. */
  queue: QueueFactory;
  /** The deployment's root credentials (for the load process). */
  root: Credentials;
  /** The load generator's process, where the phases that measure CPU run their clients. */
  load?: LoadProcess;
  azuritePid?: number;
  close(): Promise<void>;
}

export function newDeployment(connection: string, label: string, azuritePid?: number): Deployment {
  return {
    connection,
    azuritePid,
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

export async function startInstance(name: string, dep: Deployment, env: Record<string, string> = {}, load?: LoadProcess): Promise<Instance> {
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
  const root = { clientId: config.rootClientId, accessToken: dep.rootAccessToken };
  return {
    name,
    rootUrl,
    services,
    host,
    log,
    queue: await queueFactory(rootUrl, root),
    root,
    load,
    azuritePid: dep.azuritePid,
    close: async () => {
      await app.close();
      await host.close();
    },
  };
}

/**
 * Peak RSS of this process: the kernel's high-water mark where /proc has it, else sampled. The
 * sampling would run in the service's process and cost it CPU (up to 5 % of a loop's at 100 ms),
 * so it runs only where the kernel cannot say.
 */
export class RssSampler {
  peak = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(intervalMs = 100) {
    this.sample();
    if (peakRssOf('self') !== undefined) return;
    this.timer = setInterval(() => this.sample(), intervalMs);
    this.timer.unref();
  }

  sample(): void {
    this.peak = Math.max(this.peak, process.memoryUsage.rss(), peakRssOf('self') ?? 0);
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
