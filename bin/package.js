#!/usr/bin/env node
'use strict';
/**
 * Builds the deployment package for the function app: .package/app.zip, containing
 *   dist/functions/app.js   the app's two entry points (functions/http.ts, functions/timers.ts, as
 *                           compiled by `npm run build`) and every production dependency, bundled
 *                           by esbuild into one CommonJS file; `@azure/functions-core` stays out,
 *                           the Functions Node worker provides it
 *   dist/functions/sandbox-child/main.js  the sandbox's child process (shared/sandbox/sandbox-child/),
 *                           bundled with the libraries it loads (json-e, ajv, ajv-formats); placed
 *                           relative to app.js as shared/sandbox/sandbox.ts forks it from its own
 *                           __dirname, and in a folder, as the host loads every dist/functions/*.js
 *   dist/functions/dashboard/  the dashboard's static files (bin/copy-assets.js), beside the bundle
 *                           because shared/ops/dashboard.ts reads them from its own __dirname
 *   dist/THIRD-PARTY-NOTICES.txt  name, version and licence text of every bundled package
 *   host.json
 *   package.json            name, version and the "main" glob that tells the host what to load
 * One file instead of ~12,700 under node_modules/: Flex Consumption copies and loads the package at
 * every cold start (unpacked 107 MB on disk before, see infra/README.md "Package").
 * The archive has the app at its root (no parent folder), as Azure Functions requires.
 * Publish it with `az functionapp deployment source config-zip` (see infra/README.md).
 *
 * Zips with the `zip` CLI when it is on PATH, otherwise with the small writer below (store/deflate,
 * no ZIP64). PACKAGE_ZIP_IMPL=node|cli forces one of them; PACKAGE_KEEP_STAGING=1 keeps the
 * staging directory .package/app.
 */

const fs = require('node:fs');
const path = require('node:path');
const zlib = require('node:zlib');
const { spawnSync } = require('node:child_process');
const { ASSET_DIRS, VENDOR_FILES, vendorPath } = require('./copy-assets');

const ROOT = path.resolve(__dirname, '..');
const OUT_DIR = path.join(ROOT, '.package');
const STAGING = path.join(OUT_DIR, 'app');
const ZIP_PATH = path.join(OUT_DIR, 'app.zip');
/** The compiled entry points the bundle starts from (the local host, bench and worker are not reached from them). */
const ENTRY_POINTS = ['functions/http.js', 'functions/timers.js'];
/** The script the sandbox forks (shared/sandbox/sandbox.ts SANDBOX_CHILD_SCRIPT), bundled with its libraries. */
const SANDBOX_CHILD = 'shared/sandbox/sandbox-child/main.js';
/** Provided by the Functions Node worker at run time; never installed or bundled. */
const HOST_PROVIDED = ['@azure/functions-core'];
/** The Node.js the bundle may use: the oldest major `engines` allows (template default: 22). */
const BUNDLE_TARGET = 'node20';

/** Classic ZIP limits; beyond them ZIP64 would be needed, which the fallback writer does not do. */
const ZIP_MAX_ENTRIES = 0xffff;
const ZIP_MAX_OFFSET = 0xffffffff;

function fail(message) {
  console.error(`package: ${message}`);
  process.exit(1);
}

/** Files under `dir` (relative, '/'-separated, sorted) whose name passes `keep`; follows symlinks, skips cycles. */
function walk(dir, keep = () => true, prefix = '', seen = new Set()) {
  const real = fs.realpathSync(dir);
  if (seen.has(real)) return [];
  seen.add(real);
  const out = [];
  for (const name of fs.readdirSync(dir).sort()) {
    const full = path.join(dir, name);
    const rel = prefix ? `${prefix}/${name}` : name;
    let stat;
    try {
      stat = fs.statSync(full);
    } catch {
      continue; // dangling symlink
    }
    if (stat.isDirectory()) out.push(...walk(full, keep, rel, seen));
    else if (stat.isFile() && keep(rel)) out.push(rel);
  }
  return out;
}

