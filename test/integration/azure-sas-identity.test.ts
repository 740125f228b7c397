/**
 * Auth's Azure credentials for accounts reached through the app's managed identity, with no key in
 * QUEUE_AZURE_ACCOUNTS: against an Azurite of this file that serves HTTPS and takes Entra ID tokens
 * (`--oauth basic`, the only way it hands out user delegation keys), a fake credential, and a local
 * stub of Azure Resource Manager. Containers get a user delegation SAS signed with the key
 * getUserDelegationKey answered (Azurite checks it when the SAS is used); tables get a SAS signed
 * with the key ARM's listKeys answered; listing and creating go through the identity's token.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { PipelineOptions } from '@azure/core-rest-pipeline';
import { AzureSASCredential, TableClient } from '@azure/data-tables';
import { ContainerClient, StoragePipelineOptions } from '@azure/storage-blob';
import { DEVSTORE_ACCOUNT, DEVSTORE_KEY, loadConfig } from '../../shared/config';
import { Azurite, startAzurite } from '../../shared/local/azurite';
import { STORAGE_ARM_API_VERSION } from '../../shared/storage/arm-account-key';
import { DelegatedAccounts } from '../../shared/storage/delegated-accounts';
import { DELEGATED_SAS_SKEW_MS, DELEGATED_SAS_TTL_MS } from '../../shared/storage/delegated-sas';
import { LISTED_KEY_TTL_MS, USER_DELEGATION_KEY_LIFETIME_MS, USER_DELEGATION_KEY_RENEW_BEFORE_MS } from '../../shared/storage/delegated-identity-account';
import { Certificate, FAKE_IDENTITY, FakeCredential, selfSignedCertificate } from '../helpers/entra';
import { expectError, startTestService, TestService } from '../helpers/service';

const ACCOUNT = DEVSTORE_ACCOUNT;
/** An identity account without a resourceId: containers only. */
const NO_TABLES = 'notables';
const RESOURCE_ID = `/subscriptions/00000000-0000-4000-8000-000000000000/resourceGroups/tasks/providers/Microsoft.Storage/storageAccounts/${ACCOUNT}`;

let cert: Certificate;
let azurite: Azurite;
let arm: https.Server;
let armCalls: Array<{ method: string; path: string; apiVersion: string | null; audience: string }>;
let svc: TestService;
const credential = new FakeCredential();
let tlsOptions: { ca: string };
/** The blob SDK's options do not declare tlsOptions, and hand them on to the core pipeline. */
let blobTls: StoragePipelineOptions & Pick<PipelineOptions, 'tlsOptions'>;

const blobUrl = () => `https://127.0.0.1:${azurite.ports.blob}/${ACCOUNT}`;
const tableUrl = () => `https://127.0.0.1:${azurite.ports.table}/${ACCOUNT}`;
const managementEndpoint = () => `https://127.0.0.1:${(arm.address() as AddressInfo).port}`;

/** QUEUE_AZURE_ACCOUNTS in the identity form, pointing at this file's Azurite and ARM stub. */
const accountsSetting = () =>
  JSON.stringify({
    [ACCOUNT]: { identity: true, resourceId: RESOURCE_ID, blobEndpoint: blobUrl(), tableEndpoint: tableUrl(), managementEndpoint: managementEndpoint() },
    [NO_TABLES]: { identity: true, blobEndpoint: blobUrl(), tableEndpoint: tableUrl() },
  });

