#!/usr/bin/env node
/**
 * `npm run checks`: the static checks `npm test` runs before jest (types, ESLint, the Prettier check,
 * the dependency rules), side by side. Each is one single-threaded process, so together they take
 * about as long as the slowest one on two cores instead of the sum. Each one's output is printed
 * when it ends; the exit code is non-zero if any failed.
 */
'use strict';
const { spawn } = require('node:child_process');

/** npm scripts run by this, each as its own process. */
const CHECKS = ['typecheck', 'lint', 'format:check', 'deps'];

function run(script) {
  return new Promise((resolve) => {
    const started = Date.now();
    const child = spawn('npm', ['run', '--silent', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    const out = [];
    child.stdout.on('data', (c) => out.push(c));
    child.stderr.on('data', (c) => out.push(c));
    child.on('error', (err) => out.push(Buffer.from(`${err.message}\n`)));
    child.on('close', (code) => {
      const s = ((Date.now() - started) / 1000).toFixed(1);
      process.stdout.write(`${code === 0 ? 'ok  ' : 'FAIL'} ${script} (${s} s)\n`);
      const text = Buffer.concat(out).toString();
      if (code !== 0 && text.trim()) process.stdout.write(`${text.trimEnd()}\n`);
      resolve(code === 0);
    });
  });
}

Promise.all(CHECKS.map(run)).then((results) => {
  const failed = CHECKS.filter((_, i) => !results[i]);
  if (failed.length) {
    console.error(`checks failed: ${failed.join(', ')}`);
    process.exit(1);
  }
});
