/**
 * Storage accounts whose tables and containers the Auth service hands out short SAS for
 * (Taskcluster's azureTableSAS / azureContainerSAS): a task gets read-only or read-write access to
 * one table or container. An account is signed for with its key (shared/storage/delegated-key-account.ts)
 * or reached through the app's managed identity (shared/storage/delegated-identity-account.ts).
 */
import type { TlsSettings } from '@azure/core-rest-pipeline';
import type * as IdentitySdk from '@azure/identity';
import type { DelegatedAccountSetting } from '../config';
import { keyAccount } from './delegated-key-account';
import { identityAccount } from './delegated-identity-account';
import type { AccessLevel, DelegatedAccount, Page, Sas } from './delegated-sas';

export type { AccessLevel } from './delegated-sas';

export interface DelegatedAccountsOptions {
  /** The clock SAS windows and key lifetimes are measured on. */
  now?: () => Date;
  /** The identity accounts' credential; default: DefaultAzureCredential with each account's clientId (as Event Grid's). */
  credential?: IdentitySdk.TokenCredential;
  /** TLS settings for the identity accounts' endpoints (tests: a local HTTPS Azurite's certificate). */
  tlsOptions?: TlsSettings;
}

export class DelegatedAccounts {
  private readonly accounts = new Map<string, DelegatedAccount>();

  /** `settings`: account name as clients give it → how it is reached (shared/config.ts, QUEUE_AZURE_ACCOUNTS). */
  constructor(settings: Record<string, DelegatedAccountSetting>, opts: DelegatedAccountsOptions = {}) {
    const now = opts.now ?? (() => new Date());
    const credentials = new Map<string | undefined, IdentitySdk.TokenCredential>();
    const credentialFor = (clientId: string | undefined) => {
      if (opts.credential) return opts.credential;
      if (!credentials.has(clientId)) credentials.set(clientId, defaultCredential(clientId));
      return credentials.get(clientId)!;
    };
    for (const [name, s] of Object.entries(settings)) {
      const account =
        s.kind === 'key'
          ? keyAccount(s.connection, now)
          : identityAccount(s, { name, credential: credentialFor(s.clientId), now, tlsOptions: opts.tlsOptions });
      this.accounts.set(name, account);
    }
  }

  names(): string[] {
    return [...this.accounts.keys()].sort();
  }

  has(name: string): boolean {
    return this.accounts.has(name);
  }

  private account(name: string): DelegatedAccount {
    const a = this.accounts.get(name);
    if (!a) throw new Error(`no delegated account ${name}`);
    return a;
  }

  listTables(name: string, continuation?: string): Promise<Page> {
    return this.account(name).listTables(continuation);
  }

  listContainers(name: string, continuation?: string): Promise<Page> {
    return this.account(name).listContainers(continuation);
  }

  /** A SAS for one table; read-write also creates the table if missing. */
  tableSas(name: string, table: string, level: AccessLevel): Promise<Sas> {
    return this.account(name).tableSas(table, level);
  }

  /** A SAS for one container; read-write also creates the container if missing. */
  containerSas(name: string, container: string, level: AccessLevel): Promise<Sas> {
    return this.account(name).containerSas(container, level);
  }
}

/** The app's managed identity, as the Event Grid sink takes it (shared/events/eventgrid.ts). */
function defaultCredential(clientId: string | undefined): IdentitySdk.TokenCredential {
  // Loaded only where an identity account is configured: the SDK adds to every cold start otherwise.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { DefaultAzureCredential } = require('@azure/identity') as typeof IdentitySdk;
  return new DefaultAzureCredential({ managedIdentityClientId: clientId });
}
