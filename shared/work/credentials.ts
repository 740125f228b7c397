/**
 * Temporary credentials for a claimed run, signed by the queue's issuer client and expiring at
 * takenUntil: enough to reclaim, resolve and upload artifacts for that run, plus the task's scopes.
 */
import { createTemporaryCredentials, Credentials } from '../auth/certificate';
import type { ClientStore } from '../auth/clients';

export function runCredentials(
  clients: ClientStore,
  run: { taskId: string; runId: number; workerGroup: string; workerId: string; takenUntil: string },
  taskScopes: string[],
  now: Date,
): Required<Credentials> {
  const until = new Date(run.takenUntil);
  const { taskId, runId } = run;
  return createTemporaryCredentials({
    clientId: `task-client/${taskId}/${runId}/on/${run.workerGroup}/${run.workerId}/until/${until.getTime() / 1000}`,
    start: now,
    expiry: until,
    scopes: [`queue:reclaim-task:${taskId}/${runId}`, `queue:resolve-task:${taskId}/${runId}`, `queue:create-artifact:${taskId}/${runId}`, ...taskScopes],
    issuer: clients.issuer,
  }) as Required<Credentials>;
}
