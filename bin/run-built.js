#!/usr/bin/env node
'use strict';
/**
 * Runs a compiled entry point from dist/, building first only when dist/ is missing or a source
 * is newer than the last build (dist/.build-stamp): `npm start`, `npm run worker` and `tcq` start
 * at once when nothing changed, instead of spending 15-30 s in tsc every time.
 *
 *   node bin/run-built.js <entry under dist/, e.g. worker/main> [args...]
 *
 * The entry module exports `main(argv)`; a number it resolves to is the exit code.
 */
const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { BUILD_STAMP, copyAssets, writeStamp } = require('./copy-assets');

const ROOT = path.resolve(__dirname, '..');
/** What tsconfig.build.json compiles, and the files that change its output. */
const SOURCE_DIRS = ['functions', 'shared', 'bench', 'bin', 'worker', 'types'];
const SOURCE_FILES = ['tsconfig.json', 'tsconfig.build.json', 'package-lock.json'];

/** The newest modification time among the sources under `root` (ms). */
function newestSource(root = ROOT) {
  let newest = 0;
  const visit = (p) => {
    let st;
    try {
      st = fs.statSync(p);
    } catch {
      return;
    }
    if (st.isDirectory()) {
      for (const name of fs.readdirSync(p)) if (name !== 'node_modules') visit(path.join(p, name));
    } else newest = Math.max(newest, st.mtimeMs);
  };
  for (const d of [...SOURCE_DIRS, ...SOURCE_FILES]) visit(path.join(root, d));
  return newest;
}

/** Why dist/ under `root` must be rebuilt, or undefined when it is current. */
function staleness(root = ROOT) {
  let stamp;
  try {
    stamp = fs.statSync(path.join(root, path.relative(ROOT, BUILD_STAMP))).mtimeMs;
  } catch {
    return 'dist/ has not been built';
  }
  return newestSource(root) > stamp ? 'sources changed since the last build' : undefined;
}

function ensureBuilt() {
  const why = staleness();
  if (!why) return;
  process.stderr.write(`building dist/ (${why})...\n`);
  const tsc = require.resolve('typescript/bin/tsc');
  const r = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'inherit' });
  if (r.status !== 0) {
    process.stderr.write('error: the build failed (see above); fix it or run `npm run build`\n');
    process.exit(r.status ?? 1);
  }
  copyAssets();
  writeStamp();
}

function run(entry, args) {
  ensureBuilt();
  const mod = require(path.join(ROOT, 'dist', entry));
  if (typeof mod.main !== 'function') throw new Error(`dist/${entry} exports no main()`);
  Promise.resolve(mod.main(args)).then(
    // Exit explicitly when the entry is done: HTTP clients keep sockets alive.
    (code) => typeof code === 'number' && process.exit(code),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}

module.exports = { run, staleness, newestSource };

if (require.main === module) {
  const [entry, ...args] = process.argv.slice(2);
  if (!entry) {
    process.stderr.write('usage: node bin/run-built.js <entry under dist/> [args...]\n');
    process.exit(2);
  }
  run(entry, args);
}
