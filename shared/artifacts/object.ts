/**
 * Object artifacts: their data lives in the Object API (shared/objects), under
 * `t/<taskId>/<runId>/<name>`; the queue hands out temporary credentials for exactly that object.
 */
import { createTemporaryCredentials, Credentials } from '../auth/certificate';
import { objectNameFor } from './model';

/** Upload credentials last at most a day (Taskcluster's), or until the artifact expires if sooner. */
export const UPLOAD_CREDENTIALS_TTL_MS = 24 * 3600 * 1000;
/** Download credentials last an hour (Taskcluster's). */
export const DOWNLOAD_CREDENTIALS_TTL_MS = 3600 * 1000;

export type Issuer = { clientId: string; accessToken: string };

/** Credentials that can only upload (createUpload, finishUpload) this artifact's object. */
export function uploadCredentials(
  issuer: Issuer,
  a: { taskId: string; runId: number; name: string; projectId: string; expires: string; workerGroup: string; workerId: string },
  now: Date,
): Credentials {
  const expiry = Math.min(new Date(a.expires).getTime(), now.getTime() + UPLOAD_CREDENTIALS_TTL_MS);
  return createTemporaryCredentials({
    clientId: `artifact-upload/${a.taskId}/${a.runId}/on/${a.workerGroup}/${a.workerId}`,
    start: now,
    expiry: new Date(expiry),
    scopes: [`object:upload:${a.projectId}:${objectNameFor(a.taskId, a.runId, a.name)}`],
    issuer,
  });
}

/** Credentials that can only download this artifact's object. */
export function downloadCredentials(issuer: Issuer, a: { taskId: string; runId: number; name: string }, now: Date): Credentials {
  return createTemporaryCredentials({
    clientId: `artifact-download/${a.taskId}/${a.runId}/${a.name}`,
    start: now,
    expiry: new Date(now.getTime() + DOWNLOAD_CREDENTIALS_TTL_MS),
    scopes: [`object:download:${objectNameFor(a.taskId, a.runId, a.name)}`],
    issuer,
  });
}
