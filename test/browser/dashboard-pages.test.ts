/**
 * Every dashboard page from a seeded store, in headless Chromium: the charts (a day of per-minute
 * rollups seeded in the Rollups table, over the real counts), a task group with its dependency
 * graph, a task whose worker streams its log (the reference worker's own streaming module), the log
 * view following it, artifacts opened through signed URLs, and the sign-in states. Screenshots go
 * to test-output/. Skipped, with the reason printed, where Chromium or playwright-core is missing.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startTestService, TestService, taskDef, slugid } from '../helpers/service';
import { browserMissing, browserTest, OUT, withDashboard } from '../helpers/browser';
import { ALL_PK, WAIT_BOUNDS_MS, emptyTally, rollupEntity, rollupPk, ROLLUP_MINUTE_MS } from '../../shared/ops/rollups';
import { MAX_TRANSACTION_ACTIONS } from '../../shared/storage/storage';
import { LiveLogStream } from '../../worker/log-stream';
import { modernQueues } from '../../worker/clients';

let svc: TestService | undefined;
afterAll(async () => svc?.close());

const quiet = { info: () => {}, warn: () => {}, error: () => {} };
const bucket = (ms: number) => {
  const i = WAIT_BOUNDS_MS.findIndex((b) => ms <= b);
  return i === -1 ? WAIT_BOUNDS_MS.length : i;
};

/**
 * A day of minutes ending before the current one: bursts of pending work drained by a steady pool of
 * workers, waits that grow with the backlog, a few failures. Pending and running end at `end`.
 */
async function seedRollups(s: TestService, taskQueueId: string, end: { pending: number; running: number }): Promise<void> {
  const minutes = 24 * 60;
  const last = Math.floor(Date.now() / ROLLUP_MINUTE_MS) * ROLLUP_MINUTE_MS - ROLLUP_MINUTE_MS;
  const pendingAt = (i: number) => {
    const burst = Math.max(0, Math.sin((i / 180) * Math.PI)) ** 3 * 40 + Math.max(0, Math.sin((i / 23) * Math.PI)) * 6;
    return Math.round(burst * (i < minutes - 20 ? 1 : (minutes - 1 - i) / 20)) + end.pending;
  };
  const runningAt = (i: number) => (i > minutes - 10 ? end.running : Math.round(6 + 2 * Math.sin(i / 40)));
  const rows = [];
  for (let i = 1; i < minutes; i++) {
    const t = emptyTally();
    const dp = pendingAt(i) - pendingAt(i - 1);
    const dr = runningAt(i) - runningAt(i - 1);
    const started = 6 + (i % 5) + Math.max(0, dr);
    t.runningIn = started;
    t.runningOut = started - dr;
    t.pendingOut = started;
    t.pendingIn = started + dp;
    t.failed = i % 37 === 0 ? 2 : i % 11 === 0 ? 1 : 0;
    t.exception = i % 97 === 0 ? 1 : 0;
    t.completed = t.runningOut - t.failed - t.exception;
    const backlog = pendingAt(i);
    const fast = Math.ceil(started * 0.8);
    t.waitN = started;
    t.w[bucket(300 + backlog * 900)] += fast;
    t.w[bucket(2000 + backlog * 4000)] += started - fast;
    rows.push({ minute: new Date(last - (minutes - 1 - i) * ROLLUP_MINUTE_MS).toJSON(), t });
  }
  const table = s.services.storage.table('Rollups');
  for (const pk of [rollupPk(taskQueueId), ALL_PK]) {
    for (let i = 0; i < rows.length; i += MAX_TRANSACTION_ACTIONS) {
      await table.transact(rows.slice(i, i + MAX_TRANSACTION_ACTIONS).map(({ minute, t }) => ({ op: 'upsert', entity: rollupEntity(pk, minute, 'seed', t) })));
    }
  }
}

const meta = (name: string) => ({ name, description: 'd', owner: 'ops@example.com', source: 'https://example.com/ci' });

