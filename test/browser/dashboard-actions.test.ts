/**
 * The dashboard's actions in a real browser (see dashboard.test.ts for the setup): each is clicked
 * (and confirmed, where it cannot be undone) with the root user's credentials, and its result
 * read back through taskcluster-client.
 */
import path from 'node:path';
import type { Page } from 'playwright-core';
import { startTestService, TestService, taskDef, slugid } from '../helpers/service';
import { browserMissing, browserTest, OUT, withDashboard } from '../helpers/browser';

const skipped = browserMissing ? ` (skipped: ${browserMissing})` : '';
const T = { timeout: 15_000 };

let svc: TestService | undefined;
afterAll(async () => svc?.close());

/** Clicks the action `name`, then its confirmation's "Yes" when it has one. */
async function act(page: Page, name: string, confirm = true): Promise<void> {
  await page.click(`button[data-action="${name}"]`, T);
  if (confirm) await page.click(`form[data-confirm="${name}"] button[type=submit]`, T);
}

/** The task view of `taskId`, shown (its state read). */
async function openTask(page: Page, rootUrl: string, taskId: string, state: string): Promise<void> {
  await page.goto(`${rootUrl}/api/dashboard#task=${taskId}`);
  await page.waitForFunction((s) => document.getElementById('task-state')?.textContent === s, state, T);
}

const hashTask = (page: Page) => new URL(page.url()).hash.replace(/^#task=/, '');

browserTest(
  `dashboard task actions: schedule, cancel, rerun, retrigger, edit and create${skipped}`,
  async () => {
    const s = (svc = await startTestService());
    const q = s.queue();
    const tq = `prov/dact-${Math.random().toString(36).slice(2, 8)}`;
    const [blocker, taskId] = [slugid(), slugid()];
    await q.createTask(blocker, taskDef(tq));
    const def = taskDef(tq, { dependencies: [blocker], expires: new Date(Date.now() + 7 * 86400_000).toJSON() });
    await q.createTask(taskId, def);
    const original = await q.task(taskId);

    await withDashboard(s, async (page) => {
      await openTask(page, s.rootUrl, taskId, 'unscheduled');
      // A resolved task cannot be cancelled; an unscheduled one can be scheduled.
      expect(await page.isDisabled('button[data-action="schedule"]')).toBe(false);
      await act(page, 'schedule', false);
      await page.waitForFunction(() => document.getElementById('task-state')?.textContent === 'pending', undefined, T);
      expect((await q.status(taskId)).status.runs).toEqual([expect.objectContaining({ state: 'pending', reasonCreated: 'scheduled' })]);
      expect(await page.textContent('#action-note')).toBe('schedule: the task is pending (run 0)');

      // Cancel asks first: "No" leaves the task alone.
      await page.click('button[data-action="cancel"]');
      await page.click('form[data-confirm="cancel"] button.cancel');
      expect((await q.status(taskId)).status.state).toBe('pending');
      await page.click('button[data-action="cancel"]');
      await page.locator('section:has(#task-actions)').screenshot({ path: path.join(OUT, 'dashboard-task-actions.png') });
      await page.click('form[data-confirm="cancel"] button[type=submit]');
      await page.waitForFunction(() => document.getElementById('task-state')?.textContent === 'exception', undefined, T);
      expect((await q.status(taskId)).status.runs[0]).toMatchObject({ state: 'exception', reasonResolved: 'canceled' });
      expect(await page.isDisabled('button[data-action="cancel"]')).toBe(true);

      await act(page, 'rerun');
      await page.waitForFunction(() => document.getElementById('task-state')?.textContent === 'pending', undefined, T);
      expect((await q.status(taskId)).status.runs.map((r: any) => r.reasonCreated)).toEqual(['scheduled', 'rerun']);
      await page.screenshot({ path: path.join(OUT, 'dashboard-actions.png'), fullPage: true });

      // Retrigger: a new task in the same group, dates moved to now by the same offsets, no dependencies.
      const before = Date.now();
      await act(page, 'retrigger');
      // The new task's view says where it came from.
      await page.waitForFunction((old) => document.getElementById('action-note')?.textContent === `retriggered from ${old}`, taskId, T);
      const retriggered = hashTask(page);
      expect(retriggered).not.toBe(taskId);
      const copy = await q.task(retriggered);
      expect(copy.dependencies).toEqual([]);
      expect(copy.taskGroupId).toBe(original.taskGroupId);
      expect(copy.metadata).toEqual(original.metadata);
      expect(Date.parse(copy.created)).toBeGreaterThanOrEqual(before - 1000);
      const offset = (t: any, k: string) => Date.parse(t[k]) - Date.parse(t.created);
      expect(offset(copy, 'deadline')).toBe(offset(original, 'deadline'));
      expect(offset(copy, 'expires')).toBe(offset(original, 'expires'));

      // Edit and create: the definition, checked against the createTask schema in the page first.
      await page.click('button[data-action="edit"]');
      const editor = page.locator('#edit-form textarea');
      const edited = JSON.parse(await editor.inputValue());
      expect(Date.parse(edited.created)).toBeGreaterThanOrEqual(before - 1000);
      await editor.fill(JSON.stringify({ ...edited, priority: 'urgent', colour: 'red' }));
      await page.click('#edit-form button[type=submit]');
      await page.waitForSelector('#edit-errors li', T);
      expect(await page.locator('#edit-errors li').allTextContents()).toEqual([
        expect.stringMatching(/^\/priority: must be one of highest, /),
        '(root): unknown property colour',
      ]);
      const newId = await page.inputValue('#edit-form input[name=taskId]');
      await expect(q.task(newId)).rejects.toMatchObject({ statusCode: 404 });
      await editor.fill(JSON.stringify({ ...edited, metadata: { ...edited.metadata, name: 'edited in the dashboard' } }));
      await page.click('#edit-form button[type=submit]');
      await page.waitForFunction((old) => document.getElementById('action-note')?.textContent === `created from ${old}`, retriggered, T);
      expect(hashTask(page)).toBe(newId);
      expect((await q.task(newId)).metadata.name).toBe('edited in the dashboard');
    });
  },
  120_000,
);

let svc2: TestService | undefined;
afterAll(async () => svc2?.close());

browserTest(
  `dashboard task group: open by id, seal, cancel the group${skipped}`,
  async () => {
    const s = (svc2 = await startTestService());
    const q = s.queue();
    const tq = `prov/dgrp-${Math.random().toString(36).slice(2, 8)}`;
    const group = slugid();
    const ids = [slugid(), slugid()];
    for (const id of ids) await q.createTask(id, taskDef(tq, { taskGroupId: group }));

    await withDashboard(s, async (page) => {
      await page.fill('#taskGroupId', group);
      await page.click('#open-group button[type=submit]');
      await page.waitForSelector('#group-actions', T);
      expect(page.url()).toContain(`#group=${group}`);

      await act(page, 'seal');
      await page.waitForSelector('#group-sealed', T);
      expect((await q.getTaskGroup(group)).sealed).toBeTruthy();
      expect(await page.isDisabled('button[data-action="seal"]')).toBe(true);

      await act(page, 'cancel-group');
      await page.waitForFunction(() => document.getElementById('action-note')?.textContent === 'cancelled 2 of 2 tasks', undefined, T);
      for (const id of ids) expect((await q.status(id)).status.runs[0]).toMatchObject({ state: 'exception', reasonResolved: 'canceled' });
      await page.locator('section:has(#group-actions)').screenshot({ path: path.join(OUT, 'dashboard-group-actions.png') });
    });
  },
  90_000,
);
