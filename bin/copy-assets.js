#!/usr/bin/env node
'use strict';
/**
 * Part of `npm run build`: copies the static files the compiled code reads at run time (tsc only
 * emits .js from .ts) and the plain scripts it starts from the source tree to the same place under dist/, and the browser libraries the
 * dashboard serves from node_modules into its `vendor/` folder, then writes dist/.build-stamp,
 * whose time bin/run-built.js compares with the sources'. bin/package.js zips the assets too.
 */
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
/** Folders of static files, relative to the repository root and to dist/. */
const ASSET_DIRS = ['shared/ops/dashboard'];
/** Plain CommonJS scripts the compiled code forks by path, relative to the repository root and to dist/. */
const ASSET_FILES = ['shared/sandbox/sandbox-child/main.js'];
/** Browser files from packages, copied to dist/<folder>/vendor/<name> (shared/ops/dashboard.ts serves them). */
const VENDOR_FILES = [
  { into: 'shared/ops/dashboard', name: 'uPlot.iife.min.js', from: 'uplot/dist/uPlot.iife.min.js' },
  { into: 'shared/ops/dashboard', name: 'uPlot.min.css', from: 'uplot/dist/uPlot.min.css' },
  { into: 'shared/ops/dashboard', name: 'croner.umd.js', from: 'croner/dist/croner.umd.js' },
];
/** Written last by a build: dist/ is current when no source is newer than this file. */
const BUILD_STAMP = path.join(ROOT, 'dist', '.build-stamp');

/**
 * A vendor file's path under node_modules. A package whose `exports` hides the file (croner
 * exports its browser build only as a condition) is found beside its package.json.
 */
function vendorPath(from, root = ROOT) {
  try {
    return require.resolve(from, { paths: [root] });
  } catch (e) {
    if (e.code !== 'ERR_PACKAGE_PATH_NOT_EXPORTED') throw e;
    const name = from.split('/')[0];
    return path.join(path.dirname(require.resolve(`${name}/package.json`, { paths: [root] })), from.slice(name.length + 1));
  }
}

function copyAssets() {
  for (const dir of ASSET_DIRS) {
    const to = path.join(ROOT, 'dist', dir);
    fs.rmSync(to, { recursive: true, force: true });
    fs.cpSync(path.join(ROOT, dir), to, { recursive: true });
  }
  for (const file of ASSET_FILES) {
    fs.mkdirSync(path.dirname(path.join(ROOT, 'dist', file)), { recursive: true });
    fs.copyFileSync(path.join(ROOT, file), path.join(ROOT, 'dist', file));
  }
  for (const f of VENDOR_FILES) {
    const to = path.join(ROOT, 'dist', f.into, 'vendor', f.name);
    fs.mkdirSync(path.dirname(to), { recursive: true });
    fs.copyFileSync(vendorPath(f.from), to);
  }
}

function writeStamp() {
  fs.writeFileSync(BUILD_STAMP, new Date().toISOString() + '\n');
}

module.exports = { ASSET_DIRS, ASSET_FILES, VENDOR_FILES, BUILD_STAMP, copyAssets, writeStamp, vendorPath };

if (require.main === module) {
  copyAssets();
  writeStamp();
}
