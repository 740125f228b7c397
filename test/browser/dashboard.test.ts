/**
 * The dashboard in a real browser: headless Chromium (Debian's `chromium` package) driven by
 * playwright-core loads /api/dashboard from a running service, signs its API calls with Hawk from
 * credentials typed into the page, and shows a created task move to completed. Screenshots go to
 * test-output/. Skipped, with the reason printed, where Chromium or playwright-core is missing.
 */
import path from 'node:path';
import { startTestService, TestService, taskDef, slugid } from '../helpers/service';
import { browserMissing, browserTest, OUT, withDashboard } from '../helpers/browser';

let svc: TestService | undefined;
afterAll(async () => svc?.close());

browserTest(
  `dashboard: sign in, watch a task go from pending to completed, quarantine a worker${browserMissing ? ` (skipped: ${browserMissing})` : ''}`,
  async () => {
    const s = (svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' }));
    const tq = `prov/dash-${Math.random().toString(36).slice(2, 8)}`;
    const q = s.queue();
    const taskId = slugid();
    await q.createTask(taskId, taskDef(tq, { metadata: { name: 'dashboard demo', description: 'd', owner: 'o@example.com', source: 'https://example.com' } }));
    const failing = slugid();
    await q.createTask(failing, taskDef(tq, { metadata: { name: 'flaky build', description: 'd', owner: 'o@example.com', source: 'https://example.com' } }));

    await withDashboard(s, async (page) => {
      // The overview lists the task queue with its exact counts, fetched with Hawk-signed requests.
      const row = page.locator(`tr[data-queue="${tq}"]`);
      await row.waitFor({ timeout: 15_000 });
      await page.waitForFunction((id) => document.querySelector(`tr[data-queue="${id}"] td.pending`)?.textContent === '2', tq, { timeout: 15_000 });
      expect(await page.evaluate(() => sessionStorage.length)).toBe(1);
      expect(await page.evaluate(() => localStorage.length)).toBe(0);

      // The task view: pending, then (after a worker claims and completes it) completed.
      await page.goto(`${s.rootUrl}/api/dashboard#task=${taskId}`);
      await page.waitForFunction(() => document.getElementById('task-state')?.textContent === 'pending', undefined, { timeout: 15_000 });
      const claims = (await q.claimWork(tq, { workerGroup: 'wg', workerId: 'dash-worker', tasks: 2 })).tasks;
      expect(claims).toHaveLength(2);
      for (const c of claims) {
        const wq = s.queue(c.credentials);
        if (c.status.taskId === taskId) {
          const expires = new Date(Date.now() + 3600_000).toJSON();
          await wq.createArtifact(taskId, 0, 'public/logs/live.log', {
            storageType: 'reference',
            url: 'https://example.com/log',
            contentType: 'text/plain',
            expires,
          });
          await wq.reportCompleted(taskId, 0);
        } else await wq.reportFailed(failing, 0);
      }
      await page.waitForFunction(() => document.getElementById('task-state')?.textContent === 'completed', undefined, { timeout: 20_000 });
      const history = await page.locator('section:has(h2:text("History")) tbody tr').allTextContents();
      expect(history.length).toBe(4);
      expect(history[0]).toMatch(/resolved.*completed/);
      // Beside the history, the events each transition published.
      const events = await page.locator('section:has(h2:text("Events")) tbody tr').allTextContents();
      expect(events.map((e) => e.match(/task-(defined|pending|running|completed|failed|exception)/)?.[0])).toEqual([
        'task-completed',
        'task-running',
        'task-pending',
        'task-defined',
      ]);
      await page.waitForSelector('section:has(h2:text("Artifacts")) td:text("public/logs/live.log")', { timeout: 15_000 });
      await page.screenshot({ path: path.join(OUT, 'dashboard-task.png'), fullPage: true });

      // The overview shows the failure; the queue view quarantines the worker.
      await page.goto(`${s.rootUrl}/api/dashboard#`);
      await page.waitForSelector(`text=flaky build`, { timeout: 15_000 });
      await page.screenshot({ path: path.join(OUT, 'dashboard-overview.png'), fullPage: true });
      await page.goto(`${s.rootUrl}/api/dashboard#queue=${tq}`);
      // A form, not a browser prompt: how long and why.
      await page.click('button[data-worker="wg/dash-worker"]', { timeout: 15_000 });
      const form = page.locator('form[data-quarantine="wg/dash-worker"]');
      await form.locator('input[name=hours]').fill('2');
      await form.locator('input[name=reason]').fill('testing the dashboard');
      await form.locator('button[type=submit]').click();
      await page.waitForFunction(() => document.querySelector('button[data-worker="wg/dash-worker"]')?.textContent === 'Lift quarantine', undefined, {
        timeout: 15_000,
      });
      const [p, wt] = tq.split('/');
      const w = await q.getWorker(p, wt, 'wg', 'dash-worker');
      expect(Date.parse(w.quarantineUntil)).toBeGreaterThan(Date.now() + 3600_000);
      expect(w.quarantineDetails[0]).toMatchObject({ clientId: s.root.clientId, quarantineInfo: 'testing the dashboard' });
      await page.screenshot({ path: path.join(OUT, 'dashboard-queue.png'), fullPage: true });
    });
  },
  90_000,
);

let svc2: TestService | undefined;
afterAll(async () => svc2?.close());

browserTest(
  `dashboard: browse the index to an indexed task; list a hook group and trigger a hook${browserMissing ? ` (skipped: ${browserMissing})` : ''}`,
  async () => {
    svc2 = await startTestService();
    const s = svc2;
    const ns = `dash${Math.random().toString(36).slice(2, 8)}`;
    const taskId = slugid();
    await s.queue().createTask(taskId, taskDef(`prov/dash-${Math.random().toString(36).slice(2, 8)}`));
    const index = new s.tc.Index({ rootUrl: s.rootUrl, credentials: s.root, retries: 0 });
    await index.insertTask(`${ns}.branch.main`, { taskId, rank: 2, data: { rev: 'abc' }, expires: new Date(Date.now() + 3600_000).toJSON() });
    const hooks = new s.tc.Hooks({ rootUrl: s.rootUrl, credentials: s.root, retries: 0 });
    await s.auth().createRole('hook-id:dash/*', { description: 'dashboard hooks', scopes: ['queue:create-task:*', 'queue:scheduler-id:*'] });
    await hooks.createHook('dash', 'nightly', {
      metadata: { name: 'nightly build', description: 'd', owner: 'o@example.com' },
      schedule: ['0 0 3 * * *'],
      triggerSchema: { type: 'object' },
      task: {
        taskQueueId: 'prov/dash-hook',
        payload: { by: { $eval: 'firedBy' } },
        metadata: { name: 'from the dashboard', description: 'd', owner: 'o@example.com', source: 'https://example.com' },
      },
    });

    await withDashboard(s, async (page) => {
      // Index: namespace by namespace down to the entry, then the task view.
      await page.click('nav a[href="#index"]');
      await page.click(`tr[data-namespace="${ns}"] a`, { timeout: 15_000 });
      await page.click(`tr[data-namespace="${ns}.branch"] a`, { timeout: 15_000 });
      const entry = page.locator(`tr[data-indexed="${ns}.branch.main"]`);
      await entry.waitFor({ timeout: 15_000 });
      expect(await entry.textContent()).toContain('{"rev":"abc"}');
      await page.screenshot({ path: path.join(OUT, 'dashboard-index.png'), fullPage: true });
      await entry.locator('a').click();
      await page.waitForFunction(() => document.getElementById('task-state')?.textContent === 'pending', undefined, { timeout: 15_000 });
      expect(page.url()).toContain(`#task=${taskId}`);

      // Hooks: the group, the hook with its next fire, and a trigger with the user's credentials.
      await page.click('nav a[href="#hooks"]');
      await page.click('tr[data-group="dash"] a', { timeout: 15_000 });
      const row = page.locator('tr[data-hook="dash/nightly"]');
      await row.waitFor({ timeout: 15_000 });
      expect(await row.textContent()).toContain('never fired');
      expect(await row.locator('td').nth(4).getAttribute('title')).toBe((await hooks.getHookStatus('dash', 'nightly')).nextScheduledDate);
      // A form with the payload, not a browser prompt; JSON that does not parse is refused in the page.
      await row.locator('button[data-trigger]').click();
      const form = row.locator('form[data-trigger-form="dash/nightly"]');
      await form.locator('textarea').fill('{"reason": ');
      await form.locator('button[type=submit]').click();
      await row.locator('.trigger-outcome:text("The payload is not JSON")').waitFor({ timeout: 15_000 });
      await form.locator('textarea').fill('{"reason": "dashboard"}');
      await form.locator('button[type=submit]').click();
      await row.locator('span a').waitFor({ timeout: 15_000 });
      const fired = await row.locator('span a').textContent();
      const fires = (await hooks.listLastFires('dash', 'nightly')).lastFires;
      expect(fires).toEqual([expect.objectContaining({ taskId: fired, firedBy: 'triggerHook', result: 'success' })]);
      expect((await s.queue().task(fired!)).payload).toEqual({ by: 'triggerHook' });
      // After the next refresh the row lists the fire.
      await page.waitForFunction(() => document.querySelector('tr[data-hook="dash/nightly"] ul.fires li') !== null, undefined, { timeout: 15_000 });
      await page.screenshot({ path: path.join(OUT, 'dashboard-hooks.png'), fullPage: true });
    });
  },
  90_000,
);
