/**
 * Taskcluster temporary credentials: the certificate format, its signature and the derived
 * access token. Used both to verify certificates clients send and to mint run credentials.
 */
import crypto from 'node:crypto';
import * as slugid from 'slugid';

export interface Certificate {
  version: number;
  scopes: string[];
  start: number;
  expiry: number;
  seed: string;
  signature: string;
  issuer?: string;
}

export interface Credentials {
  clientId: string;
  accessToken: string;
  certificate?: string;
}

/** Certificates may span at most 31 days. */
export const MAX_CERT_LIFETIME_MS = 31 * 24 * 3600 * 1000;
/** Tolerance for clock drift on certificate start and expiry. */
export const CERT_DRIFT_MS = 5 * 60 * 1000;

export function certificateSignature(issuerAccessToken: string, cert: Omit<Certificate, 'signature'>, clientId?: string): string {
  const lines = ['version:' + cert.version];
  if (clientId !== undefined) {
    lines.push('clientId:' + clientId);
    lines.push('issuer:' + cert.issuer);
  }
  lines.push('seed:' + cert.seed, 'start:' + cert.start, 'expiry:' + cert.expiry, 'scopes:', ...cert.scopes);
  return crypto.createHmac('sha256', issuerAccessToken).update(lines.join('\n')).digest('base64');
}

export function temporaryAccessToken(issuerAccessToken: string, seed: string): string {
  return crypto.createHmac('sha256', issuerAccessToken).update(seed).digest('base64').replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** Mints named temporary credentials (`clientId` differs from the issuer). */
export function createTemporaryCredentials(opts: {
  clientId: string;
  start: Date;
  expiry: Date;
  scopes: string[];
  issuer: { clientId: string; accessToken: string };
}): Credentials {
  const seed = slugid.v4() + slugid.v4();
  const cert: Omit<Certificate, 'signature'> = {
    version: 1,
    scopes: opts.scopes,
    start: opts.start.getTime(),
    expiry: opts.expiry.getTime(),
    seed,
    issuer: opts.issuer.clientId,
  };
  const signature = certificateSignature(opts.issuer.accessToken, cert, opts.clientId);
  return {
    clientId: opts.clientId,
    accessToken: temporaryAccessToken(opts.issuer.accessToken, seed),
    certificate: JSON.stringify({ ...cert, signature }),
  };
}

export function constantTimeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a);
  const bb = Buffer.from(b);
  return ab.length === bb.length && crypto.timingSafeEqual(ab, bb);
}
