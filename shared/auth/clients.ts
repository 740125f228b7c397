/**
 * Clients and roles, stored in tables. Access tokens are encrypted at rest (AES-256-GCM).
 * The root client and the queue's issuer client are static: they come from settings.
 */
import crypto from 'node:crypto';
import * as slugid from 'slugid';
import { Storage, UNCHANGED, guardedUpdate, readPage, rows } from '../storage/storage';
import { encodeKey } from '../storage/keys';
import { Role, expandScopes, parameterCycle } from './roles';
import { conflict, inputError, notFound } from '../errors';
import { BoundedCache } from '../bounded-cache';

/** Clients and roles are cached briefly per instance; edits elsewhere show up within this time. */
export const AUTH_CACHE_MS = 10_000;
/** Clients an instance remembers: far more than call it within AUTH_CACHE_MS; bounds memory against many ids (missing ones too). */
const MAX_CACHED_CLIENTS = 10_000;
/** Far-future expiry of the static clients. */
const STATIC_EXPIRES = new Date('3000-01-01T00:00:00.000Z');

export interface Client {
  clientId: string;
  description: string;
  accessToken: string;
  expires: Date;
  disabled: boolean;
  scopes: string[];
  created: Date;
  lastModified: Date;
  lastDateUsed: Date;
  lastRotated: Date;
  deleteOnExpiration: boolean;
  static?: boolean;
}

export interface ClientStoreOptions {
  rootClientId: string;
  rootAccessToken: string;
  issuerClientId: string;
  encryptionKey: Buffer;
  now?: () => Date;
}

export function encryptToken(key: Buffer, token: string): string {
  const iv = crypto.randomBytes(12);
  const c = crypto.createCipheriv('aes-256-gcm', key, iv);
  const data = Buffer.concat([c.update(token, 'utf8'), c.final()]);
  return Buffer.concat([iv, c.getAuthTag(), data]).toString('base64');
}

export function decryptToken(key: Buffer, blob: string): string {
  const raw = Buffer.from(blob, 'base64');
  const d = crypto.createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
  d.setAuthTag(raw.subarray(12, 28));
  return Buffer.concat([d.update(raw.subarray(28)), d.final()]).toString('utf8');
}

/** Taskcluster access tokens: 44 url-safe characters. */
export function generateAccessToken(): string {
  return slugid.v4() + slugid.v4();
}

/** The roles as one read saw them: for expansion, and in full for the API. */
interface RolesSnapshot {
  at: number;
  roles: Role[];
  full: RoleRecord[];
}

const CLIENT_RK = 'client';

/** Taskcluster's window for a repeated createClient: a retry of a lost answer comes within minutes, a later one is a clash. */
export const REPEAT_CREATE_WINDOW_MS = 15 * 60_000;

/** Whether a createClient of `wanted` repeats the stored `existing` (Taskcluster's rule: same description, expiry and scopes, enabled, created lately). */
function isRepeat(existing: Client, wanted: Pick<Client, 'description' | 'expires' | 'scopes'>, now: Date): boolean {
  return (
    existing.description === wanted.description &&
    existing.expires.getTime() === wanted.expires.getTime() &&
    JSON.stringify(existing.scopes) === JSON.stringify(wanted.scopes) &&
    !existing.disabled &&
    existing.created.getTime() >= now.getTime() - REPEAT_CREATE_WINDOW_MS
  );
}
const ROLE_RK = 'role';

/** A client that lives in settings or code, not in the table (the root, the issuer, the test client). */
export function staticClient(c: { clientId: string; accessToken: string; description: string; scopes: string[]; expires?: Date }): Client {
  const epoch = new Date(0);
  return {
    ...c,
    expires: c.expires ?? STATIC_EXPIRES,
    disabled: false,
    created: epoch,
    lastModified: epoch,
    lastDateUsed: epoch,
    lastRotated: epoch,
    deleteOnExpiration: false,
    static: true,
  };
}

export class ClientStore {
  private rolesCache: RolesSnapshot | undefined;
  /** The roles read under way (see rolesSnapshot). */
  private rolesReading: Promise<RolesSnapshot> | undefined;
  /** Clients read lately, and ids found missing (`client` undefined), for AUTH_CACHE_MS. */
  private clientCache = new BoundedCache<string, { client: Client | undefined }>(MAX_CACHED_CLIENTS, { ttlMs: AUTH_CACHE_MS });
  private readonly statics: Map<string, Client>;
  private readonly now: () => Date;

  constructor(
    private readonly storage: Storage,
    private readonly opts: ClientStoreOptions,
  ) {
    this.now = opts.now ?? (() => new Date());
    const mk = (clientId: string, accessToken: string, description: string) => staticClient({ clientId, accessToken, description, scopes: ['*'] });
    this.statics = new Map([
      [opts.rootClientId, mk(opts.rootClientId, opts.rootAccessToken, 'root client (from settings)')],
      [opts.issuerClientId, mk(opts.issuerClientId, this.issuerAccessToken(), 'the queue, issuing run credentials')],
    ]);
  }

