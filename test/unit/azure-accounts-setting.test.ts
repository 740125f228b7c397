/**
 * QUEUE_AZURE_ACCOUNTS: each account an account-key connection string or the managed-identity form
 * `{"identity": true, ...}`; a mistake stops start-up with one line naming the setting and account.
 */
import { DEVSTORE_KEY, loadConfig } from '../../shared/config';

const ENV = {
  QUEUE_STORAGE_CONNECTION: 'memory:',
  QUEUE_PUBLIC_URL: 'http://localhost:1',
  QUEUE_ROOT_ACCESS_TOKEN: 'x'.repeat(22),
  QUEUE_TOKEN_ENCRYPTION_KEY: Buffer.alloc(32).toString('base64'),
};
const accounts = (v: unknown) => loadConfig({ ...ENV, QUEUE_AZURE_ACCOUNTS: typeof v === 'string' ? v : JSON.stringify(v) }).azureAccounts;
const failure = (v: unknown): string => {
  try {
    accounts(v);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('loadConfig accepted it');
};
const KEYED = `DefaultEndpointsProtocol=https;AccountName=sttasks;AccountKey=${DEVSTORE_KEY};EndpointSuffix=core.windows.net`;
const RESOURCE_ID = '/subscriptions/00000000-0000-4000-8000-000000000000/resourceGroups/tasks/providers/Microsoft.Storage/storageAccounts/sttasks01';

test('empty: no accounts; a connection string: signed with its key', () => {
  expect(accounts('')).toEqual({});
  expect(accounts({ keyed: KEYED })).toEqual({ keyed: { kind: 'key', connection: KEYED } });
});

test('the identity form: endpoints derived from the account name in public Azure, or given', () => {
  expect(accounts({ sttasks: { identity: true } })).toEqual({
    sttasks: {
      kind: 'identity',
      accountName: 'sttasks',
      blobEndpoint: 'https://sttasks.blob.core.windows.net',
      tableEndpoint: 'https://sttasks.table.core.windows.net',
      managementEndpoint: 'https://management.azure.com',
    },
  });
  // What infra/main.bicep writes: the account's resourceId (its name is the last segment), its endpoints and the identity's client id.
  const bicep = {
    identity: true,
    clientId: 'c0ffee00-0000-4000-8000-000000000000',
    resourceId: RESOURCE_ID,
    blobEndpoint: 'https://sttasks01.blob.core.usgovcloudapi.net/',
    tableEndpoint: 'https://sttasks01.table.core.usgovcloudapi.net/',
    managementEndpoint: 'https://management.usgovcloudapi.net/',
  };
  expect(accounts({ tasks: bicep })).toEqual({
    tasks: {
      kind: 'identity',
      accountName: 'sttasks01',
      clientId: bicep.clientId,
      resourceId: RESOURCE_ID,
      blobEndpoint: 'https://sttasks01.blob.core.usgovcloudapi.net',
      tableEndpoint: 'https://sttasks01.table.core.usgovcloudapi.net',
      managementEndpoint: 'https://management.usgovcloudapi.net',
    },
  });
});

test('mistakes stop start-up naming the setting and the account', () => {
  expect(failure('{nope')).toMatch(
    /^setting QUEUE_AZURE_ACCOUNTS must be a JSON object of account name to an account-key connection string or \{"identity": true/,
  );
  expect(failure(['a'])).toMatch(/^setting QUEUE_AZURE_ACCOUNTS must be a JSON object/);
  expect(failure({ a: 42 })).toBe('setting QUEUE_AZURE_ACCOUNTS (a): must be a connection string or {"identity": true, ...}');
  expect(failure({ a: 'UseDevelopmentStorage=true' })).toBe(
    'setting QUEUE_AZURE_ACCOUNTS (a): its connection string needs AccountName and AccountKey, or use {"identity": true}',
  );
  expect(failure({ a: 'AccountName=a;AccountKey=not base64' })).toMatch(/^setting QUEUE_AZURE_ACCOUNTS \(a\): its AccountKey \(10 characters\) is not base64/);
  expect(failure({ sttasks: { identity: 'yes' } })).toBe(
    'setting QUEUE_AZURE_ACCOUNTS (sttasks): an account reached through the app\'s identity says "identity": true',
  );
  expect(failure({ sttasks: { identity: true, blobEndPoint: 'https://x' } })).toBe(
    'setting QUEUE_AZURE_ACCOUNTS (sttasks): unknown field blobEndPoint (known: identity, clientId, resourceId, blobEndpoint, tableEndpoint, managementEndpoint)',
  );
  expect(failure({ sttasks: { identity: true, blobEndpoint: 'http://127.0.0.1:10000/sttasks' } })).toBe(
    'setting QUEUE_AZURE_ACCOUNTS (sttasks): blobEndpoint must be an https URL, got "http://127.0.0.1:10000/sttasks"',
  );
  expect(failure({ sttasks: { identity: true, clientId: '' } })).toBe('setting QUEUE_AZURE_ACCOUNTS (sttasks): clientId must be a non-empty string');
  expect(failure({ sttasks: { identity: true, resourceId: '/subscriptions/x/storageAccounts/sttasks' } })).toMatch(
    /^setting QUEUE_AZURE_ACCOUNTS \(sttasks\): resourceId must be \/subscriptions\/<id>\/resourceGroups\//,
  );
  // An alias needs the resourceId that names the account.
  expect(failure({ Tasks: { identity: true } })).toBe(
    "setting QUEUE_AZURE_ACCOUNTS (Tasks): 'Tasks' is not a storage account name (3-24 lowercase letters and digits); name the account by it, or give its resourceId",
  );
});
