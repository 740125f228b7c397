/**
 * Checks of the deployment templates in infra/ (Bicep) against the code.
 *
 * The template is compiled to ARM JSON by the pinned Bicep compiler (bin/infra-build.js, which CI
 * also runs with the linter): the settings, Node version and deploy-guide checks read that JSON, as
 * Azure would. The rest are text-level checks of the Bicep sources: the security baseline and the
 * layout. Nothing here deploys.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DEV_SETTING_NAMES, loadConfig, SETTING_NAMES } from '../shared/config';

const ROOT = path.resolve(__dirname, '..');
const INFRA = path.join(ROOT, 'infra');
const MAIN = path.join(INFRA, 'main.bicep');
const PARAMS = path.join(INFRA, 'main.bicepparam');
const ROLES = path.join(INFRA, 'modules', 'roles.bicep');
const LOCAL_SETTINGS_EXAMPLE = path.join(ROOT, 'local.settings.example.json');

/**
 * Built-in role definition GUIDs this project may use, checked against Microsoft's built-in role
 * list. Every GUID in infra/ must be one of these, and must appear only in infra/modules/roles.bicep.
 */
const KNOWN_ROLE_GUIDS: Record<string, string> = {
  'Storage Blob Data Owner': 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b',
  'Storage Blob Data Contributor': 'ba92f5b4-2d11-453d-a403-e96b0029c9fe',
  'Storage Queue Data Contributor': '974c5e8b-45b9-4653-ba55-5f855dd0fb88',
  'Storage Table Data Contributor': '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3',
  'Reader and Data Access': 'c12c1c16-33a1-487b-954d-41c89c60f349',
  'Key Vault Secrets User': '4633458b-17de-408a-b874-0445c86b69e6',
  'Key Vault Secrets Officer': 'b86a8fe4-44ce-4948-aee5-eccb2c155cd7',
  'Monitoring Metrics Publisher': '3913510d-42f4-4e42-8a64-420c390055eb',
  'EventGrid Data Sender': 'd5a91429-5739-47e2-a06b-3470a27159e7',
};

/** Resource API versions whose property names were checked against the published Bicep types. */
const VERIFIED_API_VERSIONS: Record<string, string[]> = {
  'Microsoft.Web/serverfarms': ['2024-04-01'],
  'Microsoft.Web/sites': ['2024-04-01'],
  'Microsoft.Web/sites/config': ['2024-04-01'],
  'Microsoft.Storage/storageAccounts': ['2023-05-01'],
  'Microsoft.KeyVault/vaults': ['2023-07-01'],
  'Microsoft.KeyVault/vaults/secrets': ['2023-07-01'],
  'Microsoft.ManagedIdentity/userAssignedIdentities': ['2023-01-31'],
  'Microsoft.OperationalInsights/workspaces': ['2023-09-01'],
  'Microsoft.Insights/components': ['2020-02-02'],
  'Microsoft.Authorization/roleAssignments': ['2022-04-01'],
  'Microsoft.EventGrid/topics': ['2025-02-15'],
};

/** App settings that are deprecated or unsupported on Flex Consumption (runtime and deployment live in functionAppConfig). */
const FLEX_DEPRECATED_SETTINGS = [
  'FUNCTIONS_WORKER_RUNTIME',
  'FUNCTIONS_WORKER_RUNTIME_VERSION',
  'FUNCTIONS_EXTENSION_VERSION',
  'WEBSITE_RUN_FROM_PACKAGE',
  'WEBSITE_CONTENTAZUREFILECONNECTIONSTRING',
  'WEBSITE_CONTENTSHARE',
  'WEBSITE_CONTENTOVERVNET',
  'WEBSITE_SKIP_CONTENTSHARE_VALIDATION',
  'WEBSITE_MOUNT_ENABLED',
  'WEBSITE_NODE_DEFAULT_VERSION',
  'WEBSITE_MAX_DYNAMIC_APPLICATION_SCALE_OUT',
  'WEBSITE_USE_PLACEHOLDER',
  'WEBSITE_VNET_ROUTE_ALL',
  'WEBSITES_CONTAINER_START_TIME_LIMIT',
  'SCM_DO_BUILD_DURING_DEPLOYMENT',
  'ENABLE_ORYX_BUILD',
  'WEBSITE_TIME_ZONE',
  'TZ',
];

/** siteConfig properties whose job moved into functionAppConfig (runtime, scale) on Flex Consumption. */
const FLEX_MOVED_SITE_PROPERTIES = [
  'linuxFxVersion',
  'nodeVersion',
  'alwaysOn',
  'functionAppScaleLimit',
  'preWarmedInstanceCount',
  'minimumElasticInstanceCount',
  'use32BitWorkerProcess',
];

const SECRET_SETTINGS = ['QUEUE_STORAGE_CONNECTION', 'QUEUE_ROOT_ACCESS_TOKEN', 'QUEUE_TOKEN_ENCRYPTION_KEY'];

// ------------------------------------------------------------------------------------------------
// A small Bicep-aware scanner: strings ('...', '''...''', with ${...} interpolation) and comments.
// ------------------------------------------------------------------------------------------------

/** Index just past the string starting at `i` (src[i] is a quote). */
function skipString(src: string, i: number): number {
  if (src.startsWith("'''", i)) {
    const end = src.indexOf("'''", i + 3);
    return end < 0 ? src.length : end + 3;
  }
  let j = i + 1;
  while (j < src.length) {
    const c = src[j];
    if (c === '\\') {
      j += 2;
    } else if (c === "'") {
      return j + 1;
    } else if (c === '$' && src[j + 1] === '{') {
      j = skipInterpolation(src, j + 2);
    } else {
      j++;
    }
  }
  return j;
}

/** Index just past the `}` closing an interpolation whose expression starts at `i`. */
function skipInterpolation(src: string, i: number): number {
  let depth = 0;
  let j = i;
  while (j < src.length) {
    const c = src[j];
    if (c === "'") {
      j = skipString(src, j);
      continue;
    }
    if (c === '{') depth++;
    if (c === '}') {
      if (depth === 0) return j + 1;
      depth--;
    }
    j++;
  }
  return j;
}