  /** The issuer's token is derived from the root token, so there is no second secret to manage. */
  issuerAccessToken(): string {
    return crypto.createHmac('sha256', this.opts.rootAccessToken).update('queue-issuer').digest('base64url');
  }

  get issuer(): { clientId: string; accessToken: string } {
    return { clientId: this.opts.issuerClientId, accessToken: this.issuerAccessToken() };
  }

  isStatic(clientId: string): boolean {
    return this.statics.has(clientId);
  }

  private toRow(c: Client) {
    return {
      partitionKey: encodeKey(c.clientId),
      rowKey: CLIENT_RK,
      clientId: c.clientId,
      description: c.description,
      encryptedAccessToken: encryptToken(this.opts.encryptionKey, c.accessToken),
      expires: c.expires,
      disabled: c.disabled,
      scopes: JSON.stringify(c.scopes),
      created: c.created,
      lastModified: c.lastModified,
      lastDateUsed: c.lastDateUsed,
      lastRotated: c.lastRotated,
      deleteOnExpiration: c.deleteOnExpiration,
    };
  }

  private fromRow(r: Record<string, unknown>): Client {
    return {
      clientId: r.clientId as string,
      description: (r.description as string) ?? '',
      accessToken: decryptToken(this.opts.encryptionKey, r.encryptedAccessToken as string),
      expires: new Date(r.expires as string),
      disabled: Boolean(r.disabled),
      scopes: JSON.parse(r.scopes as string),
      created: new Date(r.created as string),
      lastModified: new Date(r.lastModified as string),
      lastDateUsed: new Date(r.lastDateUsed as string),
      lastRotated: new Date(r.lastRotated as string),
      deleteOnExpiration: Boolean(r.deleteOnExpiration),
    };
  }

  /** Loads a client (cached briefly); statics first. */
  async client(clientId: string, fresh = false): Promise<Client | undefined> {
    const s = this.statics.get(clientId);
    if (s) return s;
    const hit = this.clientCache.get(clientId);
    if (!fresh && hit) return hit.client;
    const row = await this.storage.table('Clients').get(encodeKey(clientId), CLIENT_RK);
    const client = row ? this.fromRow(row) : undefined;
    this.clientCache.set(clientId, { client });
    return client;
  }

  /**
   * Creates a client. A client of that id already there answers as Taskcluster's createClient: the
   * same client (token included) when it is a repeat (see `isRepeat`), else 409.
   */
  async createClient(c: Omit<Client, 'accessToken' | 'created' | 'lastModified' | 'lastDateUsed' | 'lastRotated'>): Promise<Client> {
    if (this.statics.has(c.clientId)) throw conflict(`client ${c.clientId} is a static client`);
    const now = this.now();
    const client: Client = { ...c, accessToken: generateAccessToken(), created: now, lastModified: now, lastDateUsed: now, lastRotated: now };
    let repeated: Client | undefined;
    // Insert first; a row there already is this insert's own (its answer lost: guardedUpdate knows
    // it by its writeId), a repeat of this call, or another client of that id.
    await guardedUpdate(
      this.storage.table('Clients'),
      this.clientKey(c.clientId),
      (row) => {
        if (!row) return this.toRow(client);
        const existing = this.fromRow(row);
        if (!isRepeat(existing, c, now)) throw conflict('client with same clientId already exists, possibly an issue with retry logic or idempotency');
        repeated = existing;
        return UNCHANGED;
      },
      { what: `client ${c.clientId}`, current: 'absent' },
    );
    this.clientCache.delete(c.clientId);
    return repeated ?? client;
  }

  private clientKey(clientId: string) {
    return { partitionKey: encodeKey(clientId), rowKey: CLIENT_RK };
  }

  /** Read-modify-write with the row's ETag (guardedUpdate: `fn` may run again after a lost race). */
  async modifyClient(clientId: string, fn: (c: Client) => Client): Promise<Client> {
    if (this.statics.has(clientId)) throw inputError(`static client ${clientId} cannot be modified`);
    let next: Client | undefined;
    await guardedUpdate(
      this.storage.table('Clients'),
      this.clientKey(clientId),
      (row) => {
        if (!row) throw notFound(`client ${clientId} not found`);
        next = fn(this.fromRow(row));
        next.lastModified = this.now();
        return this.toRow(next);
      },
      { what: `client ${clientId}` },
    );
    this.clientCache.delete(clientId);
    return next!;
  }

  async deleteClient(clientId: string): Promise<void> {
    if (this.statics.has(clientId)) throw inputError(`static client ${clientId} cannot be deleted`);
    await this.storage.table('Clients').delete(encodeKey(clientId), CLIENT_RK);
    this.clientCache.delete(clientId);
  }

