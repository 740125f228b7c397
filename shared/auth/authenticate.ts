/**
 * Verifies a request's Hawk header or bewit the way Taskcluster's auth service does, and returns
 * the caller's fully expanded scopes (with `assume:anonymous` merged in, unless told otherwise:
 * testAuthenticate's test client holds only its own scopes).
 */
import hawk from 'hawk';
import { ClientStore } from './clients';
import { CERT_DRIFT_MS, Certificate, MAX_CERT_LIFETIME_MS, certificateSignature, constantTimeEqual, temporaryAccessToken } from './certificate';
import { satisfies, validScope } from './scopes';
import { authFailed } from '../errors';

/** Hawk timestamp tolerance, as Taskcluster allows (the hawk default is 60 s). */
export const HAWK_SKEW_S = 15 * 60;

/**
 * Characters Node's legacy URL parser percent-encodes wherever they appear. Hawk's client parses
 * the URL with it before signing, while the HTTP client sends the URL as WHATWG parsing leaves it:
 * `encodeURIComponent` keeps `'` in a path parameter, WHATWG keeps it on the wire, and the
 * signature covers `%27`.
 */
const LEGACY_ESCAPED = /['{}|\\^`"<> \t\r\n]/g;

/**
 * The forms of a resource a correct client may have signed: as sent, and as Hawk's own client
 * parser rewrites it. Each rewrite is a character's own percent-encoding, so both forms name the
 * same resource. (That parser also turns a backslash in the path into `/`, a different resource:
 * not followed; clients encode backslashes in parameters.)
 */
export function signedForms(resource: string): string[] {
  const legacy = resource.replace(LEGACY_ESCAPED, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`);
  return legacy === resource ? [resource] : [resource, legacy];
}

/** Runs a Hawk check against each signed form of the resource; the first form's error if none passes. */
async function anyForm(resource: string, check: (url: string) => Promise<unknown>): Promise<void> {
  let first: unknown;
  for (const url of signedForms(resource)) {
    try {
      await check(url);
      return;
    } catch (e) {
      first ??= e;
    }
  }
  throw first;
}

export interface AuthRequest {
  method: string;
  /** Path and query exactly as the client sent them. */
  resource: string;
  host: string;
  port: number;
  authorization?: string;
  contentType?: string;
}

export interface Caller {
  clientId?: string;
  scopes: string[];
  expires?: Date;
}

interface Ext {
  certificate?: Certificate;
  authorizedScopes?: string[];
}

function parseExt(ext: string | undefined): Ext {
  if (!ext) return {};
  try {
    const v = JSON.parse(Buffer.from(ext, 'base64').toString('utf8'));
    if (typeof v !== 'object' || v === null) throw new Error();
    return v as Ext;
  } catch {
    throw authFailed('Failed to parse ext');
  }
}

function isScopeList(x: unknown): x is string[] {
  return Array.isArray(x) && x.every((s) => typeof s === 'string' && validScope(s));
}

/** Where credentials are looked up and scopes expanded: the client store, or testAuthenticate's fixed test client. */
export type ClientSource = Pick<ClientStore, 'client' | 'expand'>;

export interface AuthenticatorOptions {
  /** Whether every caller also holds the `anonymous` role (false: only the client's own scopes count). */
  anonymousRole?: boolean;
}

export class Authenticator {
  constructor(
    private readonly clients: ClientSource,
    private readonly now: () => Date = () => new Date(),
    private readonly opts: AuthenticatorOptions = {},
  ) {}

  /** The scopes everyone holds, added to each caller's. */
  private get everyone(): string[] {
    return this.opts.anonymousRole === false ? [] : ['assume:anonymous'];
  }

  /** Scopes of a caller without credentials. */
  async anonymous(): Promise<Caller> {
    return { scopes: await this.clients.expand(this.everyone) };
  }

  async authenticate(req: AuthRequest): Promise<Caller> {
    const hasBewit = /^\/.*[?&]bewit=/.test(req.resource);
    if (req.authorization && hasBewit) {
      throw authFailed('Cannot use two authentication schemes at once: an Authorization header and a bewit');
    }
    if (hasBewit) return this.bewit(req);
    if (!req.authorization) return this.anonymous();
    return this.header(req);
  }

  private async header(req: AuthRequest): Promise<Caller> {
    let attrs: { id?: string; ext?: string };
    try {
      attrs = hawk.utils.parseAuthorizationHeader(req.authorization);
    } catch (e) {
      throw authFailed(`Invalid Authorization header: ${(e as Error).message}`);
    }
    if (!attrs.id) throw authFailed('Missing attributes in the Hawk header');
    const ext = parseExt(attrs.ext);
    const { key, caller } = await this.resolve(attrs.id, ext);
    try {
      await anyForm(req.resource, (url) =>
        hawk.server.authenticate(
          {
            method: req.method,
            url,
            headers: { authorization: req.authorization, host: `${req.host}:${req.port}`, 'content-type': req.contentType ?? '' },
          },
          async () => ({ key, algorithm: 'sha256' }),
          { host: req.host, port: req.port, timestampSkewSec: HAWK_SKEW_S },
        ),
      );
    } catch (e) {
      throw authFailed(`Unauthorized: ${hawkMessage(e)}`);
    }
    return caller;
  }

  private async bewit(req: AuthRequest): Promise<Caller> {
    if (req.method !== 'GET' && req.method !== 'HEAD') throw authFailed('bewit authentication is only allowed for GET and HEAD');
    const m = req.resource.match(/[?&]bewit=([^&]*)/);
    let id: string;
    let extRaw: string;
    try {
      const parts = Buffer.from(decodeURIComponent(m![1]), 'base64url').toString('utf8').split('\\');
      id = parts[0];
      extRaw = parts[3] ?? '';
    } catch {
      throw authFailed('Invalid bewit encoding');
    }
    const ext = parseExt(extRaw);
    const { key, caller } = await this.resolve(id, ext);
    try {
      await anyForm(req.resource, (url) =>
        hawk.uri.authenticate({ method: req.method, url, headers: { host: `${req.host}:${req.port}` } }, async () => ({ key, algorithm: 'sha256' }), {
          host: req.host,
          port: req.port,
        }),
      );
    } catch (e) {
      throw authFailed(`Unauthorized: ${hawkMessage(e)}`);
    }
    return caller;
  }

  /** Credential resolution: client lookup, certificate, authorizedScopes, role expansion. */
  private async resolve(id: string, ext: Ext): Promise<{ key: string; caller: Caller }> {
    const now = this.now().getTime();
    const cert = ext.certificate;
    const issuerId = cert && typeof cert === 'object' && cert.issuer ? cert.issuer : id;
    if (cert && cert.issuer !== undefined && cert.issuer === id) {
      throw authFailed('ext.certificate.issuer must differ from the supplied clientId');
    }
    const client = await this.clients.client(issuerId);
    if (!client) throw authFailed(`Client with clientId '${issuerId}' not found`);
    if (client.disabled) throw authFailed(`Client with clientId '${issuerId}' is disabled`);
    if (client.expires.getTime() < now) throw authFailed(`Client with clientId '${issuerId}' has expired`);

    let scopes = await this.clients.expand(client.scopes);
    let key = client.accessToken;
    let expires = client.expires;

    if (cert) {
      if (typeof cert !== 'object') throw authFailed('ext.certificate must be a JSON object');
      if (cert.version !== 1) throw authFailed('ext.certificate.version must be 1');
      if (typeof cert.seed !== 'string' || cert.seed.length !== 44) throw authFailed('ext.certificate.seed must be a string of 44 characters');
      if (typeof cert.start !== 'number' || typeof cert.expiry !== 'number') throw authFailed('ext.certificate.start and expiry must be numbers');
      if (!isScopeList(cert.scopes)) throw authFailed('ext.certificate.scopes must be an array of valid scopes');
      if (typeof cert.signature !== 'string') throw authFailed('ext.certificate.signature must be a string');
      if (cert.start > now + CERT_DRIFT_MS) throw authFailed('ext.certificate.start > now');
      if (cert.expiry < now - CERT_DRIFT_MS) throw authFailed('ext.certificate.expiry < now');
      if (cert.expiry - cert.start > MAX_CERT_LIFETIME_MS) throw authFailed('ext.certificate cannot last longer than 31 days!');
      const named = cert.issuer !== undefined;
      if (named && !satisfies(scopes, `auth:create-client:${id}`)) {
        throw authFailed(`ext.certificate issuer \`${issuerId}\` doesn't have \`auth:create-client:${id}\` for supplied clientId.`);
      }
      if (!named && (cert as unknown as Record<string, unknown>).clientId !== undefined) {
        throw authFailed('ext.certificate.clientId must only be used with ext.certificate.issuer');
      }
      if (!satisfies(scopes, { AllOf: cert.scopes })) {
        throw authFailed('ext.certificate issuer lacks the scopes the certificate grants');
      }
      const expected = certificateSignature(client.accessToken, cert, named ? id : undefined);
      if (!constantTimeEqual(expected, cert.signature)) {
        throw authFailed(named ? 'ext.certificate.signature is not valid, or wrong clientId provided' : 'ext.certificate.signature is not valid');
      }
      key = temporaryAccessToken(client.accessToken, cert.seed);
      scopes = cert.scopes;
      if (cert.expiry < expires.getTime()) expires = new Date(cert.expiry);
    }

    if (ext.authorizedScopes !== undefined) {
      if (!isScopeList(ext.authorizedScopes)) throw authFailed('ext.authorizedScopes must be an array of valid scopes');
      const held = await this.clients.expand([...scopes, ...this.everyone]);
      if (!satisfies(held, { AllOf: ext.authorizedScopes })) {
        throw authFailed('Supplied credentials do not satisfy authorizedScopes; credentials have scopes: ' + JSON.stringify(held));
      }
      scopes = ext.authorizedScopes;
    }

    scopes = await this.clients.expand([...scopes, ...this.everyone]);
    return { key, caller: { clientId: id, scopes, expires } };
  }
}

function hawkMessage(e: unknown): string {
  const err = e as { output?: { payload?: { message?: string } }; message?: string };
  return err?.output?.payload?.message || err?.message || 'Bad request';
}
