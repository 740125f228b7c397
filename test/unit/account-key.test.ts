/**
 * A connection string with an AccountKey that is not base64 stops start-up with one line naming
 * the setting, before any storage call (the SDK's own message spoke of a "SAS Connection String").
 */
import { DEVSTORE_KEY, loadConfig } from '../../shared/config';

const ENV = {
  QUEUE_PUBLIC_URL: 'http://localhost:1',
  QUEUE_ROOT_ACCESS_TOKEN: 'x'.repeat(22),
  QUEUE_TOKEN_ENCRYPTION_KEY: Buffer.alloc(32).toString('base64'),
};
const conn = (key: string) => `DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=${key};EndpointSuffix=core.windows.net`;
const failure = (env: Record<string, string>): string => {
  try {
    loadConfig({ ...ENV, ...env });
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('loadConfig accepted it');
};

test('a bad AccountKey in QUEUE_STORAGE_CONNECTION: one line naming the setting, without the key', () => {
  const message = failure({ QUEUE_STORAGE_CONNECTION: conn('my-key!') });
  expect(message).toBe(
    "setting QUEUE_STORAGE_CONNECTION: its AccountKey (7 characters) is not base64, so it is not a storage account key; copy key1 or key2 whole (the portal's Access keys, or `az storage account keys list`)",
  );
  expect(message).not.toContain('my-key!');
  // The shape the SDK answered with "Invalid QueueEndpoint in the provided SAS Connection String".
  expect(failure({ QUEUE_STORAGE_CONNECTION: 'AccountName=acct;AccountKey=a/b+c' })).toMatch(
    /^setting QUEUE_STORAGE_CONNECTION: its AccountKey \(5 characters\) is not base64/,
  );
  expect(failure({ QUEUE_STORAGE_CONNECTION: conn('') })).toMatch(/^setting QUEUE_STORAGE_CONNECTION: its AccountKey is empty/);
  // Cut short while copying: the padding is gone.
  expect(failure({ QUEUE_STORAGE_CONNECTION: conn(DEVSTORE_KEY.slice(0, -1)) })).toMatch(/is not base64/);
});

test('each of QUEUE_STORAGE_MORE_CONNECTIONS is checked, and named by its place', () => {
  expect(failure({ QUEUE_STORAGE_CONNECTION: conn(DEVSTORE_KEY), QUEUE_STORAGE_MORE_CONNECTIONS: `${conn(DEVSTORE_KEY)} ${conn('nope!')}` })).toMatch(
    /^setting QUEUE_STORAGE_MORE_CONNECTIONS \(connection 2\): its AccountKey \(5 characters\) is not base64/,
  );
});

test('good keys, and connections without a key, pass as they were', () => {
  for (const c of [conn(DEVSTORE_KEY), 'UseDevelopmentStorage=true', 'memory:', conn(Buffer.from('key').toString('base64'))]) {
    expect(loadConfig({ ...ENV, QUEUE_STORAGE_CONNECTION: c }).storageConnection).toBe(c);
  }
});
