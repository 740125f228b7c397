#!/usr/bin/env node
'use strict';
/**
 * Part of `npm run build`: copies the static files the compiled code reads at run time (tsc only
 * emits .js) from the source tree to the same place under dist/. bin/package.js zips them too.
 */
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
/** Folders of static files, relative to the repository root and to dist/. */
const ASSET_DIRS = ['shared/ops/dashboard'];

function copyAssets() {
  for (const dir of ASSET_DIRS) {
    const to = path.join(ROOT, 'dist', dir);
    fs.rmSync(to, { recursive: true, force: true });
    fs.cpSync(path.join(ROOT, dir), to, { recursive: true });
  }
}

module.exports = { ASSET_DIRS };

if (require.main === module) copyAssets();