/** The source without // and block comments; strings are kept verbatim. */
function stripComments(src: string): string {
  let out = '';
  let i = 0;
  while (i < src.length) {
    if (src[i] === "'") {
      const j = skipString(src, i);
      out += src.slice(i, j);
      i = j;
    } else if (src.startsWith('//', i)) {
      const nl = src.indexOf('\n', i);
      i = nl < 0 ? src.length : nl;
    } else if (src.startsWith('/*', i)) {
      const end = src.indexOf('*/', i + 2);
      i = end < 0 ? src.length : end + 2;
    } else {
      out += src[i];
      i++;
    }
  }
  return out;
}

/** The `{ ... }` body that starts at the first `{` at or after `from` (strings skipped). */
function braceBody(code: string, from: number): string {
  let i = from;
  while (i < code.length && code[i] !== '{') i = code[i] === "'" ? skipString(code, i) : i + 1;
  const start = i;
  let depth = 0;
  while (i < code.length) {
    const c = code[i];
    if (c === "'") {
      i = skipString(code, i);
      continue;
    }
    if (c === '{') depth++;
    if (c === '}') {
      depth--;
      if (depth === 0) return code.slice(start, i + 1);
    }
    i++;
  }
  throw new Error(`unbalanced braces after offset ${from}`);
}

interface ResourceBlock {
  file: string;
  symbol: string;
  type: string;
  apiVersion: string;
  existing: boolean;
  body: string;
}

/** Top-level and nested resources declared with a full `'Type@version'` (children declared by short name are part of their parent's body). */
function resourceBlocks(file: string, code: string): ResourceBlock[] {
  const re = /\bresource\s+(\w+)\s+'([^'@]+)@([^']+)'\s*(existing\s*)?=/g;
  const blocks: ResourceBlock[] = [];
  for (const m of code.matchAll(re)) {
    blocks.push({
      file,
      symbol: m[1],
      type: m[2],
      apiVersion: m[3],
      existing: Boolean(m[4]),
      body: braceBody(code, m.index! + m[0].length),
    });
  }
  return blocks;
}

function listFiles(dir: string, pattern: RegExp): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...listFiles(full, pattern));
    else if (pattern.test(entry.name)) out.push(full);
  }
  return out.sort();
}

const rel = (file: string) => path.relative(ROOT, file);
const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const wordRe = (word: string) => new RegExp(`(?<![A-Za-z0-9_])${escapeRe(word)}(?![A-Za-z0-9_])`);
const keyRe = (key: string) => new RegExp(`^\\s*'?${escapeRe(key)}'?\\s*:`, 'm');

const bicepFiles = listFiles(INFRA, /\.bicep$/);
const infraFiles = listFiles(INFRA, /\.(bicep|bicepparam)$/);
const code = new Map(infraFiles.map((f) => [f, stripComments(fs.readFileSync(f, 'utf8'))]));
const blocks = bicepFiles.flatMap((f) => resourceBlocks(rel(f), code.get(f)!));
const declared = (type: string) => blocks.filter((b) => b.type === type && !b.existing);

/** Names of the app settings the templates set: keys of `sites/config 'appsettings'` and `siteConfig.appSettings` entries. */
function appSettingNames(): Set<string> {
  const names = new Set<string>();
  for (const b of declared('Microsoft.Web/sites/config')) {
    if (!/^\s*name:\s*'appsettings'/m.test(b.body)) continue;
    const props = braceBody(b.body, b.body.search(/^\s*properties\s*:/m));
    for (const m of props.matchAll(/^\s*'?([A-Za-z_][A-Za-z0-9_]*)'?\s*:/gm)) names.add(m[1]);
  }
  for (const b of declared('Microsoft.Web/sites')) {
    for (const m of b.body.matchAll(/\bname:\s*'([A-Za-z_][A-Za-z0-9_]*)'\s+value:/g)) names.add(m[1]);
  }
  return names;
}

function paramNames(src: string): string[] {
  return [...src.matchAll(/^\s*param\s+(\w+)/gm)].map((m) => m[1]);
}

// ------------------------------------------------------------------------------------------------

describe('infra: layout', () => {
  test('main.bicep, its parameters file and its modules exist', () => {
    expect(fs.existsSync(MAIN)).toBe(true);
    expect(fs.existsSync(PARAMS)).toBe(true);
    expect(fs.existsSync(ROLES)).toBe(true);
  });

  test('main.bicep is resource-group scoped and uses only local modules (no registry restores)', () => {
    const main = code.get(MAIN)!;
    expect(main).toMatch(/^\s*targetScope\s*=\s*'resourceGroup'/m);
    const refs = [...main.matchAll(/\bmodule\s+\w+\s+'([^']+)'/g)].map((m) => m[1]);
    expect(refs.length).toBeGreaterThan(0);
    for (const ref of refs) {
      expect(ref).not.toMatch(/^(br|ts)[:/]/);
      expect(fs.existsSync(path.join(INFRA, ref))).toBe(true);
    }
    for (const [file, src] of code) {
      expect({ file: rel(file), registry: /'br[:/]|'ts[:/]/.test(src) }).toEqual({ file: rel(file), registry: false });
    }
  });

  test('every resource uses an API version whose properties were checked', () => {
    const unverified = blocks.filter((b) => !(VERIFIED_API_VERSIONS[b.type] ?? []).includes(b.apiVersion)).map((b) => `${b.file}: ${b.type}@${b.apiVersion}`);
    expect(unverified).toEqual([]);
  });
});