function copyFile(from, to) {
  fs.mkdirSync(path.dirname(to), { recursive: true });
  fs.copyFileSync(from, to);
}

/** The package root (holding package.json) of a bundled file under node_modules/, or undefined. */
function packageRoot(file) {
  const parts = path.resolve(ROOT, file).split(path.sep);
  const i = parts.lastIndexOf('node_modules');
  if (i < 0) return undefined;
  const depth = parts[i + 1].startsWith('@') ? 3 : 2;
  return parts.slice(0, i + depth).join(path.sep);
}

/** Name, version, licence and licence text of every package the bundle holds, for the notices file. */
function thirdPartyNotices(inputs) {
  const roots = [...new Set(inputs.map(packageRoot).filter(Boolean))].sort();
  const sections = roots.map((root) => {
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
    const licenseFile = fs.readdirSync(root).find((f) => /^(licen[cs]e|copying)(\.|$)/i.test(f));
    const text = licenseFile ? fs.readFileSync(path.join(root, licenseFile), 'utf8').trim() : `(no licence file; package.json says ${pkg.license})`;
    return `${pkg.name} ${pkg.version} (${pkg.license})\n\n${text}\n`;
  });
  return `Packages bundled into dist/functions/app.js and dist/functions/sandbox-child/, or served by the dashboard (dist/functions/dashboard/vendor/):\n\n${sections.join(`\n${'-'.repeat(80)}\n\n`)}`;
}

/** Bundles the entry points into STAGING/dist/functions/app.js; returns the bundled input files. */
function bundle(dist) {
  let esbuild;
  try {
    esbuild = require('esbuild');
  } catch (err) {
    fail(`esbuild is missing (a devDependency; run npm ci): ${err.message}`);
  }
  const result = esbuild.buildSync({
    stdin: { contents: ENTRY_POINTS.map((e) => `require('./${e}');`).join('\n'), resolveDir: dist, sourcefile: 'app-entry.js', loader: 'js' },
    outfile: path.join(STAGING, 'dist', 'functions', 'app.js'),
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: BUNDLE_TARGET,
    external: HOST_PROVIDED,
    // Readable stack traces in the logs: names kept, nothing minified (no source map shipped).
    keepNames: true,
    legalComments: 'none', // the notices file carries the licences whole
    metafile: true,
    logLevel: 'warning',
  });
  const inputs = Object.keys(result.metafile.inputs);
  const child = esbuild.buildSync({
    entryPoints: [path.join(dist, SANDBOX_CHILD)],
    outfile: path.join(STAGING, 'dist', 'functions', path.relative('shared/sandbox', SANDBOX_CHILD)),
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: BUNDLE_TARGET,
    keepNames: true,
    legalComments: 'none',
    metafile: true,
    logLevel: 'warning',
  });
  inputs.push(...Object.keys(child.metafile.inputs));
  return inputs;
}

function stage() {
  const dist = path.join(ROOT, 'dist');
  for (const entry of [...ENTRY_POINTS, SANDBOX_CHILD]) {
    if (!fs.existsSync(path.join(dist, entry))) fail(`dist/${entry} does not exist; run \`npm run build\` first`);
  }
  if (!fs.existsSync(path.join(ROOT, 'host.json'))) fail('host.json is missing');

  fs.rmSync(OUT_DIR, { recursive: true, force: true });
  fs.mkdirSync(STAGING, { recursive: true });

  console.log(`package: bundling ${ENTRY_POINTS.map((e) => `dist/${e}`).join(', ')} with esbuild`);
  const inputs = bundle(dist);
  // The browser libraries the dashboard serves ship too, so their licences go in the notices.
  const vendored = VENDOR_FILES.map((f) => path.relative(ROOT, vendorPath(f.from)));
  fs.writeFileSync(path.join(STAGING, 'dist', 'THIRD-PARTY-NOTICES.txt'), thirdPartyNotices([...inputs, ...vendored]));
  // The dashboard module (now inside app.js) reads its files from <its __dirname>/dashboard.
  for (const dir of ASSET_DIRS) {
    for (const rel of walk(path.join(dist, dir))) copyFile(path.join(dist, dir, rel), path.join(STAGING, 'dist', 'functions', path.basename(dir), rel));
  }
  copyFile(path.join(ROOT, 'host.json'), path.join(STAGING, 'host.json'));
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  const appPkg = { name: pkg.name, version: pkg.version, private: true, license: pkg.license, main: pkg.main, engines: pkg.engines };
  fs.writeFileSync(path.join(STAGING, 'package.json'), `${JSON.stringify(appPkg, null, 2)}\n`);
}

