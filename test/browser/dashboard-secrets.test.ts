/**
 * Secrets in the dashboard, in headless Chromium (see dashboard.test.ts for the setup): a viewer
 * holding only `secrets:list-secrets` sees every name with its expiry, expired ones marked, a page
 * at a time, and never a value (the page asks for none); without the scope the list is refused.
 */
import path from 'node:path';
import { startTestService, TestService, slugid } from '../helpers/service';
import { browserMissing, browserTest, OUT, withDashboard } from '../helpers/browser';

const T = { timeout: 15_000 };
/** The dashboard's page of secrets (shared/ops/dashboard/secrets.js), and one more. */
const SECRETS = 101;
/** Secrets set side by side. */
const AT_ONCE = 10;

let svc: TestService | undefined;
afterAll(async () => svc?.close());

browserTest(`dashboard secrets: names and expiry, expired marked, paged, never a value${browserMissing ? ` (skipped: ${browserMissing})` : ''}`, async () => {
  const s = (svc = await startTestService());
  const secrets = new s.tc.Secrets({ rootUrl: s.rootUrl, credentials: s.root, retries: 0 });
  const expires = new Date(Date.now() + 3 * 24 * 3600_000).toJSON();
  const names = Array.from({ length: SECRETS }, (_, i) => `dash/${String(i).padStart(3, '0')}`);
  for (let i = 0; i < names.length; i += AT_ONCE)
    await Promise.all(names.slice(i, i + AT_ONCE).map((n) => secrets.set(n, { secret: { value: `hunter-${n}` }, expires })));
  const expired = `dash/expired-${slugid()}`;
  await secrets.set(expired, { secret: { value: 'hunter-old' }, expires: new Date(Date.now() - 3600_000).toJSON() });

  const mk = async (scopes: string[]) => {
    const clientId = `dash/${slugid()}`;
    const c = await s.auth().createClient(clientId, { expires, description: 'secrets viewer', scopes });
    return { clientId, accessToken: c.accessToken };
  };

  await withDashboard(
    s,
    async (page) => {
      const asked: string[] = [];
      page.on('request', (r) => asked.push(new URL(r.url()).pathname));
      await page.goto(`${s.rootUrl}/api/dashboard#secrets`);
      await page.waitForSelector('section:has(h2:text("Secrets")) tr[data-secret]', T);
      // No refresh from here on: the rows are read at set points.
      await page.uncheck('#auto');
      const shown = () => page.locator('tr[data-secret]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-secret')));
      expect(await shown()).toEqual(names.slice(0, 100));
      // The rest, in name order: the last of the first names and the expired one.
      await page.click('button.more');
      await page.waitForFunction((n) => document.querySelectorAll('tr[data-secret]').length === n, SECRETS + 1, T);
      expect(await shown()).toEqual([...names, expired]);
      expect(await page.locator('button.more').count()).toBe(0);

      const row = page.locator(`tr[data-secret="${expired}"]`);
      expect(await row.locator('td').nth(2).textContent()).toBe('expired');
      expect(await page.locator('tr[data-secret="dash/000"] td').nth(2).textContent()).toBe('');
      expect(await page.locator('tr[data-secret="dash/000"] td').nth(1).getAttribute('title')).toBe(expires);
      expect(await page.locator('tr[data-secret="dash/000"] td').nth(1).textContent()).toBe('in 3 d');
      expect(await page.content()).not.toContain('hunter');
      expect(asked.filter((p) => p.startsWith('/api/secrets/v1/secret/'))).toEqual([]);
      // A small picture: the first two rows and the last two.
      await page.evaluate(() => {
        const rows = [...document.querySelectorAll('tr[data-secret]')];
        rows.slice(3, -2).forEach((r) => r.remove());
        rows[2].replaceChildren(Object.assign(document.createElement('td'), { textContent: '…' }));
      });
      await page.locator('section:has(h2:text("Secrets"))').screenshot({ path: path.join(OUT, 'dashboard-secrets.png') });
    },
    { credentials: await mk(['secrets:list-secrets']) },
  );

  await withDashboard(
    s,
    async (page) => {
      await page.goto(`${s.rootUrl}/api/dashboard#secrets`);
      await page.waitForSelector('section:has(h2:text("Secrets")) .error', T);
      expect(await page.locator('section:has(h2:text("Secrets")) .error').textContent()).toMatch(/^InsufficientScopes: /);
      expect(await page.locator('tr[data-secret]').count()).toBe(0);
    },
    { credentials: await mk([]) },
  );
});
