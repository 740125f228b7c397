/**
 * The dashboard in a real browser for tests: headless Chromium (Debian's `chromium` package) driven
 * by playwright-core. Where either is missing, `browserTest` skips with the reason printed.
 * Screenshots go to OUT (test-output/).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Page } from 'playwright-core';
import type { TestService } from './service';

const CHROMIUM_PATHS = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].filter(Boolean) as string[];
const executablePath = CHROMIUM_PATHS.find((p) => fs.existsSync(p));
let playwright: typeof import('playwright-core') | undefined;
try {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  playwright = require('playwright-core');
} catch {
  playwright = undefined;
}
export const browserMissing = !playwright
  ? 'playwright-core is not installed'
  : !executablePath
    ? `no Chromium at ${CHROMIUM_PATHS.join(', ')} (apt-get install -y chromium)`
    : undefined;
if (browserMissing) console.warn(`dashboard browser tests skipped: ${browserMissing}`);
export const browserTest = browserMissing ? test.skip : test;

export const OUT = path.resolve(__dirname, '..', '..', 'test-output');

/**
 * Opens the dashboard at the service's root, signs in (with the service's root credentials unless
 * `credentials` says otherwise; null: not at all), runs
 * `fn`, and fails the test if the page threw anywhere meanwhile.
 */
export async function withDashboard(
  svc: TestService,
  fn: (page: Page) => Promise<void>,
  opts: { credentials?: { clientId: string; accessToken: string } | null; width?: number } = {},
): Promise<void> {
  fs.mkdirSync(OUT, { recursive: true });
  const browser = await playwright!.chromium.launch({ executablePath, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  try {
    const page = await browser.newPage({ viewport: { width: opts.width ?? 1400, height: 1000 } });
    const pageErrors: string[] = [];
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    // The service's root answers with the dashboard.
    await page.goto(`${svc.rootUrl}/`);
    const credentials = opts.credentials === undefined ? svc.root : opts.credentials;
    if (credentials) {
      await page.fill('#clientId', credentials.clientId);
      await page.fill('#accessToken', credentials.accessToken);
      await page.click('#login button[type=submit]');
    }
    await fn(page);
    expect(pageErrors).toEqual([]);
  } finally {
    await browser.close();
  }
}
