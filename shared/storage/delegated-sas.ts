/**
 * What every delegated account shares, however it signs (shared/storage/delegated-accounts.ts):
 * Taskcluster's SAS window, the permissions of each level, and one page of names.
 */
import type { TableServiceClient } from '@azure/data-tables';
import type { BlobServiceClient } from '@azure/storage-blob';

export type AccessLevel = 'read-only' | 'read-write';

/** Taskcluster's SAS lifetime: 25 minutes, valid from 15 minutes ago (clock skew between the parties). */
export const DELEGATED_SAS_TTL_MS = 25 * 60 * 1000;
export const DELEGATED_SAS_SKEW_MS = 15 * 60 * 1000;
/** Names listed per page (Azure's own page, as Taskcluster forwards it). */
const LIST_PAGE = 1000;

/** Taskcluster's container permissions: read-write adds create, write and delete to read and list. */
export const CONTAINER_PERMISSIONS: Record<AccessLevel, string> = { 'read-only': 'rl', 'read-write': 'racwdl' };

export const tablePermissions = (level: AccessLevel) => {
  const write = level === 'read-write';
  return { query: true, add: write, update: write, delete: write };
};

export interface Sas {
  sas: string;
  expiry: Date;
}

export interface Page {
  names: string[];
  continuation?: string;
}

export function sasWindow(now: Date): { startsOn: Date; expiresOn: Date } {
  return { startsOn: new Date(now.getTime() - DELEGATED_SAS_SKEW_MS), expiresOn: new Date(now.getTime() + DELEGATED_SAS_TTL_MS) };
}

/** One delegated account: signed with its key, or reached through the app's managed identity. */
export interface DelegatedAccount {
  listTables(continuation?: string): Promise<Page>;
  listContainers(continuation?: string): Promise<Page>;
  /** A SAS for one table; read-write also creates the table if missing. */
  tableSas(table: string, level: AccessLevel): Promise<Sas>;
  /** A SAS for one container; read-write also creates the container if missing. */
  containerSas(container: string, level: AccessLevel): Promise<Sas>;
}

export async function tablePage(tables: TableServiceClient, continuation?: string): Promise<Page> {
  const pages = tables.listTables().byPage({ maxPageSize: LIST_PAGE, continuationToken: continuation });
  const page = (await pages.next()).value;
  return { names: (page ?? []).map((t: { name?: string }) => t.name!).filter(Boolean), continuation: page?.continuationToken };
}

export async function containerPage(blobs: BlobServiceClient, continuation?: string): Promise<Page> {
  const pages = blobs.listContainers().byPage({ maxPageSize: LIST_PAGE, continuationToken: continuation });
  const page = (await pages.next()).value;
  return { names: (page?.containerItems ?? []).map((c: { name: string }) => c.name), continuation: page?.continuationToken || undefined };
}
