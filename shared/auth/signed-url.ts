/**
 * URLs this service signs for a caller it has already authorized: a bewit of temporary credentials
 * that hold only the scopes the URL needs, minted by the queue's issuer client.
 */
import * as hawk from 'hawk';
import { createTemporaryCredentials } from './certificate';

/** As Taskcluster's index signs its redirects to the queue. */
export const SIGNED_URL_TTL_S = 15 * 60;

export function signedUrl(url: string, opts: { issuer: { clientId: string; accessToken: string }; clientId: string; scopes: string[]; now: Date }): string {
  const creds = createTemporaryCredentials({
    clientId: opts.clientId,
    start: opts.now,
    expiry: new Date(opts.now.getTime() + SIGNED_URL_TTL_S * 1000),
    scopes: opts.scopes,
    issuer: opts.issuer,
  });
  const ext = Buffer.from(JSON.stringify({ certificate: JSON.parse(creds.certificate!) })).toString('base64');
  const bewit = hawk.uri.getBewit(url, {
    credentials: { id: creds.clientId, key: creds.accessToken, algorithm: 'sha256' },
    ttlSec: SIGNED_URL_TTL_S,
    ext,
    localtimeOffsetMsec: opts.now.getTime() - Date.now(),
  });
  return `${url}${url.includes('?') ? '&' : '?'}bewit=${bewit}`;
}
