/**
 * Audit history, as Taskcluster's Auth keeps it: who (the caller's clientId) did what (`created`,
 * `updated`, `deleted`, ...) to which client, role or secret, and when. Entries are only ever
 * appended, each stored twice in table AuditHistory so both questions are one partition read,
 * newest first:
 *   by entity: PartitionKey = `e~<entityType>~<entityId>`, RowKey = `<inverted time>~<auditId>`
 *   by caller: PartitionKey = `c~<clientId>`,              RowKey = the same
 * and removed AUDIT_RETENTION_MS later through the expiry index (Taskcluster keeps 30 days).
 */
import { createHash } from 'node:crypto';
import * as slugid from 'slugid';
import { MAX_KEY_CHARS, insertIfAbsent, readPage, type Storage } from '../storage/storage';
import { inverted, part } from '../ops/keys';
import type { ExpiryIndex } from '../tasks/expiry';

/** How long entries are kept: Taskcluster purges audit history older than 30 days. */
export const AUDIT_RETENTION_MS = 30 * 24 * 3600 * 1000;
export const EXPIRY_KIND_AUDIT = 'audit';
/** Who a caller without credentials is in the history (its scopes came from the `anonymous` role). */
export const ANONYMOUS_CALLER = 'anonymous';

/** The entity types recorded here (Taskcluster also records `hook` and `worker_pool`). */
export const AUDIT_ENTITY_TYPES = ['client', 'role', 'secret'] as const;
export type AuditEntityType = (typeof AUDIT_ENTITY_TYPES)[number];

/** One entry, as getEntityHistory and listAuditHistory answer it. */
export interface AuditEntry {
  entityType: string;
  entityId: string;
  /** Who made the change. */
  clientId: string;
  actionType: string;
  created: string;
}

export interface AuditDeps {
  storage: Storage;
  expiry: ExpiryIndex;
  now: () => Date;
}

const table = (d: Pick<AuditDeps, 'storage'>) => d.storage.table('AuditHistory');

/**
 * A partition for free-text ids: readable when it fits Azure's key limit, else a digest (rows carry
 * the ids themselves, and reads match them, so two ids sharing a digest never mix).
 */
function partition(prefix: string, id: string): string {
  const key = `${prefix}~${part(id)}`;
  return key.length <= MAX_KEY_CHARS ? key : `${prefix}~=${createHash('sha256').update(id).digest('hex')}`;
}

const entityPartition = (entityType: string, entityId: string) => partition(`e~${entityType}`, entityId);
const callerPartition = (clientId: string) => partition('c', clientId);

/**
 * Appends an entry for a change that has just been made. The expiry row goes first, so both rows
 * are found when their time is up; an insert that meets its own earlier success (a lost answer)
 * is done.
 */
export async function recordAudit(d: AuditDeps, e: Omit<AuditEntry, 'created'> & { entityType: AuditEntityType }): Promise<void> {
  const created = d.now().toJSON();
  const auditId = slugid.nice();
  const rowKey = `${inverted(created)}~${auditId}`;
  const keys = [entityPartition(e.entityType, e.entityId), callerPartition(e.clientId)];
  await d.expiry.record(EXPIRY_KIND_AUDIT, auditId, new Date(Date.parse(created) + AUDIT_RETENTION_MS).toJSON(), { partitions: keys, rowKey });
  const entry: AuditEntry = { ...e, created };
  await Promise.all(keys.map((partitionKey) => insertIfAbsent(table(d), { partitionKey, rowKey, ...entry })));
}

export interface AuditPage {
  entries: AuditEntry[];
  continuation?: string;
}

async function page(d: Pick<AuditDeps, 'storage'>, pk: string, match: Record<string, string>, limit: number, continuation?: string): Promise<AuditPage> {
  const where = Object.entries(match).map(([prop, value]) => ({ prop, op: 'eq' as const, value }));
  const p = await readPage(table(d), { partitionKey: pk, where }, limit, continuation);
  const entries = p.items.map((r) => ({
    entityType: r.entityType as string,
    entityId: r.entityId as string,
    clientId: r.clientId as string,
    actionType: r.actionType as string,
    created: r.created as string,
  }));
  return { entries, continuation: p.continuation };
}

/** One page of an entity's history, newest first; an entity type not recorded here has none. */
export async function entityHistory(
  d: Pick<AuditDeps, 'storage'>,
  entityType: string,
  entityId: string,
  limit: number,
  continuation?: string,
): Promise<AuditPage> {
  if (!(AUDIT_ENTITY_TYPES as readonly string[]).includes(entityType)) return { entries: [] };
  return page(d, entityPartition(entityType, entityId), { entityType, entityId }, limit, continuation);
}

/** One page of what a client changed, newest first. */
export async function callerHistory(d: Pick<AuditDeps, 'storage'>, clientId: string, limit: number, continuation?: string): Promise<AuditPage> {
  return page(d, callerPartition(clientId), { clientId }, limit, continuation);
}

/** The reaper: removes an entry's rows once its retention is over (rows already gone are fine). */
export async function expireAudit(d: Pick<AuditDeps, 'storage'>, data: Record<string, unknown>): Promise<void> {
  const rowKey = data.rowKey as string;
  await Promise.all((data.partitions as string[]).map((pk) => table(d).delete(pk, rowKey)));
}
