/**
 * A delegated account reached through the app's managed identity, with no key in the settings.
 * Containers: a user delegation SAS, signed with a key Azure hands the identity
 * (getUserDelegationKey; role Storage Blob Data Contributor, which also bounds what the SAS grants).
 * Tables: the Table SDK signs only with the account key, so with a resourceId the key is read
 * through ARM's listKeys (shared/storage/arm-account-key.ts); without one a table SAS is refused.
 * Listing and creating go through the identity's token (Storage Table/Blob Data Contributor).
 */
import { AzureNamedKeyCredential, TableServiceClient, generateTableSas } from '@azure/data-tables';
import { BlobServiceClient, ContainerSASPermissions, StoragePipelineOptions, generateBlobSASQueryParameters } from '@azure/storage-blob';
import type { PipelineOptions, TlsSettings } from '@azure/core-rest-pipeline';
import type { TokenCredential } from '@azure/identity';
import { BoundedCache } from '../bounded-cache';
import type { IdentityAccountSetting } from '../config';
import { inputError } from '../errors';
import { armAccountKey } from './arm-account-key';
import {
  AccessLevel,
  CONTAINER_PERMISSIONS,
  DELEGATED_SAS_SKEW_MS,
  DELEGATED_SAS_TTL_MS,
  DelegatedAccount,
  Sas,
  containerPage,
  sasWindow,
  tablePage,
  tablePermissions,
} from './delegated-sas';

/** Azure allows a user delegation key up to 7 days; a day bounds what a leaked one signs, at one key request a day per instance. */
export const USER_DELEGATION_KEY_LIFETIME_MS = 24 * 3600 * 1000;
/** A SAS stops working when the key that signed it expires, so a key is replaced once less than a SAS lifetime and 5 minutes of clock skew remain. */
export const USER_DELEGATION_KEY_RENEW_BEFORE_MS = DELEGATED_SAS_TTL_MS + 5 * 60 * 1000;
/** The key listKeys answered is read again after this long: a rotated key reaches new table SAS within it, at a few ARM calls an hour per instance. */
export const LISTED_KEY_TTL_MS = 10 * 60 * 1000;

export interface IdentityAccountOptions {
  /** The name clients give the account (messages). */
  name: string;
  credential: TokenCredential;
  now: () => Date;
  /** TLS settings for the account's and ARM's endpoints (tests: a local HTTPS Azurite's certificate). */
  tlsOptions?: TlsSettings;
}

export function identityAccount(setting: IdentityAccountSetting, opts: IdentityAccountOptions): DelegatedAccount {
  const { credential, tlsOptions } = opts;
  const tables = new TableServiceClient(setting.tableEndpoint, credential, { tlsOptions });
  // The blob SDK's options do not declare tlsOptions; it hands them to the core pipeline with the rest.
  const blobOptions: StoragePipelineOptions & Pick<PipelineOptions, 'tlsOptions'> = { tlsOptions };
  const blobs = new BlobServiceClient(setting.blobEndpoint, credential, blobOptions);
  const clock = () => opts.now().getTime();

  // One key per account and instance at a time.
  const delegationKey = shared(
    async () => {
      const now = clock();
      try {
        // From the start of the SAS window, so the key covers every SAS signed with it.
        return await blobs.getUserDelegationKey(new Date(now - DELEGATED_SAS_SKEW_MS), new Date(now + USER_DELEGATION_KEY_LIFETIME_MS));
      } catch (err) {
        const why = `getUserDelegationKey of account ${setting.accountName}: ${(err as Error).message}`;
        throw new Error(`${why}; does the app's identity have Storage Blob Data Contributor on the account?`, { cause: err });
      }
    },
    { ttlMs: USER_DELEGATION_KEY_LIFETIME_MS - USER_DELEGATION_KEY_RENEW_BEFORE_MS, now: clock },
  );
  const accountKey = setting.resourceId
    ? shared(armAccountKey({ resourceId: setting.resourceId, managementEndpoint: setting.managementEndpoint, credential, tlsOptions }), {
        ttlMs: LISTED_KEY_TTL_MS,
        now: clock,
      })
    : undefined;

  return {
    listTables: (continuation) => tablePage(tables, continuation),
    listContainers: (continuation) => containerPage(blobs, continuation),
    async tableSas(table: string, level: AccessLevel): Promise<Sas> {
      if (!accountKey) {
        throw inputError(
          `Account '${opts.name}' is reached through the app's managed identity without a resourceId: a table SAS is signed with the ` +
            `account key, which the app reads through Azure Resource Manager only when QUEUE_AZURE_ACCOUNTS gives the account's resourceId`,
        );
      }
      if (level === 'read-write') await tables.createTable(table);
      const key = await accountKey();
      const window = sasWindow(opts.now());
      const sas = generateTableSas(table, new AzureNamedKeyCredential(setting.accountName, key), { ...window, permissions: tablePermissions(level) });
      return { sas, expiry: window.expiresOn };
    },
    async containerSas(container: string, level: AccessLevel): Promise<Sas> {
      if (level === 'read-write') await blobs.getContainerClient(container).createIfNotExists();
      const key = await delegationKey();
      const window = sasWindow(opts.now());
      const sas = generateBlobSASQueryParameters(
        { containerName: container, permissions: ContainerSASPermissions.parse(CONTAINER_PERMISSIONS[level]), ...window },
        key,
        setting.accountName,
      ).toString();
      return { sas, expiry: window.expiresOn };
    },
  };
}

/** `fetch`'s answer for `ttlMs`, one fetch shared by concurrent callers; a failed fetch is not kept. */
function shared<T>(fetch: () => Promise<T>, opts: { ttlMs: number; now: () => number }): () => Promise<T> {
  const cache = new BoundedCache<'value', Promise<T>>(1, opts);
  return () => {
    let value = cache.get('value');
    if (!value) {
      const fetched = fetch();
      fetched.catch(() => cache.get('value') === fetched && cache.delete('value'));
      cache.set('value', fetched);
      value = fetched;
    }
    return value;
  };
}
