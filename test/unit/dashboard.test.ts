/**
 * The dashboard's static files: only the listed files are reachable, each with its content type;
 * over HTTP no page may frame them (clickjacking of its quarantine and hook-trigger forms, issue 34).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dashboardFile } from '../../shared/ops/dashboard';
import { start } from '../../shared/local/main';
import { freePort } from '../../shared/local/azurite';

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
  for (const name of ['charts.js', 'group.js', 'log.js', 'uPlot.iife.min.js', 'uPlot.min.css'])
    expect(dashboardFile('index.html')?.body.toString()).toContain(`/api/dashboard/${name}`);
});

test('every dashboard response forbids framing and sniffing, and keeps the CSP that lets its own files run', async () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dashboard-'));
  const s = await start({ env: { PORT: String(await freePort()), QUEUE_STORAGE_CONNECTION: 'memory:' }, root });
  try {
    for (const file of ['', '/index.html', '/dashboard.js', '/dashboard.css', '/uPlot.iife.min.js', '/config.json']) {
      const res = await fetch(`${s.config.publicUrl}/api/dashboard${file}`);
      await res.arrayBuffer();
      expect({ file, status: res.status }).toEqual({ file, status: 200 });
      const csp = res.headers.get('content-security-policy') ?? '';
      expect({ file, csp: csp.split(/;\s*/) }).toEqual({ file, csp: expect.arrayContaining(["default-src 'self'", "frame-ancestors 'none'"]) });
      expect(csp).not.toContain('unsafe-inline');
      expect(res.headers.get('x-frame-options')).toBe('DENY');
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    }
  } finally {
    await s.stop();
    fs.rmSync(root, { recursive: true, force: true });
  }
});
