/**
 * The health routes every service of this app answers, as Taskcluster's services do: the load
 * balancer's check (the process answers) and the heartbeat (storage and the reaper).
 */
import { RouteDef, ok } from '../types';
import { checkHealth } from '../../ops/health';

/** A load balancer's check of one service of this app: the process answers. */
export function lbheartbeatRoute(service: RouteDef['service']): RouteDef {
  return {
    name: 'lbheartbeat',
    title: 'Load Balancer Heartbeat',
    description: 'Respond without doing anything, for load balancers to check that the process is alive.',
    stability: 'stable',
    output: 'empty-response',
    service,
    method: 'GET',
    route: '/__lbheartbeat__',
    scopes: null,
    handler: async () => ok({}),
  };
}

/** The heartbeat of one service of this app: storage answers and the reaper has finished a pass recently (500 otherwise). */
export function heartbeatRoute(service: RouteDef['service']): RouteDef {
  return {
    name: 'heartbeat',
    title: 'Heartbeat',
    description: 'Whether the service is healthy: storage answers and the reaper has finished a pass recently (500 otherwise).',
    stability: 'stable',
    output: 'heartbeat-response',
    service,
    method: 'GET',
    route: '/__heartbeat__',
    scopes: null,
    handler: async (req) => {
      const h = await checkHealth(req.services);
      if (h.healthy) return ok(h);
      return { status: 500, body: { ...h, code: 'InternalServerError', message: `unhealthy: ${h.problems.join('; ')}` } };
    },
  };
}
