/**
 * The per-process services singleton used by the Azure Functions entry points.
 */
import { loadConfig } from './config';
import { Services, buildServices } from './services';
import { startPollers } from './work/runtime-hooks';

let services: Promise<Services> | undefined;

export function getServices(): Promise<Services> {
  services ??= buildServices(loadConfig(process.env))
    .then((svc) => {
      startPollers(svc);
      return svc;
    })
    .catch((err) => {
      services = undefined; // let the next invocation retry (e.g. storage was briefly unreachable)
      throw err;
    });
  return services;
}