describe('infra: app settings', () => {
  test('every setting the code reads (SETTING_NAMES) is set as an app setting', () => {
    const names = appSettingNames();
    const missing = SETTING_NAMES.filter((n) => !names.has(n));
    expect(missing).toEqual([]);
  });

  test('secret settings are Key Vault references', () => {
    const all = bicepFiles.map((f) => code.get(f)!).join('\n');
    for (const name of SECRET_SETTINGS) {
      const m = all.match(new RegExp(`^\\s*${name}\\s*:\\s*'([^\\n]*)$`, 'm'));
      expect({ name, value: m?.[1].startsWith('@Microsoft.KeyVault(SecretUri=') }).toEqual({ name, value: true });
    }
  });

  test('no Flex Consumption-deprecated app settings or moved site properties are set', () => {
    const found: string[] = [];
    for (const [file, src] of code) {
      for (const name of FLEX_DEPRECATED_SETTINGS) if (wordRe(name).test(src)) found.push(`${rel(file)}: ${name}`);
      for (const prop of FLEX_MOVED_SITE_PROPERTIES) if (keyRe(prop).test(src)) found.push(`${rel(file)}: ${prop}`);
    }
    expect(found).toEqual([]);
  });

  test('local.settings.example.json lists every setting the code reads, and no other QUEUE_* name', () => {
    // Deliberately not skipped when the file is absent: the example file is part of the contract.
    expect(fs.existsSync(LOCAL_SETTINGS_EXAMPLE)).toBe(true);
    const example = JSON.parse(fs.readFileSync(LOCAL_SETTINGS_EXAMPLE, 'utf8'));
    const values = example.Values ?? {};
    const missing = SETTING_NAMES.filter((n) => !Object.prototype.hasOwnProperty.call(values, n));
    expect(missing).toEqual([]);
    const unknown = Object.keys(values).filter((n) => n.startsWith('QUEUE_') && !(SETTING_NAMES as readonly string[]).includes(n));
    expect(unknown).toEqual([]);
  });
});

describe('infra: parameters', () => {
  test('main.bicepparam targets main.bicep', () => {
    expect(code.get(PARAMS)!).toMatch(/^\s*using\s+'\.\/main\.bicep'/m);
  });

  test('every parameter in main.bicepparam is declared in main.bicep', () => {
    const declaredParams = new Set(paramNames(code.get(MAIN)!));
    const unknown = paramNames(code.get(PARAMS)!).filter((p) => !declaredParams.has(p));
    expect(unknown).toEqual([]);
  });

  test('every main.bicep parameter without a default is given in main.bicepparam', () => {
    const given = new Set(paramNames(code.get(PARAMS)!));
    const required = [...code.get(MAIN)!.matchAll(/^\s*param\s+(\w+)\s+[\w.]+\s*$/gm)].map((m) => m[1]);
    expect(required.filter((p) => !given.has(p))).toEqual([]);
  });

  test('secrets are secure parameters read from the environment, not written in the parameters file', () => {
    const main = code.get(MAIN)!;
    for (const p of ['rootAccessToken', 'tokenEncryptionKey']) {
      const decorator = String.raw`@\w+\((?:'(?:[^'\\]|\\.)*'|[^)'])*\)`;
      expect(main).toMatch(new RegExp(String.raw`@secure\(\)(?:\s*${decorator})*\s*param\s+${p}\s+string\s*$`, 'm'));
      expect(code.get(PARAMS)!).toMatch(new RegExp(`^\\s*param\\s+${p}\\s*=\\s*readEnvironmentVariable\\(`, 'm'));
    }
  });
});

describe('infra: roles', () => {
  const GUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;
  const known = new Set(Object.values(KNOWN_ROLE_GUIDS));
  const tableBody = braceBody(code.get(ROLES)!, code.get(ROLES)!.search(/\bvar\s+builtInRoleIds\s*=/));
  const table = new Map([...tableBody.matchAll(/^\s*(\w+)\s*:\s*'([^']*)'/gm)].map((m) => [m[1], m[2].toLowerCase()]));

  test('role GUIDs appear only in the single table in modules/roles.bicep, and all are known built-in roles', () => {
    const stray: string[] = [];
    const unknown: string[] = [];
    for (const [file, src] of code) {
      for (const m of src.matchAll(GUID)) {
        const guid = m[0].toLowerCase();
        if (file !== ROLES) stray.push(`${rel(file)}: ${guid}`);
        if (!known.has(guid)) unknown.push(`${rel(file)}: ${guid}`);
      }
    }
    expect(stray).toEqual([]);
    expect(unknown).toEqual([]);
    expect(code.get(ROLES)!).toMatch(/@export\(\)\s*(@\w+\([^)]*\)\s*)*var\s+builtInRoleIds\s*=/);
  });

  test('each table entry is named after the role its GUID belongs to', () => {
    expect(table.size).toBeGreaterThan(0);
    const byKey = new Map(Object.entries(KNOWN_ROLE_GUIDS).map(([name, guid]) => [name.replace(/\s+/g, '').toLowerCase(), guid]));
    for (const [key, guid] of table) {
      expect({ key, guid }).toEqual({ key, guid: byKey.get(key.toLowerCase()) });
    }
  });

  test('every role assignment takes its role from the table and names the principal type', () => {
    const bad: string[] = [];
    for (const f of bicepFiles) {
      for (const m of code.get(f)!.matchAll(/'Microsoft\.Authorization\/roleDefinitions'\s*,\s*([^)]+)\)/g)) {
        const ref = m[1].trim().match(/^builtInRoleIds\.(\w+)$/);
        if (!ref || !table.has(ref[1])) bad.push(`${rel(f)}: ${m[1].trim()}`);
      }
    }
    expect(bad).toEqual([]);
    const assignments = declared('Microsoft.Authorization/roleAssignments');
    expect(assignments.length).toBeGreaterThan(0);
    for (const a of assignments) {
      expect({ symbol: a.symbol, ok: /\bprincipalType\s*:/.test(a.body) && /\broleDefinitionId\s*:/.test(a.body) }).toEqual({
        symbol: a.symbol,
        ok: true,
      });
    }
  });
});

