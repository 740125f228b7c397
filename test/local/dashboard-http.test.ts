/**
 * The dashboard over HTTP, from the local host: no page may frame it (clickjacking of its
 * quarantine and hook-trigger forms, issue 34).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { start } from '../../shared/local/main';
import { freePort } from '../../shared/local/azurite';

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
