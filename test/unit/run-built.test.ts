/**
 * `npm start`, `npm run worker` and `tcq` rebuild only when dist/ is missing or older than a
 * source (bin/run-built.js): file times are set, not waited for.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { staleness } = require('../../bin/run-built.js') as { staleness: (root: string) => string | undefined };

let root: string;
const at = (file: string, seconds: number) => {
  const p = path.join(root, file);
  fs.mkdirSync(path.dirname(p), { recursive: true });
  if (!fs.existsSync(p)) fs.writeFileSync(p, '');
  fs.utimesSync(p, seconds, seconds);
};

beforeEach(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'run-built-'));
});
afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

test('no build yet: build', () => {
  at('shared/app.ts', 1_000);
  expect(staleness(root)).toBe('dist/ has not been built');
});

test('the build is newer than every source: run as it is', () => {
  at('shared/app.ts', 1_000);
  at('worker/main.ts', 1_500);
  at('dist/.build-stamp', 2_000);
  expect(staleness(root)).toBeUndefined();
});

test('a source (or the compiler settings, or a static file) changed after the build: rebuild', () => {
  at('dist/.build-stamp', 2_000);
  for (const f of ['bin/tcq/main.ts', 'tsconfig.build.json', 'shared/ops/dashboard/app.js']) {
    at(f, 2_001);
    expect(staleness(root)).toBe('sources changed since the last build');
    at(f, 1_000);
  }
  // Dependencies' own files are not sources.
  at('shared/node_modules/x/index.js', 3_000);
  expect(staleness(root)).toBeUndefined();
});
