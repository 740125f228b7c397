/**
 * `npm start`'s generated secrets: written once into .local/secrets.json, and not at all when the
 * environment gives both (an e2e child service run from .local/e2e-service-dist left
 * .local/.local/secrets.json behind).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ensureLocalSecrets } from '../../shared/local/secrets';

let dir: string;
beforeEach(() => {
  dir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'secrets-')), '.local');
});
afterEach(() => fs.rmSync(path.dirname(dir), { recursive: true, force: true }));

test('generated once, then the same on the next start', () => {
  const first: NodeJS.ProcessEnv = {};
  ensureLocalSecrets(first, dir);
  const second: NodeJS.ProcessEnv = {};
  ensureLocalSecrets(second, dir);
  expect(second.QUEUE_ROOT_ACCESS_TOKEN).toBe(first.QUEUE_ROOT_ACCESS_TOKEN);
  expect(second.QUEUE_TOKEN_ENCRYPTION_KEY).toBe(first.QUEUE_TOKEN_ENCRYPTION_KEY);
});

test('both set in the environment: no file is written', () => {
  const env: NodeJS.ProcessEnv = { QUEUE_ROOT_ACCESS_TOKEN: 'a'.repeat(22), QUEUE_TOKEN_ENCRYPTION_KEY: 'k' };
  ensureLocalSecrets(env, dir);
  expect(fs.existsSync(dir)).toBe(false);
  expect(env.QUEUE_ROOT_ACCESS_TOKEN).toBe('a'.repeat(22));
});
