/**
 * The dashboard's static files: only the listed files are reachable, each with its content type
 * (their headers over HTTP: test/local/dashboard-http.test.ts).
 */
import { dashboardFile } from '../../shared/ops/dashboard';

test('the page, its scripts and its stylesheet are served with their content types', () => {
  expect(dashboardFile('index.html')?.contentType).toBe('text/html; charset=utf-8');
  expect(dashboardFile('index.html')?.body.toString()).toContain('<script src="/api/dashboard/dashboard.js" defer></script>');
  expect(dashboardFile('dashboard.js')?.contentType).toBe('text/javascript; charset=utf-8');
  expect(dashboardFile('dashboard.css')?.contentType).toBe('text/css; charset=utf-8');
  expect(dashboardFile('index-hooks.js')?.contentType).toBe('text/javascript; charset=utf-8');
  expect(dashboardFile('index.html')?.body.toString()).toContain('<script src="/api/dashboard/index-hooks.js" defer></script>');
});

test.each(['../dashboard.ts', '../../config.ts', 'missing.js', '__proto__', 'constructor', 'toString', ''])('%j is not a dashboard file', (name) => {
  expect(dashboardFile(name)).toBeUndefined();
});

test('the chart library is served from its package, and the build copies the same files', () => {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { VENDOR_FILES } = require('../../bin/copy-assets.js') as { VENDOR_FILES: { name: string }[] };
  for (const f of VENDOR_FILES) expect(dashboardFile(f.name)?.body.length).toBeGreaterThan(1000);
  expect(dashboardFile('uPlot.iife.min.js')?.body.toString()).toContain('uPlot');
  expect(dashboardFile('croner.umd.js')?.body.toString()).toMatch(/^var Cron=/);
  for (const name of [
    'secrets.js',
    'charts.js',
    'group.js',
    'log.js',
    'schema-check.js',
    'actions.js',
    'task-actions.js',
    'hook-edit.js',
    'croner.umd.js',
    'uPlot.iife.min.js',
    'uPlot.min.css',
  ])
    expect(dashboardFile('index.html')?.body.toString()).toContain(`/api/dashboard/${name}`);
});
