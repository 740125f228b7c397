/**
 * Hooks in the dashboard, in headless Chromium (see dashboard.test.ts for the setup): a hook created
 * from the dashboard's form (checked in the page first), its own page with the schedule's next fires
 * (computed in the page; the first is the service's next fire), edited, and deleted, each read back
 * through taskcluster-client.
 */
import path from 'node:path';
import { startTestService, TestService } from '../helpers/service';
import { browserMissing, browserTest, OUT, withDashboard } from '../helpers/browser';

const T = { timeout: 15_000 };

let svc: TestService | undefined;
afterAll(async () => svc?.close());

browserTest(
  `dashboard hooks: create, a hook's page with next fires, edit, delete${browserMissing ? ` (skipped: ${browserMissing})` : ''}`,
  async () => {
    const s = (svc = await startTestService());
    const group = `dh${Math.random().toString(36).slice(2, 8)}`;
    const hooks = new s.tc.Hooks({ rootUrl: s.rootUrl, credentials: s.root, retries: 0 });
    await s.auth().createRole(`hook-id:${group}/*`, { description: 'dashboard hooks', scopes: ['queue:create-task:*', 'queue:scheduler-id:*'] });
    const definition = {
      metadata: { name: 'nightly docs', description: 'builds the docs', owner: 'o@example.com', emailOnError: false },
      schedule: ['0 0 3 * * *', '0 30 */6 * * *'],
      bindings: [],
      triggerSchema: { type: 'object' },
      task: {
        taskQueueId: 'prov/dash-hook',
        payload: {},
        metadata: { name: 'docs', description: 'd', owner: 'o@example.com', source: 'https://example.com' },
      },
    };

    await withDashboard(s, async (page) => {
      await page.goto(`${s.rootUrl}/api/dashboard#hooks`);
      await page.click('#new-hook', T);
      const form = page.locator('#hook-form');
      await form.locator('input[name=hookGroupId]').fill(group);
      await form.locator('input[name=hookId]').fill('docs/nightly');
      // Refused in the page: a bad cron pattern and a property the schema does not know.
      await form.locator('textarea').fill(JSON.stringify({ ...definition, schedule: ['0 0 25 * * *'], colour: 'red' }));
      await form.locator('button[type=submit]').click();
      await page.waitForSelector('#hook-errors li', T);
      const errors = await page.locator('#hook-errors li').allTextContents();
      expect(errors[0]).toBe('(root): unknown property colour');
      expect(errors[1]).toMatch(/^schedule\[0\] "0 0 25 \* \* \*": /);
      expect((await hooks.listHooks(group).catch(() => ({ hooks: [] }))).hooks).toEqual([]);

      // The preview follows the typing; then the hook is created and its page opens.
      await form.locator('textarea').fill(JSON.stringify(definition));
      await page.waitForSelector('#preview-fires li[data-fire]', T);
      await form.locator('button[type=submit]').click();
      await page.waitForFunction(() => document.getElementById('action-note')?.textContent === 'created', undefined, T);
      expect(new URL(page.url()).hash).toBe(`#hook=${group}/${encodeURIComponent('docs/nightly')}`);
      expect(await hooks.hook(group, 'docs/nightly')).toMatchObject({ metadata: definition.metadata, schedule: definition.schedule });

      // Next fires: five, in order, the first being the service's own next fire.
      const fires = await page.locator('section:has(h2:text("Schedule")) #next-fires li').evaluateAll((li) => li.map((l) => l.getAttribute('data-fire')));
      expect(fires).toHaveLength(5);
      expect([...fires].sort()).toEqual(fires);
      expect(fires[0]).toBe((await hooks.getHookStatus(group, 'docs/nightly')).nextScheduledDate);
      for (const f of fires) expect(new Date(f!).getUTCMinutes() === 30 || new Date(f!).getUTCHours() === 3).toBe(true);
      await page.locator('section:has(h2:text("Schedule"))').screenshot({ path: path.join(OUT, 'dashboard-hook.png') });

      // Edit: the schedule changes, and the service's next fire with it.
      await page.click('button[data-action="edit-hook"]');
      await page.locator('#hook-form textarea').fill(JSON.stringify({ ...definition, schedule: ['0 15 4 * * *'] }));
      await page.click('#hook-form button[type=submit]');
      await page.waitForFunction(() => document.getElementById('action-note')?.textContent === 'saved', undefined, T);
      expect((await hooks.hook(group, 'docs/nightly')).schedule).toEqual(['0 15 4 * * *']);
      const next = (await hooks.getHookStatus(group, 'docs/nightly')).nextScheduledDate;
      expect(await page.getAttribute('section:has(h2:text("Schedule")) #next-fires li', 'data-fire')).toBe(next);

      // Delete, after a confirmation: back to the group's list.
      await page.click('button[data-action="delete-hook"]');
      await page.click('form[data-confirm="delete-hook"] button[type=submit]');
      await page.waitForFunction(() => document.getElementById('action-note')?.textContent === 'deleted docs/nightly', undefined, T);
      await expect(hooks.hook(group, 'docs/nightly')).rejects.toMatchObject({ statusCode: 404 });
    });
  },
  90_000,
);
