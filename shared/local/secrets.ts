/**
 * Local secrets: the root access token and the token encryption key are generated on first start
 * into a git-ignored file, unless the environment provides them.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { generateAccessToken } from '../auth/clients';

export function ensureLocalSecrets(env: NodeJS.ProcessEnv, dir: string): void {
  // Both given (a test's child service, a CI job): nothing to generate, so no file is written
  // (a dist/ copied under .local/ would otherwise leave .local/.local/secrets.json).
  if (env.QUEUE_ROOT_ACCESS_TOKEN && env.QUEUE_TOKEN_ENCRYPTION_KEY) return;
  const file = path.join(dir, 'secrets.json');
  let stored: Record<string, string> = {};
  if (fs.existsSync(file)) stored = JSON.parse(fs.readFileSync(file, 'utf8'));
  let changed = false;
  if (!stored.QUEUE_ROOT_ACCESS_TOKEN) {
    stored.QUEUE_ROOT_ACCESS_TOKEN = generateAccessToken();
    changed = true;
  }
  if (!stored.QUEUE_TOKEN_ENCRYPTION_KEY) {
    stored.QUEUE_TOKEN_ENCRYPTION_KEY = crypto.randomBytes(32).toString('base64');
    changed = true;
  }
  if (changed) {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(file, JSON.stringify(stored, null, 2) + '\n', { mode: 0o600 });
  }
  env.QUEUE_ROOT_ACCESS_TOKEN ||= stored.QUEUE_ROOT_ACCESS_TOKEN;
  env.QUEUE_TOKEN_ENCRYPTION_KEY ||= stored.QUEUE_TOKEN_ENCRYPTION_KEY;
}

/** Copies `local.settings.json` Values into the environment (without overriding), as Core Tools does. */
export function loadLocalSettings(env: NodeJS.ProcessEnv, file: string): void {
  if (!fs.existsSync(file)) return;
  const values = JSON.parse(fs.readFileSync(file, 'utf8')).Values ?? {};
  for (const [k, v] of Object.entries(values)) if (env[k] === undefined && typeof v === 'string') env[k] = v;
}
