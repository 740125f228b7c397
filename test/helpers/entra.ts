/**
 * What the managed-identity path needs locally: a self-signed certificate for 127.0.0.1 (bearer
 * tokens travel over HTTPS only, in the SDKs and in Azurite alike) and a fake Entra ID credential
 * whose tokens Azurite's `--oauth basic` accepts (it checks claims, not signatures).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AccessToken, TokenCredential } from '@azure/identity';

export interface Certificate {
  certPath: string;
  keyPath: string;
  /** The certificate (PEM), to trust as its own CA. */
  cert: string;
  dir: string;
}

/** A certificate for IP 127.0.0.1, valid a day, made by openssl in a fresh temporary folder. */
export function selfSignedCertificate(): Certificate {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tcq-tls-'));
  const certPath = path.join(dir, 'cert.pem');
  const keyPath = path.join(dir, 'key.pem');
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1'].concat([
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      keyPath,
      '-out',
      certPath,
    ]),
    { stdio: 'ignore' },
  );
  return { certPath, keyPath, cert: fs.readFileSync(certPath, 'utf8'), dir };
}

const b64url = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

/** A managed identity's claims, as Azure puts them in its tokens. */
export const FAKE_IDENTITY = { oid: '11111111-2222-4333-8444-555555555555', tid: '66666666-7777-4888-9999-aaaaaaaaaaaa' };

/** A TokenCredential answering unsigned JWTs for the asked scope's audience; it records the scopes asked for. */
export class FakeCredential implements TokenCredential {
  readonly scopes: string[] = [];

  async getToken(scopes: string | string[]): Promise<AccessToken> {
    const scope = ([] as string[]).concat(scopes)[0];
    this.scopes.push(scope);
    // Azurite checks the token's lifetime against its own (real) clock.
    const now = Math.floor(Date.now() / 1000);
    const claims = {
      aud: scope.replace(/\/\.default$/, ''),
      iss: `https://sts.windows.net/${FAKE_IDENTITY.tid}/`,
      iat: now - 60,
      nbf: now - 60,
      exp: now + 3600,
      ...FAKE_IDENTITY,
    };
    return { token: `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url(claims)}.unsigned`, expiresOnTimestamp: (now + 3600) * 1000 };
  }
}
