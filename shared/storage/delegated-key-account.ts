/**
 * A delegated account given by an account-key connection string: every SAS is signed with the
 * key, which never leaves the app.
 */
import { AzureNamedKeyCredential, TableServiceClient, generateTableSas } from '@azure/data-tables';
import { BlobServiceClient, ContainerSASPermissions, StorageSharedKeyCredential, generateBlobSASQueryParameters } from '@azure/storage-blob';
import { AccessLevel, CONTAINER_PERMISSIONS, DelegatedAccount, Sas, containerPage, sasWindow, tablePage, tablePermissions } from './delegated-sas';

/** `Name=value;...` of a connection string. */
function fields(connection: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of connection.split(';')) {
    const i = part.indexOf('=');
    if (i > 0) out[part.slice(0, i).trim()] = part.slice(i + 1).trim();
  }
  return out;
}

export function keyAccount(connection: string, now: () => Date): DelegatedAccount {
  const key = fields(connection).AccountKey;
  const tables = TableServiceClient.fromConnectionString(connection, { allowInsecureConnection: connection.includes('http://') });
  const blobs = BlobServiceClient.fromConnectionString(connection);
  // The storage account's own name (clients may name it otherwise).
  const accountName = blobs.accountName;
  return {
    listTables: (continuation) => tablePage(tables, continuation),
    listContainers: (continuation) => containerPage(blobs, continuation),
    async tableSas(table: string, level: AccessLevel): Promise<Sas> {
      if (level === 'read-write') await tables.createTable(table);
      const window = sasWindow(now());
      const sas = generateTableSas(table, new AzureNamedKeyCredential(accountName, key), { ...window, permissions: tablePermissions(level) });
      return { sas, expiry: window.expiresOn };
    },
    async containerSas(container: string, level: AccessLevel): Promise<Sas> {
      if (level === 'read-write') await blobs.getContainerClient(container).createIfNotExists();
      const window = sasWindow(now());
      const sas = generateBlobSASQueryParameters(
        { containerName: container, permissions: ContainerSASPermissions.parse(CONTAINER_PERMISSIONS[level]), ...window },
        new StorageSharedKeyCredential(accountName, key),
      ).toString();
      return { sas, expiry: window.expiresOn };
    },
  };
}