browserTest(
  `dashboard pages from a seeded store: charts, task group, live log, artifacts, sign-in${browserMissing ? ` (skipped: ${browserMissing})` : ''}`,
  async () => {
    const s = (svc = await startTestService());
    const tq = `ci/linux-${Math.random().toString(36).slice(2, 6)}`;
    const q = s.queue();
    const group = slugid();
    const ids: Record<string, string> = {};
    const create = async (key: string, name: string, deps: string[] = []) => {
      ids[key] = slugid();
      await q.createTask(ids[key], taskDef(tq, { taskGroupId: group, metadata: meta(name), dependencies: deps.map((d) => ids[d]) }));
    };
    await create('lint', 'lint');
    await create('build', 'build linux x64');
    await create('flaky', 'flaky integration check');
    await create('unit', 'unit tests', ['build']);
    await create('e2e', 'end-to-end tests', ['build']);
    await create('docs', 'docs', ['lint']);
    await create('package', 'package', ['unit', 'e2e']);
    await create('deploy', 'deploy to staging', ['package', 'docs']);
    const claims = (await q.claimWork(tq, { workerGroup: 'ci-east', workerId: 'vm-17', tasks: 3 })).tasks;
    expect(claims.map((c: any) => c.status.taskId).sort()).toEqual([ids.lint, ids.build, ids.flaky].sort());
    const creds = (key: string) => claims.find((c: any) => c.status.taskId === ids[key]).credentials;
    await s.queue(creds('lint')).reportCompleted(ids.lint, 0);
    await s.queue(creds('flaky')).reportFailed(ids.flaky, 0);
    // Two more tasks wait in the queue, outside the group.
    for (const name of ['nightly docs', 'benchmarks']) await q.createTask(slugid(), taskDef(tq, { metadata: meta(name) }));
    await seedRollups(s, tq, { pending: 2, running: 1 });

    // The build's worker streams its log as the reference worker does.
    const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'dash-log-'));
    const logFile = path.join(dir, 'live.log');
    await fs.promises.writeFile(logFile, `[taskcluster-worker] ${new Date().toISOString()} task ${ids.build} run 0 on worker ci-east/vm-17\n`);
    const queueFor = await modernQueues(s.rootUrl);
    const stream = new LiveLogStream({
      file: logFile,
      createUrl: () => queueFor(creds('build')).createLiveLog!(ids.build, 0),
      log: quiet,
      ids: {},
      intervalMs: 3600_000, // flushed by hand below
    });
    stream.start();
    const steps = ['$ ./configure --prefix=/usr', 'checking for gcc... gcc', 'checking whether the C compiler works... yes', '$ make -j8'];
    for (let i = 0; i < 30; i++) steps.push(`  CC src/module${i}.o`);
    await fs.promises.appendFile(logFile, steps.join('\n') + '\n');
    await stream.flush();

    await withDashboard(s, async (page) => {
      const drawn = async (scope: string) => {
        for (const c of ['depth', 'wait', 'resolutions']) await page.locator(`${scope} [data-chart="${c}"][data-drawn="true"]`).waitFor({ timeout: 15_000 });
      };
      // Overview: the charts of all task queues, the last hour, then the last day.
      await drawn('main');
      expect(await page.locator('main .charts canvas').count()).toBe(3);
      expect(await page.locator('main .chart-summary').textContent()).toMatch(/^\d+ started, \d+ completed, \d+ failed, \d+ exception$/);
      await page.locator('#who').waitFor();
      expect(await page.locator('#who').textContent()).toBe('signed in as static/root');
      await page.waitForSelector(`tr[data-queue="${tq}"]`, { timeout: 15_000 });
      await page.screenshot({ path: path.join(OUT, 'dashboard-overview.png'), fullPage: true });
      await page.locator('section.charts-section').screenshot({ path: path.join(OUT, 'dashboard-charts.png') });
      await page.click('button[data-hours="24"]');
      await page.waitForSelector('button[data-hours="24"].active', { timeout: 15_000 });
      await drawn('main');
      await page.screenshot({ path: path.join(OUT, 'dashboard-overview-24h.png'), fullPage: true });
      await page.click('button[data-hours="1"]');
      await page.waitForSelector('button[data-hours="1"].active', { timeout: 15_000 });

      // A task queue: its own charts above its lists.
      await page.goto(`${s.rootUrl}/api/dashboard#queue=${tq}`);
      await drawn('main');
      expect(await page.locator('main h2:has-text("Activity of")').textContent()).toContain(tq);
      await page.screenshot({ path: path.join(OUT, 'dashboard-queue-charts.png'), fullPage: false });

      // The task group: progress by state and the dependency graph, each node a link to its task.
      await page.goto(`${s.rootUrl}/api/dashboard#group=${group}`);
      await page.locator('#group-graph').waitFor({ timeout: 15_000 });
      const legend = await page.locator('.progress-legend').textContent();
      for (const part of ['completed 1', 'running 1', 'pending 1', 'unscheduled 4', 'failed 1', '2 of 8 resolved']) expect(legend).toContain(part);
      expect(await page.locator('#group-graph a[data-node]').count()).toBe(8);
      expect(await page.locator('#group-graph path.edge').count()).toBe(7);
      await page.screenshot({ path: path.join(OUT, 'dashboard-group.png'), fullPage: true });
      // A task its worker resolved: "by" names the worker, not its temporary client id.
      await page.click(`#group-graph a[data-node="${ids.lint}"]`);
      await page.waitForFunction(() => document.getElementById('task-state')?.textContent === 'completed', undefined, { timeout: 15_000 });
      const resolvedBy = page.locator('section:has(h2:text("History")) tbody tr').first().locator('td').nth(7);
      expect(await resolvedBy.textContent()).toBe('worker ci-east/vm-17');
      expect(await resolvedBy.getAttribute('title')).toMatch(/^task-client\/.*\/on\/ci-east\/vm-17\/until\//);
      await page.goBack();
      await page.locator('#group-graph').waitFor({ timeout: 15_000 });
      await page.click(`#group-graph a[data-node="${ids.build}"]`);
      await page.waitForFunction(() => document.getElementById('task-state')?.textContent === 'running', undefined, { timeout: 15_000 });
      expect(page.url()).toContain(`#task=${ids.build}`);

      expect(await page.locator(`tr[data-run="0"] a.log-link`).textContent()).toBe('live log');
      await page.screenshot({ path: path.join(OUT, 'dashboard-task-running.png'), fullPage: true });

      // The log link clicked while an auto-refresh of the task view is still loading: the log opens
      // once that refresh is done (the click was dropped, and the log view never auto-refreshes).
      const statusUrl = `**/task/${ids.build}/status`;
      let arrived!: () => void;
      let release!: () => void;
      const refreshLoading = new Promise<void>((r) => (arrived = r));
      const held = new Promise<void>((r) => (release = r));
      await page.route(statusUrl, async (route) => {
        arrived();
        await held;
        await route.continue();
      });
      const refresh = page.evaluate(() => (window as any).render());
      await refreshLoading;
      await page.click('tr[data-run="0"] a.log-link');
      release();
      await refresh;
      await page.unroute(statusUrl);
      // The log view follows the run: lines appended after it opened show up.
      await page.waitForSelector('#log :text("CC src/module29.o")', { timeout: 15_000 });
      await fs.promises.appendFile(logFile, '  LD bin/queue\nbuild finished: 0 warnings\n');
      await stream.flush();
      await page.waitForSelector('#log :text("build finished: 0 warnings")', { timeout: 15_000 });
      expect(await page.locator('#log-size').textContent()).toContain('following');
      await page.screenshot({ path: path.join(OUT, 'dashboard-log.png'), fullPage: false });

      // The run ends as the worker ends it: the log uploaded as an artifact, then completed.
      await stream.stop();
      const logText = await fs.promises.readFile(logFile, 'utf8');
      const wq = s.queue(creds('build'));
      const put = await wq.createArtifact(ids.build, 0, 'public/logs/live.log', {
        storageType: 's3',
        contentType: 'text/plain',
        expires: new Date(Date.now() + 3600_000).toJSON(),
      });
      expect((await fetch(put.putUrl, { method: 'PUT', body: logText, headers: { 'content-type': 'text/plain' } })).status).toBe(201);
      await wq.reportCompleted(ids.build, 0);
      await page.waitForFunction(() => document.getElementById('log-state')?.textContent === 'completed', undefined, { timeout: 15_000 });
      expect(await page.locator('#log').textContent()).toBe(logText);

      // Artifacts open and download through signed URLs: the link works without credentials.
      await page.goto(`${s.rootUrl}/api/dashboard#task=${ids.build}`);
      const open = page.locator('tr[data-artifact="public/logs/live.log"] a.open');
      await open.waitFor({ timeout: 15_000 });
      const href = (await open.getAttribute('href'))!;
      expect(href).toContain('bewit=');
      expect(await page.locator('tr[data-artifact="public/logs/live.log"] a.download').getAttribute('download')).toBe('live.log');
      const res = await fetch(new URL(href, s.rootUrl));
      expect(res.status).toBe(200);
      expect(await res.text()).toBe(logText);
      await page.screenshot({ path: path.join(OUT, 'dashboard-task.png'), fullPage: true });
    });

    // Not signed in: a hint where data would be, never a raw InsufficientScopes box.
    await withDashboard(
      s,
      async (page) => {
        await page.waitForSelector('main .signin-hint', { timeout: 15_000 });
        expect(await page.locator('#signin-banner').textContent()).toContain('Not signed in.');
        expect(await page.locator('#who').textContent()).toBe('not signed in');
        expect(await page.locator('main').textContent()).not.toContain('InsufficientScopes');
        await page.screenshot({ path: path.join(OUT, 'dashboard-signed-out.png'), fullPage: false });
        // A wrong access token is named as such, once, beside the clientId.
        await page.fill('#clientId', 'static/root');
        await page.fill('#accessToken', 'not-the-token');
        await page.click('#login button[type=submit]');
        await page.waitForFunction(() => document.getElementById('who')?.textContent === 'wrong access token for static/root', undefined, { timeout: 15_000 });
        await page.waitForSelector('main .bad-token', { timeout: 15_000 });
        expect(await page.locator('main').textContent()).not.toContain('Bad mac');
        await page.screenshot({ path: path.join(OUT, 'dashboard-wrong-token.png'), fullPage: false });
      },
      { credentials: null },
    );
  },
  120_000,
);
