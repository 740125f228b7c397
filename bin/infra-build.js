#!/usr/bin/env node
/**
 * `npm run infra:build`: compiles infra/main.bicep to ARM JSON in infra/.build/main.json and lints
 * every Bicep file, with the pinned Bicep compiler that `dotnet restore` of infra/bicep-cli/ brings
 * from NuGet (no other download). infra/main.bicepparam is compiled too, with placeholder secrets,
 * to infra/.build/main.parameters.check.json: for the tests, never to deploy. Any error or warning fails: a warning that stays is suppressed in the
 * source with `#disable-next-line <code>` and a comment saying why.
 *
 *   --no-lint  compile only (the settings tests use this)
 *
 * infra/.build/inputs.sha256 records a hash of the inputs a successful build compiled, so the tests
 * reuse an output that is current (CI builds just before them) and compile again otherwise.
 */
'use strict';
const { spawnSync } = require('node:child_process');
const { createHash } = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const INFRA = path.join(ROOT, 'infra');
const PROJECT = path.join(INFRA, 'bicep-cli', 'bicep-cli.csproj');
const PACKAGES = path.join(ROOT, '.tools', 'nuget');
const OUT = path.join(INFRA, '.build');
const PACKAGE_ID = 'Azure.Bicep.CommandLine.linux-x64';

/**
 * Placeholders for the secrets main.bicepparam reads from the environment, so it can be linted
 * without real ones: long enough for the template's @minLength, never deployed.
 */
const PARAM_PLACEHOLDERS = {
  QUEUE_ROOT_ACCESS_TOKEN: 'lint-placeholder-root-access-token',
  QUEUE_TOKEN_ENCRYPTION_KEY: Buffer.alloc(32).toString('base64'),
};

/** Where a build records what it compiled: infra/.build/ is current while this matches inputsHash(). */
const INPUTS_STAMP = path.join(OUT, 'inputs.sha256');

/** A hash of everything the build reads: the Bicep sources, the pinned compiler's project and this script. */
function inputsHash() {
  const hash = createHash('sha256');
  const files = [__filename];
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const full = path.join(dir, e.name);
      if (e.isDirectory()) walk(full);
      else if (/\.(bicep|bicepparam|csproj)$/.test(e.name)) files.push(full);
    }
  };
  walk(INFRA);
  for (const f of files) hash.update(path.relative(ROOT, f)).update('\0').update(fs.readFileSync(f)).update('\0');
  return hash.digest('hex');
}

function fail(msg) {
  console.error(`infra-build: ${msg}`);
  process.exit(1);
}

function pinnedVersion() {
  const m = fs.readFileSync(PROJECT, 'utf8').match(new RegExp(`Include="${PACKAGE_ID.replace(/\./g, '\\.')}"\\s+Version="\\[([^\\]]+)\\]"`));
  if (!m) fail(`${path.relative(ROOT, PROJECT)} pins no exact version of ${PACKAGE_ID}`);
  return m[1];
}

/** The bicep executable, restored first if it is not there yet. */
function bicepPath() {
  if (process.platform !== 'linux' || process.arch !== 'x64') fail(`the pinned compiler is ${PACKAGE_ID}; this is ${process.platform}-${process.arch}`);
  const version = pinnedVersion();
  const exe = path.join(PACKAGES, PACKAGE_ID.toLowerCase(), version, 'tools', 'bicep');
  if (!fs.existsSync(exe)) {
    const env = { ...process.env, DOTNET_CLI_TELEMETRY_OPTOUT: '1', DOTNET_NOLOGO: '1', DOTNET_SKIP_FIRST_TIME_EXPERIENCE: '1' };
    const r = spawnSync('dotnet', ['restore', PROJECT, '--packages', PACKAGES, '--verbosity', 'quiet'], { stdio: 'inherit', env });
    if (r.error) fail(`the .NET SDK is needed to restore the Bicep compiler from NuGet, and 'dotnet' could not run: ${r.error.message}`);
    if (r.status !== 0) fail(`dotnet restore of ${path.relative(ROOT, PROJECT)} failed (exit ${r.status})`);
    if (!fs.existsSync(exe)) fail(`the restore left no ${path.relative(ROOT, exe)}`);
  }
  fs.chmodSync(exe, 0o755); // NuGet does not keep file modes
  return exe;
}

/** Runs bicep; returns its diagnostics (errors and warnings), each line once. */
function run(exe, args, env = {}) {
  const r = spawnSync(exe, args, { cwd: ROOT, encoding: 'utf8', env: { ...process.env, ...env } });
  if (r.error) fail(`could not run bicep: ${r.error.message}`);
  const lines = `${r.stdout}\n${r.stderr}`.split('\n').filter((l) => /: (Error|Warning) /.test(l));
  if (r.status !== 0 && lines.length === 0) fail(`bicep ${args[0]} exited ${r.status}:\n${r.stdout}${r.stderr}`);
  return lines;
}

function main() {
  const lint = !process.argv.includes('--no-lint');
  const exe = bicepPath();
  fs.mkdirSync(OUT, { recursive: true });
  fs.rmSync(INPUTS_STAMP, { force: true });
  const inputs = inputsHash();
  const findings = new Set(run(exe, ['build', 'infra/main.bicep', '--outdir', OUT]));
  // The parameters file as the deployment would read it (secrets: the placeholders), for the tests.
  for (const l of run(exe, ['build-params', 'infra/main.bicepparam', '--outfile', path.join(OUT, 'main.parameters.check.json')], PARAM_PLACEHOLDERS)) {
    findings.add(l);
  }
  if (lint) {
    for (const l of run(exe, ['lint', '--pattern', 'infra/**/*.bicep'])) findings.add(l);
    for (const l of run(exe, ['lint', '--pattern', 'infra/**/*.bicepparam'], PARAM_PLACEHOLDERS)) findings.add(l);
  }
  const rel = (l) => l.split(ROOT + path.sep).join('');
  for (const l of findings) console.error(rel(l));
  if (findings.size > 0) fail(`${findings.size} finding(s); fix them, or suppress a warning with #disable-next-line and say why`);
  fs.writeFileSync(INPUTS_STAMP, inputs);
  console.log(
    `infra-build: compiled infra/main.bicep to ${path.relative(ROOT, path.join(OUT, 'main.json'))}${lint ? ', linted every Bicep file' : ''}: no findings`,
  );
}

if (require.main === module) main();
module.exports = { inputsHash, INPUTS_STAMP };