  async listClients(prefix: string | undefined, limit: number, continuation?: string) {
    const page = await readPage(this.storage.table('Clients'), { rowKey: CLIENT_RK }, limit, continuation);
    let clients = page.items.map((r) => this.fromRow(r));
    if (prefix) clients = clients.filter((c) => c.clientId.startsWith(prefix));
    return { clients, continuation: page.continuation };
  }

  // ---- roles ----

  private async loadRoles(fresh = false): Promise<RoleRecord[]> {
    return (await this.rolesSnapshot(fresh)).full;
  }

  /** The cached roles, or one read of them that requests finding the cache stale at once share. */
  private rolesSnapshot(fresh = false): Promise<RolesSnapshot> {
    const cached = this.rolesCache;
    if (!fresh && cached && Date.now() - cached.at < AUTH_CACHE_MS) return Promise.resolve(cached);
    if (fresh) return this.readRoles();
    const shared = (this.rolesReading ??= this.readRoles().finally(() => {
      if (this.rolesReading === shared) this.rolesReading = undefined;
    }));
    return shared;
  }

  private async readRoles(): Promise<RolesSnapshot> {
    const out: RoleRecord[] = [];
    for await (const r of rows(this.storage.table('Roles'), { rowKey: ROLE_RK })) {
      out.push({
        roleId: r.roleId as string,
        description: (r.description as string) ?? '',
        scopes: JSON.parse(r.scopes as string),
        created: new Date(r.created as string),
        lastModified: new Date(r.lastModified as string),
        etag: r.etag,
      });
    }
    out.sort((a, b) => (a.roleId < b.roleId ? -1 : a.roleId > b.roleId ? 1 : 0));
    this.rolesCache = { at: Date.now(), roles: out.map((r) => ({ roleId: r.roleId, scopes: r.scopes })), full: out };
    return this.rolesCache;
  }

  /** After a role change: a read under way may predate it, so the next request reads again. */
  private forgetRoles(): void {
    this.rolesCache = undefined;
    this.rolesReading = undefined;
  }

  async roles(fresh = false): Promise<RoleRecord[]> {
    return this.loadRoles(fresh);
  }

  async expand(scopes: string[]): Promise<string[]> {
    return expandScopes(scopes, (await this.rolesSnapshot()).roles);
  }

  async role(roleId: string): Promise<RoleRecord | undefined> {
    return (await this.loadRoles(true)).find((r) => r.roleId === roleId);
  }

  async putRole(roleId: string, description: string, scopes: string[], mode: 'create' | 'update'): Promise<RoleRecord> {
    const now = this.now();
    const out = await guardedUpdate(
      this.storage.table('Roles'),
      { partitionKey: encodeKey(roleId), rowKey: ROLE_RK },
      async (existing) => {
        if (mode === 'create' && existing) {
          const same = existing.description === description && existing.scopes === JSON.stringify(scopes);
          if (!same) throw conflict(`role ${roleId} already exists`);
          return UNCHANGED;
        }
        if (mode === 'update' && !existing) throw notFound(`role ${roleId} not found`);
        // Reject cycles that never converge before storing.
        const others = (await this.loadRoles(true)).filter((r) => r.roleId !== roleId).map((r) => ({ roleId: r.roleId, scopes: r.scopes }));
        const cycle = parameterCycle([...others, { roleId, scopes }]);
        if (cycle) throw inputError(`role ${roleId} would pass a role parameter around a cycle, which expands without bound: ${cycle.join(' -> ')}`);
        try {
          expandScopes([`assume:${roleId}`], [...others, { roleId, scopes }]);
        } catch (e) {
          throw inputError(String((e as Error).message));
        }
        const created = existing ? new Date(existing.created as string) : now;
        return { roleId, description, scopes: JSON.stringify(scopes), created, lastModified: now };
      },
      { what: `role ${roleId}` },
    );
    if (!out.written) return this.rowToRole(out.row!);
    this.forgetRoles();
    return { ...this.rowToRole(out.row!), etag: '' };
  }

  async deleteRole(roleId: string): Promise<void> {
    await this.storage.table('Roles').delete(encodeKey(roleId), ROLE_RK);
    this.forgetRoles();
  }

  private rowToRole(r: Record<string, unknown>): RoleRecord {
    return {
      roleId: r.roleId as string,
      description: (r.description as string) ?? '',
      scopes: JSON.parse(r.scopes as string),
      created: new Date(r.created as string),
      lastModified: new Date(r.lastModified as string),
      etag: (r.etag as string) ?? '',
    };
  }
}

export interface RoleRecord {
  roleId: string;
  description: string;
  scopes: string[];
  created: Date;
  lastModified: Date;
  etag: string;
}
