/**
 * Loads a packaged app the way the Functions Node worker does: reads package.json's `main` glob in
 * the current directory and requires every matching file, with `@azure/functions-core` stood in by
 * ./fake-functions-core.js (preload it with `node --require`). Run as a script, it then prints
 *   LOADED <ms> <n>
 * with the milliseconds from process start (performance.now()) to the last function registered,
 * how many functions registered, and the CPU milliseconds (user + system) spent until then.
 */
'use strict';
const fs = require('node:fs');
const path = require('node:path');

/** The worker's glob support that matters here: `*` within one path segment. */
function expandMain(dir, main) {
  const parts = main.split('/');
  let paths = [dir];
  for (const part of parts) {
    const re = new RegExp(
      `^${part
        .replace(/[.+^${}()|[\]\\]/g, '\\$&')
        .replace(/\*/g, '[^/]*')
        .replace(/\?/g, '[^/]')}$`,
    );
    paths = paths.flatMap((p) =>
      (part.includes('*') || part.includes('?')
        ? fs
            .readdirSync(p)
            .filter((n) => re.test(n))
            .sort()
        : [part]
      ).map((n) => path.join(p, n)),
    );
  }
  return paths.filter((p) => fs.existsSync(p) && fs.statSync(p).isFile());
}

/** Requires every file of `dir`'s package.json `main` glob; returns their paths. */
function loadMain(dir) {
  const { main } = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  const files = expandMain(dir, main);
  for (const file of files) require(file);
  return files;
}

module.exports = { loadMain };

if (require.main === module) {
  loadMain(process.cwd());
  const core = require('@azure/functions-core');
  const cpu = process.cpuUsage();
  process.stdout.write(`\nLOADED ${performance.now().toFixed(1)} ${core.registered().length} ${((cpu.user + cpu.system) / 1000).toFixed(1)}\n`);
}
