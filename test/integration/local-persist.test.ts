/**
 * `npm start -- --persist`: the embedded Azurite keeps its data on disk, so what one start made
 * (here a role) is there after a restart; without --persist it is gone.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { start } from '../../shared/local/main';
import { freePort } from '../../shared/local/azurite';

let root: string;
beforeAll(() => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'local-persist-'));
});
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

/** Starts, runs `fn` with an Auth client, stops. */
async function withStart<T>(argv: string[], fn: (auth: any) => Promise<T>): Promise<T> {
  const tc = (await import('taskcluster-client')).default;
  const s = await start({ argv, env: { PORT: String(await freePort()) }, root });
  try {
    return await fn(new tc.Auth({ rootUrl: s.config.publicUrl, credentials: { clientId: s.config.rootClientId, accessToken: s.config.rootAccessToken } }));
  } finally {
    await s.stop();
  }
}

const roleExists = (auth: any) =>
  auth.role('kept').then(
    () => true,
    (err: { statusCode?: number }) => (err.statusCode === 404 ? false : Promise.reject(err)),
  );

test('with --persist a restart keeps the data (in .local/azurite); without, it starts empty', async () => {
  await withStart(['--persist'], (auth) => auth.createRole('kept', { description: 'survives a restart', scopes: ['queue:status:*'] }));
  expect(fs.existsSync(path.join(root, '.local', 'azurite'))).toBe(true);
  expect(await withStart(['--persist'], roleExists)).toBe(true);
  expect(await withStart([], roleExists)).toBe(false);
}, 120_000);