describe('infra: security baseline', () => {
  test('storage accounts: TLS 1.2, HTTPS only, no public blob access', () => {
    const accounts = declared('Microsoft.Storage/storageAccounts');
    expect(accounts.length).toBeGreaterThanOrEqual(2);
    for (const a of accounts) {
      const facts = {
        account: `${a.file}:${a.symbol}`,
        tls: /\bminimumTlsVersion\s*:\s*'TLS1_2'/.test(a.body),
        httpsOnly: /\bsupportsHttpsTrafficOnly\s*:\s*true\b/.test(a.body),
        noPublicBlobs: /\ballowBlobPublicAccess\s*:\s*false\b/.test(a.body),
      };
      expect(facts).toEqual({ account: facts.account, tls: true, httpsOnly: true, noPublicBlobs: true });
    }
  });

  test('only the data account allows shared keys (SAS signing); the host account is identity-only', () => {
    const accounts = declared('Microsoft.Storage/storageAccounts');
    const host = accounts.filter((a) => a.file.endsWith('host-storage.bicep'));
    const data = accounts.filter((a) => a.file.endsWith('data-storage.bicep'));
    expect(host).toHaveLength(1);
    expect(data).toHaveLength(1);
    expect(host[0].body).toMatch(/\ballowSharedKeyAccess\s*:\s*false\b/);
    expect(data[0].body).toMatch(/\ballowSharedKeyAccess\s*:\s*true\b/);
  });

  test('function app: HTTPS only, TLS 1.2, no FTP, Key Vault references through its identity', () => {
    const sites = declared('Microsoft.Web/sites');
    expect(sites).toHaveLength(1);
    const body = sites[0].body;
    expect(body).toMatch(/\bhttpsOnly\s*:\s*true\b/);
    expect(body).toMatch(/\bminTlsVersion\s*:\s*'1\.2'/);
    expect(body).toMatch(/\bscmMinTlsVersion\s*:\s*'1\.2'/);
    expect(body).toMatch(/\bftpsState\s*:\s*'Disabled'/);
    expect(body).toMatch(/\bkeyVaultReferenceIdentity\s*:/);
    expect(body).toMatch(/\bcors\s*:\s*\{[^}]*\ballowedOrigins\s*:/);
  });

  test('function app: Flex Consumption plan with Node runtime and per-instance HTTP concurrency', () => {
    const plans = declared('Microsoft.Web/serverfarms');
    expect(plans).toHaveLength(1);
    expect(plans[0].body).toMatch(/\bname\s*:\s*'FC1'/);
    expect(plans[0].body).toMatch(/\btier\s*:\s*'FlexConsumption'/);
    expect(plans[0].body).toMatch(/\breserved\s*:\s*true\b/);
    const site = declared('Microsoft.Web/sites')[0].body;
    const config = braceBody(site, site.search(/\bfunctionAppConfig\s*:/));
    expect(config).toMatch(/\bruntime\s*:\s*\{\s*name\s*:\s*'node'/);
    expect(config).toMatch(/\bdeployment\s*:\s*\{\s*storage\s*:\s*\{\s*type\s*:\s*'blobContainer'/);
    expect(config).toMatch(/\btriggers\s*:\s*\{\s*http\s*:\s*\{\s*perInstanceConcurrency\s*:/);
    expect(code.get(MAIN)!).toMatch(/@allowed\(\[\s*'20'\s*'22'\s*\]\)\s*param\s+nodeRuntimeVersion\b/);
  });

  test('Key Vault uses RBAC authorization and soft delete', () => {
    const vaults = declared('Microsoft.KeyVault/vaults');
    expect(vaults).toHaveLength(1);
    expect(vaults[0].body).toMatch(/\benableRbacAuthorization\s*:\s*true\b/);
    expect(vaults[0].body).toMatch(/\benableSoftDelete\s*:\s*true\b/);
    expect(vaults[0].body).not.toMatch(/\baccessPolicies\s*:/);
  });

  test('Application Insights accepts only Entra ID-authenticated telemetry', () => {
    const components = declared('Microsoft.Insights/components');
    expect(components).toHaveLength(1);
    expect(components[0].body).toMatch(/\bDisableLocalAuth\s*:\s*true\b/);
    expect(components[0].body).toMatch(/\bWorkspaceResourceId\s*:/);
  });
});

describe('infra: several data accounts', () => {
  const main = code.get(MAIN)!;

  test('dataAccountCount (at least 1, default 1) deploys that many data accounts, the first under its original name', () => {
    expect(main).toMatch(/@minValue\(1\)\s*@maxValue\(\d+\)\s*param dataAccountCount int = 1/);
    expect(main).toMatch(/module dataStorage 'modules\/data-storage\.bicep' = \[\s*for i in range\(0, dataAccountCount\)/);
    expect(main).toMatch(/name: i == 0 \? names\.dataStorage :/);
    // Names stay within Azure's 24 characters: st + 6 + d + 2 digits + 13 (uniqueString).
    expect(main).toMatch(/moreDataStorage: 'st\$\{take\(compactPrefix, 6\)\}d'/);
    expect(main).toMatch(/moreDataStorageAccountNames: \[for i in range\(1, dataAccountCount - 1\): dataStorage\[i\]\.outputs\.name\]/);
  });

  test('the further accounts reach the app as one Key Vault secret, in account order, readable by the app identity only', () => {
    const kv = moduleTemplate(compiled(), 'keyvault');
    const joined = resourceList(kv).find((r) => r.type === 'Microsoft.Resources/deployments' && r.name === 'queue-storage-more-connections');
    expect(joined?.condition).toBe("[not(empty(parameters('moreDataStorageAccountNames')))]");
    // One connection string per further account, in the order of moreDataStorageAccountNames, with its key.
    const loop = joined.properties.parameters.parts.value.copy[0];
    expect(loop).toMatchObject({ name: 'items', count: "[length(parameters('moreDataStorageAccountNames'))]" });
    expect(loop.input).toMatch(/AccountName=\{0\};AccountKey=\{1\};.*parameters\('moreDataStorageAccountNames'\)\[copyIndex\('items'\)\], listKeys\(/);
    // The keys travel in a secure parameter (not recorded in the deployment history) and are joined by spaces.
    const inner = joined.properties.template;
    expect(inner.parameters.parts.type).toBe('secureObject');
    const [secret] = resourceList(inner).filter((r) => r.type === 'Microsoft.KeyVault/vaults/secrets');
    expect(secret.properties.value).toBe("[join(parameters('parts').items, ' ')]");
    const reads = resourceList(inner).filter((r) => r.type === 'Microsoft.Authorization/roleAssignments');
    expect(reads.map((r) => [r.properties.principalId, r.properties.principalType])).toEqual([["[parameters('readerPrincipalId')]", 'ServicePrincipal']]);
    expect(joined.properties.parameters.readerPrincipalId.value).toBe("[parameters('appPrincipalId')]");
    expect(appSettings().QUEUE_STORAGE_MORE_CONNECTIONS).toEqual({ kind: 'keyvault' });
  });
});

// ------------------------------------------------------------------------------------------------
// The compiled template (ARM JSON), as Azure reads it.
// ------------------------------------------------------------------------------------------------

const BUILD = path.join(INFRA, '.build');
const README = path.join(ROOT, 'README.md');
const NODE_TEST_SCRIPT = path.join(ROOT, 'bin', 'test-node22.sh');

// eslint-disable-next-line @typescript-eslint/no-require-imports -- a CommonJS build script
const { inputsHash, INPUTS_STAMP } = require('../bin/infra-build');

let template: any;
/** infra/main.bicep as the pinned compiler compiles it: reused if built from today's sources, else compiled now (a stale infra/.build/ must not pass). */
function compiled(): any {
  if (!template) {
    const current = fs.existsSync(INPUTS_STAMP) && fs.readFileSync(INPUTS_STAMP, 'utf8') === inputsHash();
    if (!current) {
      const r = spawnSync(process.execPath, [path.join(ROOT, 'bin', 'infra-build.js'), '--no-lint'], { cwd: ROOT, encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`bin/infra-build.js failed (exit ${r.status}):\n${r.stdout}${r.stderr}`);
    }
    template = JSON.parse(fs.readFileSync(path.join(BUILD, 'main.json'), 'utf8'));
  }
  return template;
}

/** Resources of a template: an array, or (languageVersion 2.0) an object keyed by symbolic name. */
function resourceList(t: any): any[] {
  return Array.isArray(t.resources) ? t.resources : Object.values(t.resources ?? {});
}

function moduleDeployment(t: any, name: string): any {
  const d = resourceList(t).find((r) => r.type === 'Microsoft.Resources/deployments' && r.name === name);
  if (!d) throw new Error(`no module deployment '${name}' in the compiled template`);
  return d;
}

function moduleTemplate(t: any, name: string): any {
  return moduleDeployment(t, name).properties.template;
}

/** What an app setting holds once deployed with the template's defaults. */
type Setting = { kind: 'literal'; value: string } | { kind: 'keyvault' } | { kind: 'derived'; expr: string };

/**
 * Resolves an ARM value through the module's parameters and then main.json's parameter defaults.
 * Only `parameters('x')` and `string(parameters('x'))` are followed; anything else that is not a
 * Key Vault reference depends on the deployment (resource names, references) and is `derived`.
 */
function resolveArm(value: unknown, scopes: Array<(name: string) => unknown>): Setting {
  if (typeof value !== 'string') return { kind: 'literal', value: String(value) };
  if (!value.startsWith('[')) return { kind: 'literal', value };
  if (value.includes('@Microsoft.KeyVault(SecretUri=')) return { kind: 'keyvault' };
  const m = value.match(/^\[(string\()?parameters\('(\w+)'\)\)?\]$/);
  if (m && scopes.length > 0 && Boolean(m[1]) === value.endsWith('))]')) return resolveArm(scopes[0](m[2]), scopes.slice(1));
  return { kind: 'derived', expr: value };
}

/** The function app's app settings, resolved with the template's parameter defaults. */
function appSettings(): Record<string, Setting> {
  const t = compiled();
  const app = moduleDeployment(t, 'functionapp');
  const configs = resourceList(app.properties.template).filter((r) => r.type === 'Microsoft.Web/sites/config' && /'appsettings'\)\]$/.test(r.name));
  expect(configs).toHaveLength(1);
  // A module parameter is { value } or, when chosen by a condition, one expression for the whole entry.
  const moduleParam = (n: string) => {
    const p = app.properties.parameters[n];
    return typeof p === 'string' ? p : p?.value;
  };
  const scopes = [moduleParam, (n: string) => t.parameters[n]?.defaultValue];
  return Object.fromEntries(Object.entries(configs[0].properties).map(([k, v]) => [k, resolveArm(v, scopes)]));
}

/** Settings of the Functions host and its telemetry, set beside the app's own QUEUE_* settings. */
const HOST_SETTINGS = [
  'AzureWebJobsStorage__accountName',
  'AzureWebJobsStorage__credential',
  'AzureWebJobsStorage__clientId',
  'APPLICATIONINSIGHTS_CONNECTION_STRING',
  'APPLICATIONINSIGHTS_AUTHENTICATION_STRING',
];

/** App settings whose value depends on the deployment (host names, endpoints, identities), with what each comes from. */
const DERIVED_SETTINGS: Record<string, RegExp> = {
  QUEUE_PUBLIC_URL: /defaultHostName/,
  QUEUE_PUBLIC_QUEUE_ENDPOINT: /outputs\.queueEndpoint/,
  QUEUE_EVENTGRID_ENDPOINT: /^\[if\(parameters\('deployEventGridTopic'\), .*outputs\.endpoint\.value/,
  QUEUE_EVENTGRID_CLIENT_ID: /'identity'\).*outputs\.clientId\.value/,
  QUEUE_AZURE_ACCOUNTS: /^\[if\(empty\(parameters\('delegatedAccounts'\)\), '', string\(toObject\(parameters\('delegatedAccounts'\)/,
};

/**
 * Settings whose deployed value differs from the code's built-in default on purpose, and why.
 * QUEUE_SAS_PROTOCOL: unset, the code picks the queue endpoint's scheme; Azure's is https, and saying so keeps http out.
 */
const NOT_THE_CODE_DEFAULT = ['QUEUE_SAS_PROTOCOL'];

/** Settings that make a valid configuration with nothing else set (values of the right shape, never deployed). */
const MINIMAL_ENV: Record<string, string> = {
  QUEUE_STORAGE_CONNECTION: 'memory:',
  QUEUE_ROOT_ACCESS_TOKEN: 'a'.repeat(22),
  QUEUE_TOKEN_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64'),
  QUEUE_PUBLIC_URL: 'https://queue.example.com',
};

/** Rows of README.md's settings table for `npm start` only (read in shared/local/, never by the deployed app). */
const LOCAL_ONLY_ROW = /^(`npm start` only|local host only)\b/;

/** The settings table of README.md: name to its "default" and "meaning" cells. */
function readmeRows(): Array<{ name: string; dflt: string; meaning: string }> {
  const rows = [...fs.readFileSync(README, 'utf8').matchAll(/^\|\s*`(QUEUE_[A-Z0-9_]+)`\s*\|([^|]*)\|([^\n]*)\|\s*$/gm)];
  return rows.map((m) => ({ name: m[1], dflt: m[2].trim(), meaning: m[3].trim() }));
}

/** Development settings (the faithful storage mode): in the README's table, never deployed. */
const isDevSetting = (name: string) => (DEV_SETTING_NAMES as readonly string[]).includes(name);

/** README's default cell of every setting the deployed app reads. */
function readmeDefaults(): Map<string, string> {
  return new Map(
    readmeRows()
      .filter((r) => !LOCAL_ONLY_ROW.test(r.meaning) && !isDevSetting(r.name))
      .map((r) => [r.name, r.dflt]),
  );
}

/** The value a README default cell names: its first `code` span, '' for "unset"/"empty", else none (e.g. "generated locally"). */
function readmeValue(cell: string): string | undefined {
  const code = cell.match(/^`([^`]*)`/);
  if (code) return code[1];
  if (/^(unset|empty)\b/.test(cell)) return '';
  return undefined;
}

/** The settings loadConfig refuses to start without, found by leaving each out of a valid set. */
function requiredSettings(): string[] {
  return SETTING_NAMES.filter((name) => {
    const env: Record<string, string> = { ...MINIMAL_ENV };
    delete env[name];
    try {
      loadConfig(env);
      return false;
    } catch (err) {
      return (err as Error).message.includes(`setting ${name} is required`);
    }
  });
}

const sameAsDefault = (name: string, value: string) => {
  expect({ name, config: loadConfig({ ...MINIMAL_ENV, [name]: value }) }).toEqual({ name, config: loadConfig(MINIMAL_ENV) });
};

beforeAll(() => compiled(), 5 * 60_000);

describe('infra: compiled template and the settings the code reads', () => {
  test('the function app gets exactly the QUEUE_* settings shared/config.ts reads, besides the host settings', () => {
    const names = Object.keys(appSettings());
    expect(names.filter((n) => n.startsWith('QUEUE_')).sort()).toEqual([...SETTING_NAMES].sort());
    expect(names.filter((n) => !n.startsWith('QUEUE_')).sort()).toEqual([...HOST_SETTINGS].sort());
  });

  test('every setting name shared/config.ts mentions is in SETTING_NAMES, and README.md documents exactly those (besides `npm start` ones)', () => {
    const mentioned = new Set(fs.readFileSync(path.join(ROOT, 'shared', 'config.ts'), 'utf8').match(/\bQUEUE_[A-Z0-9_]+\b/g));
    // Development settings (the faithful storage mode) are documented too, and never deployed.
    const known = [...SETTING_NAMES, ...DEV_SETTING_NAMES] as readonly string[];
    expect([...mentioned].filter((n) => !known.includes(n))).toEqual([]);
    expect([...readmeDefaults().keys()].sort()).toEqual([...SETTING_NAMES].sort());
    expect(
      readmeRows()
        .filter((r) => isDevSetting(r.name))
        .map((r) => r.name),
    ).toEqual([...DEV_SETTING_NAMES]);
    // The rows for `npm start` only name settings the local host reads, and none the app reads.
    const local = readmeRows().filter((r) => LOCAL_ONLY_ROW.test(r.meaning));
    const localSources = fs
      .readdirSync(path.join(ROOT, 'shared', 'local'))
      .map((f) => fs.readFileSync(path.join(ROOT, 'shared', 'local', f), 'utf8'))
      .join('\n');
    for (const { name } of local) {
      expect({ name, readByTheLocalHost: wordRe(name).test(localSources), readByTheApp: (SETTING_NAMES as readonly string[]).includes(name) }).toEqual({
        name,
        readByTheLocalHost: true,
        readByTheApp: false,
      });
    }
  });

  test('the required settings get a Key Vault reference or a value the deployment derives', () => {
    const required = requiredSettings();
    expect(required.sort()).toEqual(['QUEUE_PUBLIC_URL', 'QUEUE_ROOT_ACCESS_TOKEN', 'QUEUE_STORAGE_CONNECTION', 'QUEUE_TOKEN_ENCRYPTION_KEY']);
    const settings = appSettings();
    for (const name of required) {
      const s = settings[name];
      const ok = s.kind === 'keyvault' || (s.kind === 'literal' && s.value !== '') || (s.kind === 'derived' && name in DERIVED_SETTINGS);
      expect({ name, setting: s, ok }).toEqual({ name, setting: s, ok: true });
    }
    for (const name of SECRET_SETTINGS) expect({ name, setting: settings[name] }).toEqual({ name, setting: { kind: 'keyvault' } });
  });

  test('settings that depend on the deployment come from where they should', () => {
    const settings = appSettings();
    const derived = Object.entries(settings).filter(([n, s]) => n.startsWith('QUEUE_') && s.kind === 'derived');
    expect(derived.map(([n]) => n).sort()).toEqual(Object.keys(DERIVED_SETTINGS).sort());
    for (const [name, s] of derived)
      expect({ name, expr: (s as { expr: string }).expr }).toEqual({ name, expr: expect.stringMatching(DERIVED_SETTINGS[name]) });
  });

  test("the template's values are the code's defaults and the README's (reaper schedule included)", () => {
    const readme = readmeDefaults();
    const settings = appSettings();
    for (const [name, s] of Object.entries(settings)) {
      if (!name.startsWith('QUEUE_') || s.kind !== 'literal') continue;
      expect({ name, readme: readmeValue(readme.get(name) ?? '') }).toEqual({ name, readme: s.value });
      if (!NOT_THE_CODE_DEFAULT.includes(name)) sameAsDefault(name, s.value);
    }
    expect(settings.QUEUE_REAPER_SCHEDULE).toEqual({ kind: 'literal', value: '*/10 * * * * *' });
  });

  test("the README's defaults are the code's defaults", () => {
    const required = requiredSettings();
    for (const [name, cell] of readmeDefaults()) {
      const value = readmeValue(cell);
      if (value === undefined || required.includes(name) || NOT_THE_CODE_DEFAULT.includes(name)) continue;
      sameAsDefault(name, value);
    }
  });

  test('main.bicepparam restates the template defaults it sets (secrets aside)', () => {
    const given = JSON.parse(fs.readFileSync(path.join(BUILD, 'main.parameters.check.json'), 'utf8')).parameters;
    const declaredParams = compiled().parameters;
    const differing = Object.entries(given)
      .filter(([name]) => !['rootAccessToken', 'tokenEncryptionKey'].includes(name))
      .filter(([name, v]) => JSON.stringify((v as { value: unknown }).value) !== JSON.stringify(declaredParams[name]?.defaultValue))
      .map(([name, v]) => `${name}: ${JSON.stringify((v as { value: unknown }).value)} vs ${JSON.stringify(declaredParams[name]?.defaultValue)}`);
    expect(differing).toEqual([]);
  });
});

describe('infra: storage accounts Auth delegates (delegatedStorageAccounts)', () => {
  /** What a user delegation SAS (blobs), listing and creating (token), and a table SAS (listKeys) need; Blob Data Contributor holds generateUserDelegationKey. */
  const ROLES = ['storageBlobDataContributor', 'storageTableDataContributor', 'readerAndDataAccess'];
  const deployment = () => resourceList(compiled()).find((r) => r.type === 'Microsoft.Resources/deployments' && r.copy?.name === 'delegatedAccounts');

  test('none by default; each named account gets a deployment in its resource group (default: this one)', () => {
    expect(compiled().parameters.delegatedStorageAccounts).toMatchObject({ type: 'array', defaultValue: [] });
    const d = deployment();
    expect(d.copy.count).toBe("[length(parameters('delegatedStorageAccounts'))]");
    expect(d.resourceGroup).toBe("[coalesce(tryGet(parameters('delegatedStorageAccounts')[copyIndex()], 'resourceGroup'), resourceGroup().name)]");
    expect(d.properties.parameters.accountName.value).toBe("[parameters('delegatedStorageAccounts')[copyIndex()].name]");
    expect(d.properties.parameters.appPrincipalId.value).toMatch(/'identity'\).*\.outputs\.principalId\.value\]$/);
  });

  test('the app identity gets blob and table data roles and listKeys on the account, nothing more', () => {
    const grants = resourceList(deployment().properties.template).filter((r) => r.type === 'Microsoft.Authorization/roleAssignments');
    const role = (r: string) => `[subscriptionResourceId('Microsoft.Authorization/roleDefinitions', variables('builtInRoleIds').${r})]`;
    expect(grants.map((g) => g.properties.roleDefinitionId).sort()).toEqual(ROLES.map(role).sort());
    for (const g of grants) {
      expect({ scope: g.scope, principalId: g.properties.principalId, principalType: g.properties.principalType }).toEqual({
        scope: "[resourceId('Microsoft.Storage/storageAccounts', parameters('accountName'))]",
        principalId: "[parameters('appPrincipalId')]",
        principalType: 'ServicePrincipal',
      });
    }
  });

  test("each account's entry is the identity form shared/config.ts reads, and QUEUE_AZURE_ACCOUNTS is built from them after the roles", () => {
    const setting = deployment().properties.template.outputs.setting.value;
    expect(setting).toEqual({
      identity: true,
      clientId: "[parameters('appClientId')]",
      resourceId: "[resourceId('Microsoft.Storage/storageAccounts', parameters('accountName'))]",
      blobEndpoint: "[reference('account').primaryEndpoints.blob]",
      tableEndpoint: "[reference('account').primaryEndpoints.table]",
      managementEndpoint: '[environment().resourceManager]',
    });
    // As a deployment fills it in, the code takes it: an identity account with its resourceId.
    const resourceId = '/subscriptions/00000000-0000-4000-8000-000000000000/resourceGroups/tasks/providers/Microsoft.Storage/storageAccounts/sttasks01';
    const filled = {
      ...setting,
      clientId: '00000000-0000-4000-8000-00000000c11d',
      resourceId,
      blobEndpoint: 'https://sttasks01.blob.core.windows.net/',
      tableEndpoint: 'https://sttasks01.table.core.windows.net/',
      managementEndpoint: 'https://management.azure.com/',
    };
    const parsed = loadConfig({ ...MINIMAL_ENV, QUEUE_AZURE_ACCOUNTS: JSON.stringify({ sttasks01: filled }) }).azureAccounts;
    expect(parsed).toEqual({
      sttasks01: expect.objectContaining({ kind: 'identity', accountName: 'sttasks01', resourceId, blobEndpoint: 'https://sttasks01.blob.core.windows.net' }),
    });
    // The function app's entries are the accounts' names and those outputs; its deployment waits for theirs.
    const app = moduleDeployment(compiled(), 'functionapp');
    const [entries] = app.properties.parameters.delegatedAccounts.copy;
    expect(entries.input).toMatch(
      /^\[createObject\('name', parameters\('delegatedStorageAccounts'\)\[copyIndex\('value'\)\]\.name, 'setting', reference\(.*\)\.outputs\.setting\.value\)\]$/,
    );
    expect(app.dependsOn).toContain('delegatedAccounts');
  });
});

describe('infra: the Node.js version', () => {
  const majors = (range: string) => [...range.matchAll(/\^(\d+)/g)].map((m) => m[1]).sort();

  test('the template deploys the Node major CI tests, and allows only majors `engines` names', () => {
    const param = compiled().parameters.nodeRuntimeVersion;
    const pinned = fs.readFileSync(NODE_TEST_SCRIPT, 'utf8').match(/^NODE22_VERSION=(\d+)\.\d+\.\d+$/m);
    expect(pinned).not.toBeNull();
    expect(param.defaultValue).toBe(pinned![1]);
    const engines = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).engines.node as string;
    expect(engines).toMatch(/^\^\d+\.\d+\.\d+( \|\| \^\d+\.\d+\.\d+)*$/);
    expect(majors(engines)).toEqual(expect.arrayContaining(param.allowedValues));
    expect(param.allowedValues).toContain(pinned![1]);
    const app = moduleTemplate(compiled(), 'functionapp');
    const site = resourceList(app).find((r) => r.type === 'Microsoft.Web/sites');
    expect(site.properties.functionAppConfig.runtime).toEqual({ name: 'node', version: "[parameters('nodeRuntimeVersion')]" });
    expect(moduleDeployment(compiled(), 'functionapp').properties.parameters.nodeRuntimeVersion.value).toBe("[parameters('nodeRuntimeVersion')]");
  });
});

// ------------------------------------------------------------------------------------------------
// The deploy guide, infra/README.md, against the compiled template.
// ------------------------------------------------------------------------------------------------

/** The guide's shell commands (```bash blocks): comments dropped, continuations joined, heredoc bodies left out. */
function guideCommands(): string[] {
  const guide = fs.readFileSync(path.join(INFRA, 'README.md'), 'utf8');
  const out: string[] = [];
  for (const block of guide.matchAll(/^```bash\n([\s\S]*?)^```$/gm)) {
    let current = '';
    let heredoc: string | undefined;
    for (const raw of block[1].split('\n')) {
      if (heredoc !== undefined) {
        if (raw.trim() === heredoc) heredoc = undefined;
        continue;
      }
      const line = raw.replace(/(^|\s)#.*$/, '').trimEnd();
      heredoc = line.match(/<<-?'?(\w+)'?/)?.[1];
      if (line.endsWith('\\')) {
        current += `${line.slice(0, -1).trim()} `;
        continue;
      }
      current += line.trim();
      if (current !== '') out.push(current);
      current = '';
    }
  }
  return out;
}

/** Shell words, quotes removed (enough for the guide's commands). */
function shellWords(s: string): string[] {
  return [...s.matchAll(/"((?:[^"\\]|\\.)*)"|'([^']*)'|([^\s"']+)/g)].map((m) => m[1] ?? m[2] ?? m[3]);
}

/** The `name=value` parameters the guide gives: `PARAMS=(…)`, `PARAMS+=(…)` and `--parameters name=value`. */
function guideParameters(commands: string[]): { first: string[]; all: Array<[string, string]> } {
  const all: Array<[string, string]> = [];
  let first: string[] = [];
  for (const c of commands) {
    const list = c.match(/^PARAMS(\+)?=\((.*)\)$/);
    if (list) {
      const words = shellWords(list[2]).map((w) => w.split('=', 2) as [string, string]);
      all.push(...words);
      if (!list[1] && first.length === 0) first = words.map(([k]) => k);
    }
    const words = shellWords(c);
    words.forEach((w, i) => {
      if (words[i - 1] === '--parameters' && /^\w+=/.test(w)) all.push(w.split('=', 2) as [string, string]);
    });
  }
  return { first, all };
}

describe('infra: the deploy guide (infra/README.md) against the compiled template', () => {
  const commands = guideCommands();
  const deployments = () => commands.filter((c) => /^az deployment group (create|what-if)\b/.test(c));

  test('it deploys the compiled template, where npm run infra:build writes it, under one deployment name', () => {
    expect(deployments().length).toBeGreaterThanOrEqual(4);
    for (const c of deployments()) {
      const words = shellWords(c);
      const file = words[words.indexOf('--template-file') + 1];
      expect({ c, file }).toEqual({ c, file: path.relative(ROOT, path.join(BUILD, 'main.json')) });
      expect({ c, parameters: words[words.indexOf('--parameters') + 1] }).toEqual({ c, parameters: '${PARAMS[@]}' });
    }
    const names = commands
      .filter((c) => /^(\w+=\$\()?az deployment group (create|show)\b/.test(c) || /out\(\)/.test(c))
      .map((c) => shellWords(c)[shellWords(c).indexOf('--name') + 1]);
    expect(new Set(names)).toEqual(new Set(['tcq']));
    expect(fs.existsSync(path.join(BUILD, 'main.json'))).toBe(true);
  });

  test("every parameter it gives is one of the template's, of the right type and range, and the first deployment gives every required one", () => {
    const declaredParams = compiled().parameters;
    const { first, all } = guideParameters(commands);
    expect(all.length).toBeGreaterThan(0);
    const problems: string[] = [];
    for (const [name, value] of all) {
      const p = declaredParams[name];
      if (!p) {
        problems.push(`${name}: no such parameter`);
        continue;
      }
      if (value.includes('$')) continue; // a shell variable: its value is the reader's
      if (p.type === 'int' && !(/^\d+$/.test(value) && Number(value) >= (p.minValue ?? -Infinity) && Number(value) <= (p.maxValue ?? Infinity))) {
        problems.push(`${name}=${value}: not an int within the template's range`);
      }
      if (p.allowedValues && !p.allowedValues.map(String).includes(value)) problems.push(`${name}=${value}: not one of ${p.allowedValues}`);
      if (/string/i.test(p.type) && (value.length < (p.minLength ?? 0) || value.length > (p.maxLength ?? Infinity)))
        problems.push(`${name}=${value}: bad length`);
    }
    expect(problems).toEqual([]);
    const required = Object.entries(declaredParams)
      .filter(([, p]) => (p as { defaultValue?: unknown }).defaultValue === undefined)
      .map(([n]) => n);
    expect(required.sort()).toEqual(['rootAccessToken', 'tokenEncryptionKey']);
    expect(required.filter((n) => !first.includes(n))).toEqual([]);
  });

  test('every output it reads is one the template has, and its outputs table lists them all', () => {
    const outputs = Object.keys(compiled().outputs);
    const text = commands.join('\n');
    const read = [...text.matchAll(/properties\.outputs\.(\w+)/g), ...text.matchAll(/\$\(out (\w+)\)/g)].map((m) => m[1]);
    expect(read.length).toBeGreaterThan(5);
    expect(read.filter((o) => !outputs.includes(o))).toEqual([]);
    const guide = fs.readFileSync(path.join(INFRA, 'README.md'), 'utf8');
    const table = guide.slice(guide.indexOf('| Output | Meaning |'));
    const rows = table.slice(0, table.indexOf('\n\n')).split('\n').slice(2);
    const listed = rows.flatMap((r) => [...r.split('|')[1].matchAll(/`(\w+)`/g)].map((m) => m[1]));
    expect(listed.sort()).toEqual([...outputs].sort());
  });

  test('every npm script it runs exists', () => {
    const scripts = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).scripts;
    const used = commands.flatMap((c) => [...c.matchAll(/\bnpm run ([\w:-]+)/g)].map((m) => m[1]));
    expect(used).toEqual(expect.arrayContaining(['infra:build', 'package', 'worker']));
    expect(used.filter((s) => !(s in scripts))).toEqual([]);
  });
});
