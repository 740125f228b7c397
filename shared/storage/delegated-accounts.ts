/**
 * Storage accounts whose tables and containers the Auth service hands out short SAS for
 * (Taskcluster's azureTableSAS / azureContainerSAS): a task gets read-only or read-write access to
 * one table or container, signed with the account's key, which never leaves the app.
 */
import { AzureNamedKeyCredential, TableServiceClient, generateTableSas } from '@azure/data-tables';
import { BlobServiceClient, ContainerSASPermissions, StorageSharedKeyCredential, generateBlobSASQueryParameters } from '@azure/storage-blob';

export type AccessLevel = 'read-only' | 'read-write';

/** Taskcluster's SAS lifetime: 25 minutes, valid from 15 minutes ago (clock skew between the parties). */
export const DELEGATED_SAS_TTL_MS = 25 * 60 * 1000;
const DELEGATED_SAS_SKEW_MS = 15 * 60 * 1000;
/** Names listed per page (Azure's own page, as Taskcluster forwards it). */
const LIST_PAGE = 1000;

interface Account {
  name: string;
  key: string;
  tables: TableServiceClient;
  blobs: BlobServiceClient;
}

/** `Name=value;...` of a connection string. */
function fields(connection: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of connection.split(';')) {
    const i = part.indexOf('=');
    if (i > 0) out[part.slice(0, i).trim()] = part.slice(i + 1).trim();
  }
  return out;
}

export class DelegatedAccounts {
  private readonly accounts = new Map<string, Account>();

  /** `connections`: account name as clients name it → an account-key connection string. */
  constructor(connections: Record<string, string>) {
    for (const [name, connection] of Object.entries(connections)) {
      const f = fields(connection);
      if (!f.AccountName || !f.AccountKey) throw new Error(`delegated account ${name}: its connection string needs AccountName and AccountKey`);
      this.accounts.set(name, {
        name,
        key: f.AccountKey,
        tables: TableServiceClient.fromConnectionString(connection, { allowInsecureConnection: connection.includes('http://') }),
        blobs: BlobServiceClient.fromConnectionString(connection),
      });
    }
  }

  names(): string[] {
    return [...this.accounts.keys()].sort();
  }

  has(name: string): boolean {
    return this.accounts.has(name);
  }

  private account(name: string): Account {
    const a = this.accounts.get(name);
    if (!a) throw new Error(`no delegated account ${name}`);
    return a;
  }

  async listTables(name: string, continuation?: string): Promise<{ names: string[]; continuation?: string }> {
    const pages = this.account(name).tables.listTables().byPage({ maxPageSize: LIST_PAGE, continuationToken: continuation });
    const page = (await pages.next()).value;
    return { names: (page ?? []).map((t: { name?: string }) => t.name!).filter(Boolean), continuation: page?.continuationToken };
  }

  async listContainers(name: string, continuation?: string): Promise<{ names: string[]; continuation?: string }> {
    const pages = this.account(name).blobs.listContainers().byPage({ maxPageSize: LIST_PAGE, continuationToken: continuation });
    const page = (await pages.next()).value;
    return { names: (page?.containerItems ?? []).map((c: { name: string }) => c.name), continuation: page?.continuationToken || undefined };
  }

  /** A SAS for one table; read-write also creates the table if missing. */
  async tableSas(name: string, table: string, level: AccessLevel, now: Date): Promise<{ sas: string; expiry: Date }> {
    const a = this.account(name);
    const write = level === 'read-write';
    if (write) await a.tables.createTable(table);
    const expiry = new Date(now.getTime() + DELEGATED_SAS_TTL_MS);
    const sas = generateTableSas(table, new AzureNamedKeyCredential(accountNameOf(a), a.key), {
      startsOn: new Date(now.getTime() - DELEGATED_SAS_SKEW_MS),
      expiresOn: expiry,
      permissions: { query: true, add: write, update: write, delete: write },
    });
    return { sas, expiry };
  }

  /** A SAS for one container; read-write also creates the container if missing. */
  async containerSas(name: string, container: string, level: AccessLevel, now: Date): Promise<{ sas: string; expiry: Date }> {
    const a = this.account(name);
    const write = level === 'read-write';
    if (write) await a.blobs.getContainerClient(container).createIfNotExists();
    const expiry = new Date(now.getTime() + DELEGATED_SAS_TTL_MS);
    const sas = generateBlobSASQueryParameters(
      {
        containerName: container,
        permissions: ContainerSASPermissions.parse(write ? 'racwdl' : 'rl'),
        startsOn: new Date(now.getTime() - DELEGATED_SAS_SKEW_MS),
        expiresOn: expiry,
      },
      new StorageSharedKeyCredential(accountNameOf(a), a.key),
    ).toString();
    return { sas, expiry };
  }
}

/** The storage account's own name (a client may name it otherwise). */
function accountNameOf(a: Account): string {
  return a.blobs.accountName;
}