// ------------------------------------------------------------------------------------------------
// Minimal ZIP writer (PKWARE APPNOTE 6.3: local headers, central directory, end record).
// ------------------------------------------------------------------------------------------------

let crcTable;
/** CRC-32 (IEEE), as ZIP needs; uses zlib.crc32 where Node has it (>= 20.15 / 22.2). */
function crc32(buf) {
  if (typeof zlib.crc32 === 'function') return zlib.crc32(buf) >>> 0;
  if (!crcTable) {
    crcTable = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      crcTable[n] = c >>> 0;
    }
  }
  let crc = 0xffffffff;
  for (let i = 0; i < buf.length; i++) crc = crcTable[(crc ^ buf[i]) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

/** MS-DOS date and time fields of a local Date (DOS has 2-second resolution and starts in 1980). */
function dosDateTime(date) {
  const year = Math.max(1980, Math.min(2107, date.getFullYear()));
  return {
    time: (date.getHours() << 11) | (date.getMinutes() << 5) | Math.floor(date.getSeconds() / 2),
    date: ((year - 1980) << 9) | ((date.getMonth() + 1) << 5) | date.getDate(),
  };
}

const FLAG_UTF8 = 0x0800;
const METHOD_STORE = 0;
const METHOD_DEFLATE = 8;
const VERSION_NEEDED = 20; // 2.0: deflate
const VERSION_MADE_BY = (3 << 8) | 20; // Unix, so external attributes carry the file mode

/**
 * Writes `entries` ({ name, file }) to a new ZIP file at `zipPath`. Names are archive paths with '/'.
 * Each file is deflated unless that does not make it smaller.
 */
function writeZip(zipPath, entries) {
  if (entries.length > ZIP_MAX_ENTRIES) throw new Error(`too many files for a ZIP without ZIP64: ${entries.length}`);
  const fd = fs.openSync(zipPath, 'w');
  const central = [];
  let offset = 0;
  const write = (buf) => {
    fs.writeSync(fd, buf);
    offset += buf.length;
  };
  try {
    for (const { name, file } of entries) {
      const stat = fs.statSync(file);
      const data = fs.readFileSync(file);
      const deflated = zlib.deflateRawSync(data, { level: 9 });
      const method = deflated.length < data.length ? METHOD_DEFLATE : METHOD_STORE;
      const body = method === METHOD_DEFLATE ? deflated : data;
      const nameBuf = Buffer.from(name, 'utf8');
      const crc = crc32(data);
      const { time, date } = dosDateTime(stat.mtime);
      if (offset + 30 + nameBuf.length + body.length > ZIP_MAX_OFFSET) throw new Error('archive too large for a ZIP without ZIP64');

      const local = Buffer.alloc(30);
      local.writeUInt32LE(0x04034b50, 0);
      local.writeUInt16LE(VERSION_NEEDED, 4);
      local.writeUInt16LE(FLAG_UTF8, 6);
      local.writeUInt16LE(method, 8);
      local.writeUInt16LE(time, 10);
      local.writeUInt16LE(date, 12);
      local.writeUInt32LE(crc, 14);
      local.writeUInt32LE(body.length, 18);
      local.writeUInt32LE(data.length, 22);
      local.writeUInt16LE(nameBuf.length, 26);
      local.writeUInt16LE(0, 28);
      const localOffset = offset;
      write(local);
      write(nameBuf);
      write(body);

      const cd = Buffer.alloc(46);
      cd.writeUInt32LE(0x02014b50, 0);
      cd.writeUInt16LE(VERSION_MADE_BY, 4);
      cd.writeUInt16LE(VERSION_NEEDED, 6);
      cd.writeUInt16LE(FLAG_UTF8, 8);
      cd.writeUInt16LE(method, 10);
      cd.writeUInt16LE(time, 12);
      cd.writeUInt16LE(date, 14);
      cd.writeUInt32LE(crc, 16);
      cd.writeUInt32LE(body.length, 20);
      cd.writeUInt32LE(data.length, 24);
      cd.writeUInt16LE(nameBuf.length, 28);
      cd.writeUInt16LE(0, 30); // extra field length
      cd.writeUInt16LE(0, 32); // comment length
      cd.writeUInt16LE(0, 34); // disk number
      cd.writeUInt16LE(0, 36); // internal attributes
      cd.writeUInt32LE((((stat.mode & 0o777) | 0o100000) << 16) >>> 0, 38); // regular file + permissions
      cd.writeUInt32LE(localOffset, 42);
      central.push(cd, nameBuf);
    }

    const cdOffset = offset;
    for (const buf of central) write(buf);
    const cdSize = offset - cdOffset;
    if (offset > ZIP_MAX_OFFSET) throw new Error('archive too large for a ZIP without ZIP64');

    const end = Buffer.alloc(22);
    end.writeUInt32LE(0x06054b50, 0);
    end.writeUInt16LE(0, 4); // this disk
    end.writeUInt16LE(0, 6); // disk with the central directory
    end.writeUInt16LE(entries.length, 8);
    end.writeUInt16LE(entries.length, 10);
    end.writeUInt32LE(cdSize, 12);
    end.writeUInt32LE(cdOffset, 16);
    end.writeUInt16LE(0, 20); // comment length
    write(end);
  } finally {
    fs.closeSync(fd);
  }
}

function hasZipCli() {
  const res = spawnSync(process.platform === 'win32' ? 'where' : 'which', ['zip'], { stdio: 'ignore' });
  return res.status === 0;
}

/** Zips the staging directory's contents (not the directory itself) into ZIP_PATH. */
function archive() {
  fs.rmSync(ZIP_PATH, { force: true }); // `zip` would otherwise update an existing archive
  const forced = process.env.PACKAGE_ZIP_IMPL;
  if (forced && forced !== 'cli' && forced !== 'node') fail(`PACKAGE_ZIP_IMPL must be 'cli' or 'node', got '${forced}'`);
  const useCli = forced ? forced === 'cli' : hasZipCli();
  if (useCli) {
    // -r recurse, -q quiet, -X no extra attributes, -D no directory entries (like the node writer).
    const res = spawnSync('zip', ['-r', '-q', '-X', '-D', ZIP_PATH, '.'], { cwd: STAGING, stdio: 'inherit' });
    if (res.error) fail(`could not run zip: ${res.error.message}`);
    if (res.status !== 0) fail(`zip failed with exit code ${res.status}`);
    return 'zip CLI';
  }
  const entries = walk(STAGING).map((name) => ({ name, file: path.join(STAGING, ...name.split('/')) }));
  writeZip(ZIP_PATH, entries);
  return 'built-in zip writer';
}

function main() {
  stage();
  const files = walk(STAGING);
  const unpacked = files.reduce((sum, f) => sum + fs.statSync(path.join(STAGING, f)).size, 0);
  const how = archive();
  if (!process.env.PACKAGE_KEEP_STAGING) fs.rmSync(STAGING, { recursive: true, force: true });
  const size = fs.statSync(ZIP_PATH).size;
  const mb = (n) => (n / 1e6).toFixed(1);
  console.log(`package: wrote ${path.relative(ROOT, ZIP_PATH)} (${mb(size)} MB; unpacked ${mb(unpacked)} MB in ${files.length} files; ${how})`);
}

module.exports = { writeZip, crc32, walk };

if (require.main === module) {
  try {
    main();
  } catch (err) {
    fail(err && err.stack ? err.stack : String(err));
  }
}
