/**
 * The log view as a reader uses it, in headless Chromium (see dashboard.test.ts for the setup): it
 * opens at the end of a running task's log (streamed by the reference worker's module) and follows
 * it, stops following when the reader scrolls up, resumes with "Follow", numbers the lines without
 * adding them to the text, and links to a line.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { startTestService, TestService, taskDef, slugid } from '../helpers/service';
import { browserMissing, browserTest, OUT, withDashboard } from '../helpers/browser';
import { LiveLogStream } from '../../worker/log-stream';
import { modernQueues } from '../../worker/clients';

const T = { timeout: 15_000 };
const quiet = { info: () => {}, warn: () => {}, error: () => {} };

let svc: TestService | undefined;
afterAll(async () => svc?.close());

const atEnd = (page: Page) => page.evaluate(() => window.innerHeight + window.scrollY >= document.body.scrollHeight - 40);
const lines = (from: number, n: number) => Array.from({ length: n }, (_, i) => `step ${from + i}: compiling module ${from + i}`).join('\n') + '\n';

browserTest(
  `dashboard log view: opens at the end and follows, stops when scrolled up, line numbers and line links${browserMissing ? ` (skipped: ${browserMissing})` : ''}`,
  async () => {
    const s = (svc = await startTestService());
    const q = s.queue();
    const tq = `prov/dlog-${Math.random().toString(36).slice(2, 8)}`;
    const taskId = slugid();
    await q.createTask(taskId, taskDef(tq));
    const [claim] = (await q.claimWork(tq, { workerGroup: 'wg', workerId: 'log-w', tasks: 1 })).tasks;
    const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'dash-log-'));
    const logFile = path.join(dir, 'live.log');
    await fs.promises.writeFile(logFile, lines(1, 200));
    const queueFor = await modernQueues(s.rootUrl);
    const stream = new LiveLogStream({
      file: logFile,
      createUrl: () => queueFor(claim.credentials).createLiveLog!(taskId, 0),
      log: quiet,
      ids: {},
      intervalMs: 3600_000, // flushed by hand below
    });
    stream.start();
    await stream.flush();
    const append = async (from: number, n: number) => {
      await fs.promises.appendFile(logFile, lines(from, n));
      await stream.flush();
    };

    try {
      await withDashboard(s, async (page) => {
        await page.goto(`${s.rootUrl}/api/dashboard#log=${taskId}/0`);
        await page.waitForSelector('#L200', T);
        await page.waitForFunction(() => window.scrollY > 0, undefined, T);
        expect(await atEnd(page)).toBe(true);
        expect(await page.textContent('#log-follow')).toBe('following the end');
        // Numbers are drawn by CSS: the text is the log's own.
        expect(await page.textContent('#log')).toBe(await fs.promises.readFile(logFile, 'utf8'));
        expect(await page.evaluate(() => getComputedStyle(document.querySelector('#L7 a.ln')!, '::before').content)).toBe('"7"');

        // New lines while at the end: still at the end.
        await append(201, 30);
        await page.waitForSelector('#L230', T);
        await page.waitForFunction(() => window.innerHeight + window.scrollY >= document.body.scrollHeight - 40, undefined, T);

        // The reader scrolls up: following stops, new lines do not move the view.
        await page.mouse.move(600, 500);
        await page.mouse.wheel(0, -1500);
        await page.waitForFunction(() => document.getElementById('log-follow')?.textContent === 'Follow', undefined, T);
        const y = await page.evaluate(() => window.scrollY);
        await append(231, 30);
        await page.waitForSelector('#L260', T);
        expect(await page.evaluate(() => window.scrollY)).toBe(y);
        expect(await atEnd(page)).toBe(false);

        // "Follow" goes to the end and keeps there.
        await page.click('#log-follow');
        expect(await atEnd(page)).toBe(true);
        await append(261, 30);
        await page.waitForSelector('#L290', T);
        await page.waitForFunction(() => window.innerHeight + window.scrollY >= document.body.scrollHeight - 40, undefined, T);
        expect(await page.textContent('#log-follow')).toBe('following the end');

        // A line number links to its line: the address names it, the line is marked, following stops.
        await page.mouse.wheel(0, -1500);
        await page.click('#L250 a.ln');
        expect(new URL(page.url()).hash).toBe(`#log=${taskId}/0/L250`);
        expect(await page.getAttribute('#L250', 'class')).toContain('log-target');
        expect(await page.textContent('#log-follow')).toBe('Follow');
        await page.screenshot({ path: path.join(OUT, 'dashboard-log-lines.png'), clip: { x: 0, y: 380, width: 700, height: 240 } });

        // Opened from such a link: at the line, not at the end.
        await page.goto(`${s.rootUrl}/api/dashboard#task=${taskId}`);
        await page.waitForSelector('#task-state', T);
        await page.goto(`${s.rootUrl}/api/dashboard#log=${taskId}/0/L40`);
        await page.waitForSelector('#L40.log-target', T);
        const box = (await page.locator('#L40').boundingBox())!;
        expect(box.y).toBeGreaterThan(0);
        expect(box.y).toBeLessThan(1000);
        expect(await atEnd(page)).toBe(false);
      });
    } finally {
      await stream.stop();
    }
  },
  90_000,
);
