/**
 * Auth's Azure credentials through taskcluster-client's `Auth` class, against Azurite: the SAS
 * handed out for a table or container works with the Azure SDK at its level (read-only reads and
 * cannot write; read-write creates the table or container and writes), the scopes are
 * Taskcluster's, and an account the deployment does not name is a 404.
 */
import crypto from 'node:crypto';
import { AzureSASCredential, TableClient, TableServiceClient } from '@azure/data-tables';
import { BlobServiceClient, ContainerClient } from '@azure/storage-blob';
import { startTestService, TestService, slugid, expectError } from '../helpers/service';

const ACCOUNT = 'devstoreaccount1';
let svc: TestService;
let connection: string;
beforeAll(async () => {
  connection = process.env.TEST_STORAGE_CONNECTION!;
  svc = await startTestService({ QUEUE_AZURE_ACCOUNTS: JSON.stringify({ [ACCOUNT]: connection }) });
});
afterAll(async () => svc?.close());

const tableUrl = () => TableServiceClient.fromConnectionString(connection, { allowInsecureConnection: true }).url.replace(/\/+$/, '');
const blobUrl = () => BlobServiceClient.fromConnectionString(connection).url.replace(/\/+$/, '');

async function authWith(scopes: string[]): Promise<any> {
  const clientId = `azure/${slugid()}`;
  const c = await svc.auth().createClient(clientId, { expires: new Date(Date.now() + 3600_000).toJSON(), description: 'azure sas test', scopes });
  return new svc.tc.Auth({ rootUrl: svc.rootUrl, credentials: { clientId, accessToken: c.accessToken }, retries: 0 });
}

test('azureAccounts names the accounts of QUEUE_AZURE_ACCOUNTS', async () => {
  expect(await (await authWith(['auth:azure-table:list-accounts'])).azureAccounts()).toEqual({ accounts: [ACCOUNT] });
});

test('azureTableSAS: read-write creates the table and writes through the SAS; read-only reads and cannot write', async () => {
  const table = `Sas${crypto.randomBytes(6).toString('hex')}`;
  const rw = await authWith([`auth:azure-table:read-write:${ACCOUNT}/${table}`]);
  const w = await rw.azureTableSAS(ACCOUNT, table, 'read-write');
  expect(Date.parse(w.expiry)).toBeGreaterThan(Date.now() + 20 * 60_000);
  const writer = new TableClient(`${tableUrl()}`, table, new AzureSASCredential(w.sas), { allowInsecureConnection: true });
  await writer.createEntity({ partitionKey: 'p', rowKey: 'r', value: 42 });

  const ro = await authWith([`auth:azure-table:read-only:${ACCOUNT}/${table}`]);
  const r = await ro.azureTableSAS(ACCOUNT, table, 'read-only');
  const reader = new TableClient(`${tableUrl()}`, table, new AzureSASCredential(r.sas), { allowInsecureConnection: true });
  expect((await reader.getEntity('p', 'r')).value).toBe(42);
  await expect(reader.createEntity({ partitionKey: 'p', rowKey: 'x' })).rejects.toMatchObject({ statusCode: 403 });
  // read-only scopes do not give read-write; read-write scopes give read-only too.
  await expectError(ro.azureTableSAS(ACCOUNT, table, 'read-write'), 403, 'InsufficientScopes');
  expect((await rw.azureTableSAS(ACCOUNT, table, 'read-only')).sas).toBeTruthy();
  // Again read-write: the table exists already, which is fine.
  expect((await rw.azureTableSAS(ACCOUNT, table, 'read-write')).sas).toBeTruthy();
  expect((await (await authWith([`auth:azure-table:list-tables:${ACCOUNT}`])).azureTables(ACCOUNT)).tables).toContain(table);
});

test('azureContainerSAS: read-write creates the container and uploads; read-only lists and reads, cannot write', async () => {
  const container = `sas-${crypto.randomBytes(6).toString('hex')}`;
  const rw = await authWith([`auth:azure-container:read-write:${ACCOUNT}/${container}`]);
  const w = await rw.azureContainerSAS(ACCOUNT, container, 'read-write');
  const writer = new ContainerClient(`${blobUrl()}/${container}?${w.sas}`);
  await writer.getBlockBlobClient('hello.txt').upload('hello', 5);

  const ro = await authWith([`auth:azure-container:read-only:${ACCOUNT}/${container}`]);
  const r = await ro.azureContainerSAS(ACCOUNT, container, 'read-only');
  const reader = new ContainerClient(`${blobUrl()}/${container}?${r.sas}`);
  expect((await reader.getBlobClient('hello.txt').downloadToBuffer()).toString()).toBe('hello');
  await expect(reader.getBlockBlobClient('other.txt').upload('no', 2)).rejects.toMatchObject({ statusCode: 403 });
  expect((await (await authWith([`auth:azure-container:list-containers:${ACCOUNT}`])).azureContainers(ACCOUNT)).containers).toContain(container);
});

test('an account the deployment does not name is a 404; bad names and levels are 400', async () => {
  const auth = svc.auth();
  await expectError(auth.azureTableSAS('elsewhere', 'SomeTable', 'read-only'), 404, 'ResourceNotFound');
  await expectError(auth.azureContainerSAS(ACCOUNT, 'Bad_Name', 'read-only'), 400);
  await expectError(auth.azureTableSAS(ACCOUNT, 'SomeTable', 'admin'), 400);
});
