/**
 * The operator dashboard: static files in ./dashboard/ (HTML, CSS, browser JavaScript), served as
 * they are, uPlot (the charts' library, from its npm package), croner (the service's own cron
 * library, so a hook's next fires are computed in the page as the service fires them), and a tiny config document with the
 * queue's public root URL, which the page's Hawk signatures must name (QUEUE_PUBLIC_URL may differ
 * from the address the browser used). The build copies ./dashboard/ next to the compiled module
 * and the library into ./dashboard/vendor/ (bin/copy-assets.js); from the source tree (tests) the
 * library is read from node_modules.
 */
import fs from 'node:fs';
import path from 'node:path';

const DIR = path.join(__dirname, 'dashboard');

/** Every file the dashboard serves, with its content type; nothing else under DIR is reachable. */
const CONTENT_TYPES: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'dashboard.css': 'text/css; charset=utf-8',
  'dashboard.js': 'text/javascript; charset=utf-8',
  'index-hooks.js': 'text/javascript; charset=utf-8',
  'secrets.js': 'text/javascript; charset=utf-8',
  'charts.js': 'text/javascript; charset=utf-8',
  'group.js': 'text/javascript; charset=utf-8',
  'log.js': 'text/javascript; charset=utf-8',
  'schema-check.js': 'text/javascript; charset=utf-8',
  'actions.js': 'text/javascript; charset=utf-8',
  'task-actions.js': 'text/javascript; charset=utf-8',
  'hook-edit.js': 'text/javascript; charset=utf-8',
  'croner.umd.js': 'text/javascript; charset=utf-8',
  'uPlot.iife.min.js': 'text/javascript; charset=utf-8',
  'uPlot.min.css': 'text/css; charset=utf-8',
};

/** Library files: in vendor/ once built, else in their package (the same list as bin/copy-assets.js). */
const VENDOR: Record<string, string> = {
  'uPlot.iife.min.js': 'uplot/dist/uPlot.iife.min.js',
  'uPlot.min.css': 'uplot/dist/uPlot.min.css',
  'croner.umd.js': 'croner/dist/croner.umd.js',
};

/** A library file in its package; beside package.json when the package's `exports` hide it (croner). */
function packageFile(from: string): string {
  try {
    return require.resolve(from);
  } catch {
    // Node says ERR_PACKAGE_PATH_NOT_EXPORTED; other resolvers (jest's) say "cannot find".
    const name = from.split('/')[0];
    return path.join(path.dirname(require.resolve(`${name}/package.json`)), from.slice(name.length + 1));
  }
}

function filePath(name: string): string {
  if (!Object.hasOwn(VENDOR, name)) return path.join(DIR, name);
  const built = path.join(DIR, 'vendor', name);
  return fs.existsSync(built) ? built : packageFile(VENDOR[name]);
}

/**
 * The page's own origin only: no inline script or style, API calls to the same host; and no page
 * may frame it (`frame-ancestors` is not covered by `default-src`), since a framed quarantine or
 * hook-trigger form can be clicked through a decoy (clickjacking).
 */
export const DASHBOARD_CSP = "default-src 'self'; connect-src 'self'; frame-ancestors 'none'";

/**
 * Headers of every dashboard response: the CSP, X-Frame-Options for browsers without
 * `frame-ancestors`, and nosniff so a file is only ever run or styled as its declared type.
 */
export const DASHBOARD_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': DASHBOARD_CSP,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
};

export interface StaticFile {
  contentType: string;
  body: Buffer;
}

const cache = new Map<string, StaticFile>();

/** A dashboard file by name (read once), or undefined if there is no such file. */
export function dashboardFile(name: string): StaticFile | undefined {
  const contentType = Object.hasOwn(CONTENT_TYPES, name) ? CONTENT_TYPES[name] : undefined;
  if (!contentType) return undefined;
  let file = cache.get(name);
  if (!file) {
    file = { contentType, body: fs.readFileSync(filePath(name)) };
    cache.set(name, file);
  }
  return file;
}

/** What the page reads from config.json. */
export function dashboardConfig(publicUrl: string): { rootUrl: string } {
  return { rootUrl: publicUrl };
}
