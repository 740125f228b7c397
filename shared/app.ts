/**
 * The one way to start the service: config -> services (with the claimWork pollers attached), the
 * route table and the timer functions. The Azure entry (functions/ via shared/runtime.ts), the
 * local host, the bench, the demo and the tests all start through `createApp`.
 */
import type { Config } from './config';
import { buildServices, Services, ServiceOptions } from './services';
import { routes as routeTable } from './api/route-table';
import type { RouteDef } from './api/types';
import { validate } from './api/schemas';
import { timerFunctions, TimerFunction } from './reaper/timers';

/** What tests and the bench tune: logger, clock, message leases. */
export type AppOptions = ServiceOptions;

export interface App {
  /** The route table (static, so Azure can register it before any service exists). */
  routes: RouteDef[];
  /** The timer functions; their handlers use `services()`. */
  timers: TimerFunction[];
  /** The services, built once on first use; a failed build is retried by the next call. */
  services(): Promise<Services>;
  /** Stops the claimWork pollers (waiting claimWork calls answer `{tasks: []}` now), then waits for background work and queued index writes. */
  close(): Promise<void>;
}

/**
 * `config` may be a function so that the Azure entry reads settings on the first invocation, not at
 * registration (a missing setting then fails requests with a logged error instead of the host start).
 */
export function createApp(config: Config | (() => Config), options: AppOptions = {}): App {
  let built: Promise<Services> | undefined;
  const services = (): Promise<Services> => {
    built ??= buildServices(typeof config === 'function' ? config() : config, { ...options, checkTask: (task) => validate('create-task-request', task) })
      .then((svc) => {
        svc.rollups.start();
        return svc;
      })
      .catch((err) => {
        built = undefined; // let the next call retry (e.g. storage was briefly unreachable)
        throw err;
      });
    return built;
  };
  const close = async () => {
    const svc = await built?.catch(() => undefined);
    svc?.pollers.stop();
    await Promise.allSettled([...(svc?.background ?? [])]);
    await svc?.indexes.settled(); // index writes are queued, not awaited by their requests
    await svc?.expiry.settled(); // so are claim-expiry rows' deletes (Triggers.drop)
    await svc?.rollups.close(); // this instance's chart tallies, the running minute's too
  };
  return { routes: routeTable, timers: timerFunctions(services), services, close };
}

/** createApp, with the services built now (local host, bench, demo, tests). */
export async function startApp(config: Config, options: AppOptions = {}): Promise<App & { svc: Services }> {
  const app = createApp(config, options);
  return { ...app, svc: await app.services() };
}
