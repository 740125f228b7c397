/**
 * The Secrets service's store: small JSON values by name, each with an expiry, encrypted at rest
 * with the deployment's token key (AES-256-GCM, as client tokens and hook trigger tokens: one key to
 * hold and rotate, and the values never reach storage readable). Read after `expires`, a secret is
 * 410 until the reaper removes it a grace period later.
 */
import { ApiError, inputError, notFound } from '../errors';
import { decryptToken, encryptToken } from '../auth/clients';
import { encodeKey, decodeKey } from '../storage/keys';
import { guardedUpdate, readPage, type Storage } from '../storage/storage';
import type { ExpiryIndex } from '../tasks/expiry';

/**
 * Largest secret accepted, as JSON: its encrypted form (base64, about 4/3 of it) is one string
 * property, which Azure caps at 64 KiB (32 K characters).
 */
export const MAX_SECRET_BYTES = 22 * 1024;
/** An expired secret answers 410 this long before it is removed (Taskcluster keeps them a while too). */
export const EXPIRED_SECRET_KEPT_MS = 24 * 3600 * 1000;
export const EXPIRY_KIND_SECRET = 'secret';
/** The one row key of a secret's row (its partition is its encoded name). */
const ROW = 'secret';

export interface SecretsDeps {
  storage: Storage;
  expiry: ExpiryIndex;
  now: () => Date;
  config: { tokenEncryptionKey: Buffer };
}

export interface Secret {
  secret: Record<string, unknown>;
  expires: string;
}

const table = (d: SecretsDeps) => d.storage.table('Secrets');

/**
 * Stores `value` under `name` (replacing any), found by the reaper a grace period after it expires.
 * Answers whether the secret was `created` or `updated` (the audit history records which).
 */
export async function setSecret(d: SecretsDeps, name: string, value: Secret): Promise<'created' | 'updated'> {
  const json = JSON.stringify(value.secret);
  if (Buffer.byteLength(json, 'utf8') > MAX_SECRET_BYTES) throw new ApiError('InputTooLarge', `a secret may be at most ${MAX_SECRET_BYTES} bytes of JSON`);
  const key = encodeKey(name);
  // The expiry row first: a secret row is always found when its time is up.
  await d.expiry.record(EXPIRY_KIND_SECRET, key, new Date(Date.parse(value.expires) + EXPIRED_SECRET_KEPT_MS).toJSON());
  const row = { encrypted: encryptToken(d.config.tokenEncryptionKey, json), expires: value.expires };
  let existed = false;
  // An insert first (a new secret is one call); the guard tells a lost answer from another writer.
  await guardedUpdate(
    table(d),
    { partitionKey: key, rowKey: ROW },
    (current) => {
      existed = current !== undefined;
      return row;
    },
    { what: `secret ${name}`, current: 'absent' },
  );
  return existed ? 'updated' : 'created';
}

/** The secret; 404 without it, 410 once it expired. */
export async function getSecret(d: SecretsDeps, name: string): Promise<Secret> {
  const row = await table(d).get(encodeKey(name), ROW);
  if (!row) throw notFound('Secret not found');
  if (Date.parse(row.expires as string) <= d.now().getTime()) throw new ApiError('ResourceExpired', 'The requested resource has expired.');
  return { secret: JSON.parse(decryptToken(d.config.tokenEncryptionKey, row.encrypted as string)), expires: new Date(row.expires as string).toJSON() };
}

/** Deletes the secret; 404 without it (as Taskcluster's suite expects). */
export async function removeSecret(d: SecretsDeps, name: string): Promise<void> {
  const key = encodeKey(name);
  // Read first: a delete's own retry after a lost answer finds nothing, which must not be a 404.
  if (!(await table(d).get(key, ROW))) throw notFound('Secret not found');
  await table(d).delete(key, ROW);
}

/** One page of secret names, in name order. */
export async function listSecrets(d: SecretsDeps, limit: number, continuation?: string): Promise<{ secrets: string[]; continuation?: string }> {
  const page = await readPage(table(d), { rowKey: { ge: ROW, le: ROW }, select: ['PartitionKey'] }, limit, continuation);
  return { secrets: page.items.map((r) => decodeKey(r.partitionKey)), continuation: page.continuation };
}

/** A secret as operators list it: never its value. */
export interface SecretExpiry {
  name: string;
  expires: string;
  /** Read now, it would answer 410 (it waits for the reaper). */
  expired: boolean;
}

/** One page of secret names with their expiry, in name order (the values are not read). */
export async function listSecretExpiries(d: SecretsDeps, limit: number, continuation?: string): Promise<{ secrets: SecretExpiry[]; continuation?: string }> {
  const page = await readPage(table(d), { rowKey: { ge: ROW, le: ROW }, select: ['PartitionKey', 'expires'] }, limit, continuation);
  const now = d.now().getTime();
  const secrets = page.items.map((r) => {
    const expires = new Date(r.expires as string);
    return { name: decodeKey(r.partitionKey), expires: expires.toJSON(), expired: expires.getTime() <= now };
  });
  return { secrets, continuation: page.continuation };
}

/** The reaper: removes a secret whose grace period is over (a later `set` moved its expiry on: kept). */
export async function expireSecret(d: SecretsDeps, key: string): Promise<void> {
  const row = await table(d).get(key, ROW);
  if (row && Date.parse(row.expires as string) + EXPIRED_SECRET_KEPT_MS <= d.now().getTime()) await table(d).delete(key, ROW);
}

/** A secret name Azure can key and a URL can carry (Taskcluster's names are free-form; these bound them). */
export function checkSecretName(name: string): void {
  // eslint-disable-next-line no-control-regex -- control characters are what this refuses
  if (!name || name.length > 512 || /[\x00-\x1f\x7f]/.test(name)) throw inputError('a secret name is 1-512 characters without control characters');
}