/** A stub of ARM's listKeys for RESOURCE_ID: a read-only key first (never used for signing), then the account's full key. */
function startArm(): Promise<https.Server> {
  const server = https.createServer({ cert: cert.cert, key: fs.readFileSync(cert.keyPath) }, (req, res) => {
    const url = new URL(req.url!, 'https://arm');
    const token = (req.headers.authorization ?? '').replace(/^Bearer /, '');
    const audience = token ? JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).aud : '';
    armCalls.push({ method: req.method!, path: url.pathname, apiVersion: url.searchParams.get('api-version'), audience });
    res.setHeader('content-type', 'application/json');
    if (req.method === 'POST' && url.pathname === `${RESOURCE_ID}/listKeys` && audience) {
      const keys = [
        { keyName: 'kerb1', value: Buffer.alloc(64, 1).toString('base64'), permissions: 'READ' },
        { keyName: 'key1', value: DEVSTORE_KEY, permissions: 'FULL' },
      ];
      res.writeHead(200).end(JSON.stringify({ keys }));
    } else {
      res.writeHead(404).end(JSON.stringify({ error: { code: 'ResourceNotFound', message: 'not the stubbed account' } }));
    }
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

beforeAll(async () => {
  cert = selfSignedCertificate();
  tlsOptions = { ca: cert.cert };
  blobTls = { tlsOptions };
  azurite = await startAzurite({ oauth: { cert: cert.certPath, key: cert.keyPath } });
  arm = await startArm();
  svc = await startTestService({ QUEUE_AZURE_ACCOUNTS: accountsSetting() }, { delegation: { credential, tlsOptions } });
}, 60_000);

afterAll(async () => {
  await svc?.close();
  await new Promise((resolve) => (arm ? arm.close(resolve) : resolve(undefined)));
  await azurite?.stop();
  if (cert) fs.rmSync(cert.dir, { recursive: true, force: true });
});

beforeEach(() => {
  armCalls = [];
});

const fields = (sas: string) => Object.fromEntries(new URLSearchParams(sas));
/** SAS times are whole seconds. */
const seconds = (ms: number) => Math.floor(ms / 1000) * 1000;

test('azureContainerSAS through the identity: a user delegation SAS Azurite accepts, read-write uploads, read-only reads and cannot write', async () => {
  const container = `ud-${crypto.randomBytes(6).toString('hex')}`;
  const auth = svc.auth();
  const w = await auth.azureContainerSAS(ACCOUNT, container, 'read-write');
  const sas = fields(w.sas);
  // The user delegation fields, from the key getUserDelegationKey answered for the identity's token.
  expect(sas).toMatchObject({ skoid: FAKE_IDENTITY.oid, sktid: FAKE_IDENTITY.tid, sks: 'b', sr: 'c', sp: 'racwdl' });
  expect(sas.skv).toMatch(/^\d{4}-\d{2}-\d{2}$/);
  expect(credential.scopes).toContain('https://storage.azure.com/.default');
  // Taskcluster's window, inside the key's: the key lasts a day from the window's start.
  expect(Date.parse(sas.se)).toBe(seconds(Date.parse(w.expiry)));
  expect(Date.parse(sas.se) - Date.parse(sas.st)).toBe(DELEGATED_SAS_TTL_MS + DELEGATED_SAS_SKEW_MS);
  expect(Date.parse(sas.ske) - Date.parse(sas.skt)).toBe(USER_DELEGATION_KEY_LIFETIME_MS + DELEGATED_SAS_SKEW_MS);
  expect(Date.parse(sas.skt)).toBeLessThanOrEqual(Date.parse(sas.st));
  expect(Date.parse(sas.ske)).toBeGreaterThan(Date.parse(sas.se));

  const writer = new ContainerClient(`${blobUrl()}/${container}?${w.sas}`, undefined, blobTls);
  await writer.getBlockBlobClient('hello.txt').upload('hello', 5);

  const r = await auth.azureContainerSAS(ACCOUNT, container, 'read-only');
  expect(fields(r.sas)).toMatchObject({ sp: 'rl', skt: sas.skt, ske: sas.ske }); // the same key
  const reader = new ContainerClient(`${blobUrl()}/${container}?${r.sas}`, undefined, blobTls);
  expect((await reader.getBlobClient('hello.txt').downloadToBuffer()).toString()).toBe('hello');
  await expect(reader.getBlockBlobClient('other.txt').upload('no', 2)).rejects.toMatchObject({ statusCode: 403 });
  // A SAS whose user delegation fields were altered is refused: Azurite signs with the key it handed out.
  const forged = new URLSearchParams(r.sas);
  forged.set('skoid', '00000000-0000-4000-8000-000000000000');
  await expect(new ContainerClient(`${blobUrl()}/${container}?${forged}`, undefined, blobTls).getBlobClient('hello.txt').download()).rejects.toMatchObject({
    statusCode: 403,
  });

  expect((await auth.azureContainers(ACCOUNT)).containers).toContain(container);
  expect((await auth.azureContainerSAS(NO_TABLES, container, 'read-only')).sas).toContain('skoid=');
  expect(armCalls).toEqual([]);
});

test('one user delegation key signs until it would expire before a SAS, then a new one is fetched', async () => {
  let at = seconds(Date.now());
  const { azureAccounts } = loadConfig({
    QUEUE_STORAGE_CONNECTION: 'memory:',
    QUEUE_PUBLIC_URL: 'https://queue.example.com',
    QUEUE_ROOT_ACCESS_TOKEN: 'a'.repeat(22),
    QUEUE_TOKEN_ENCRYPTION_KEY: Buffer.alloc(32).toString('base64'),
    QUEUE_AZURE_ACCOUNTS: accountsSetting(),
  });
  const accounts = new DelegatedAccounts(azureAccounts, { credential, tlsOptions, now: () => new Date(at) });
  const signed = async () => fields((await accounts.containerSas(ACCOUNT, 'any-container', 'read-only')).sas);

  const first = await signed();
  expect(Date.parse(first.skt)).toBe(at - DELEGATED_SAS_SKEW_MS);
  // The last moment the key is kept: every SAS signed with it still expires minutes before it does.
  at += USER_DELEGATION_KEY_LIFETIME_MS - USER_DELEGATION_KEY_RENEW_BEFORE_MS - 1000;
  const last = await signed();
  expect({ skt: last.skt, ske: last.ske }).toEqual({ skt: first.skt, ske: first.ske });
  expect(Date.parse(last.ske) - Date.parse(last.se)).toBeGreaterThanOrEqual(USER_DELEGATION_KEY_RENEW_BEFORE_MS - DELEGATED_SAS_TTL_MS);
  at += 2000;
  const renewed = await signed();
  expect(Date.parse(renewed.skt)).toBe(at - DELEGATED_SAS_SKEW_MS);
  expect(Date.parse(renewed.ske)).toBe(at + USER_DELEGATION_KEY_LIFETIME_MS);
});

test("azureTableSAS through the identity: signed with the key ARM's listKeys answers, read once per interval; listing through the token", async () => {
  const table = `Ud${crypto.randomBytes(6).toString('hex')}`;
  const auth = svc.auth();
  const w = await auth.azureTableSAS(ACCOUNT, table, 'read-write');
  // listKeys: a POST on the account's ARM id, at the Storage API version, with a token for ARM.
  expect(armCalls).toEqual([{ method: 'POST', path: `${RESOURCE_ID}/listKeys`, apiVersion: STORAGE_ARM_API_VERSION, audience: managementEndpoint() }]);
  expect(credential.scopes).toContain(`${managementEndpoint()}/.default`);
  expect(fields(w.sas)).toMatchObject({ tn: table, sp: 'raud' });
  const writer = new TableClient(tableUrl(), table, new AzureSASCredential(w.sas), { tlsOptions });
  await writer.createEntity({ partitionKey: 'p', rowKey: 'r', value: 42 });

  const r = await auth.azureTableSAS(ACCOUNT, table, 'read-only');
  const reader = new TableClient(tableUrl(), table, new AzureSASCredential(r.sas), { tlsOptions });
  expect((await reader.getEntity('p', 'r')).value).toBe(42);
  await expect(reader.createEntity({ partitionKey: 'p', rowKey: 'x' })).rejects.toMatchObject({ statusCode: 403 });
  // The key was read once for both SAS (kept LISTED_KEY_TTL_MS).
  expect(LISTED_KEY_TTL_MS).toBeGreaterThan(60_000);
  expect(armCalls).toHaveLength(1);

  expect((await auth.azureTables(ACCOUNT)).tables).toContain(table);
  expect(credential.scopes).toContain('https://storage.azure.com/.default');
});

test('an identity account without a resourceId: a table SAS is a 400 saying why', async () => {
  const err = await expectError(svc.auth().azureTableSAS(NO_TABLES, 'SomeTable', 'read-write'), 400, 'InputError');
  expect(err.message).toMatch(/managed identity without a resourceId/);
  expect(armCalls).toEqual([]);
});
