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
 * Opens the dashboard, signs in with the service's root credentials, runs
 * `fn`, and fails the test if the page threw anywhere meanwhile.
 */
export async function withDashboard(svc: TestService, fn: (page: Page) => Promise<void>): Promise<void> {
  fs.mkdirSync(OUT, { recursive: true });
  const browser = await playwright!.chromium.launch({ executablePath, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const pageErrors: string[] = [];
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    await page.goto(`${svc.rootUrl}/api/dashboard`);
    await page.fill('#clientId', svc.root.clientId);
    await page.fill('#accessToken', svc.root.accessToken);
    await page.click('#login button[type=submit]');
    await fn(page);
    expect(pageErrors).toEqual([]);
  } finally {
    await browser.close();
  }
}
