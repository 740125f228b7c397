/**
 * The dashboard's views of the scheduling controls in a real browser (see dashboard.test.ts for the
 * setup): delayed and suspended counts per task queue, the held concurrency keys, a key's holder
 * and waiters in order, and a suspended task's suspensions and resume time.
 */
import path from 'node:path';
import { startTestService, TestService, taskDef, slugid } from '../helpers/service';
import { browserMissing, browserTest, OUT, withDashboard } from '../helpers/browser';

let svc: TestService | undefined;
afterAll(async () => svc?.close());

browserTest(
  `dashboard: delayed and suspended counts, who holds a key and who waits, a suspended task${browserMissing ? ` (skipped: ${browserMissing})` : ''}`,
  async () => {
    const s = (svc = await startTestService({ QUEUE_CLAIM_WORK_POLL_S: '1' }));
    const ref = await (await fetch(`${s.rootUrl}/api/references/queue/v1/api.json`)).json();
    const Queue = s.tc.createClient(ref, 'queue');
    const q = s.queue();
    const tq = `prov/dsched-${Math.random().toString(36).slice(2, 8)}`;
    const key = `dash-key-${Date.now()}`;
    const later = new Date(Date.now() + 3600_000).toJSON();
    const W = { workerGroup: 'wg', workerId: 'dash-w1' };

    // The holder of `key`, and a task to suspend, both claimed by one worker.
    const [holder, suspended, waiter1, waiter2, delayed] = [slugid(), slugid(), slugid(), slugid(), slugid()];
    await q.createTask(holder, taskDef(tq, { concurrencyKey: key }));
    await q.createTask(suspended, taskDef(tq));
    const claims = (await q.claimWork(tq, { ...W, tasks: 2 })).tasks;
    expect(claims).toHaveLength(2);
    const sc = claims.find((c: any) => c.status.taskId === suspended);
    await new Queue({ rootUrl: s.rootUrl, credentials: sc.credentials }).suspendRun(suspended, 0, { continuation: { step: 1 }, resumeAt: later });
    await q.createTask(waiter1, taskDef(tq, { concurrencyKey: key }));
    await q.createTask(waiter2, taskDef(tq, { concurrencyKey: key, priority: 'high' }));
    await q.createTask(delayed, taskDef(tq, { notBefore: later }));
    // The waiters ask for the key (and wait); the delayed task is not due.
    expect((await q.claimWork(tq, { ...W, tasks: 3 })).tasks).toEqual([]);

    await withDashboard(s, async (page) => {
      // Overview: the queue's delayed and suspended counts; the held key with its holder.
      const cell = (cls: string) => page.locator(`tr[data-queue="${tq}"] td.${cls}`);
      await page.waitForFunction((id) => document.querySelector(`tr[data-queue="${id}"] td.suspended`)?.textContent === '1', tq, { timeout: 15_000 });
      expect(await cell('delayed').textContent()).toBe('2');
      expect(await cell('pending').textContent()).toBe('4');
      const keyRow = page.locator(`tr[data-key="${key}"]`);
      await keyRow.waitFor({ timeout: 15_000 });
      expect(await keyRow.textContent()).toContain(holder);
      await page.screenshot({ path: path.join(OUT, 'dashboard-scheduling-overview.png'), fullPage: true });

      // The key: its holder running on the worker, and the waiters in the order they will get it.
      await keyRow.locator('a').first().click();
      await page.waitForSelector('#key-holder', { timeout: 15_000 });
      expect(await page.locator('#key-holder').textContent()).toMatch(new RegExp(`held by ${holder} run 0 \\(running on wg/dash-w1\\)`));
      expect(await page.locator('tr[data-waiter]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-waiter')))).toEqual([waiter2, waiter1]);
      await page.screenshot({ path: path.join(OUT, 'dashboard-scheduling-key.png'), fullPage: true });

      // The suspended task: its suspension count and when it resumes; a waiter links to its key.
      await page.goto(`${s.rootUrl}/api/dashboard#task=${suspended}`);
      await page.waitForSelector('#task-suspensions', { timeout: 15_000 });
      expect(await page.locator('#task-suspensions').textContent()).toBe('suspended 1 time');
      expect(await page.locator('#task-resume-at').textContent()).toContain(`resumes at ${later}`);
      expect(await page.locator('section:has(h2:text("Task")) tbody tr').allTextContents()).toEqual([
        expect.stringMatching(/^0exceptionscheduledsuspended/),
        expect.stringMatching(/^1pendingresumed/),
      ]);
      await page.screenshot({ path: path.join(OUT, 'dashboard-scheduling-task.png'), fullPage: true });
      await page.goto(`${s.rootUrl}/api/dashboard#task=${waiter1}`);
      await page.waitForSelector(`a[href="#key=${key}"]`, { timeout: 15_000 });
      await page.goto(`${s.rootUrl}/api/dashboard#task=${delayed}`);
      await page.waitForFunction(() => document.getElementById('task-resume-at')?.textContent?.startsWith('starts no earlier than'), undefined, {
        timeout: 15_000,
      });
    });
  },
  90_000,
);
