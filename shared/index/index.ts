/**
 * The index domain: insert (by the API and by the completed-task consumer), find, delete, and the
 * expirers the reaper runs for index rows. Every write is idempotent, so a retried call or a
 * redelivered event converges on the same rows.
 */
import type { Storage } from '../storage/storage';
import type { ExpiryIndex, ExpiryRow } from '../tasks/expiry';
import type { Logger } from '../log';
import { encodeKey } from '../storage/keys';
import { ApiError, badArgs, inputError, notFound } from '../errors';
import { IndexStore, IndexedTask, StoredTask, splitPath } from './store';

export interface IndexDeps {
  storage: Storage;
  expiry: ExpiryIndex;
  now: () => Date;
  log: Logger;
}

/** Taskcluster's namespace format: dot-separated words of URL-safe characters. */
export const NAMESPACE_FORMAT = /^([a-zA-Z0-9_!~*'()%-]+\.)*[a-zA-Z0-9_!~*'()%-]+$/;
/** Keeps every key (escaped into a table key, ≤ 1 KiB) well inside Table Storage's limit. */
export const MAX_NAMESPACE_LENGTH = 255;
/** `task.extra.index.data` and the API's `data` are stored in one string property (64 KiB). */
export const MAX_DATA_CHARS = 30_000;
/** The route prefix that asks for a completed task to be indexed. */
export const INDEX_ROUTE_PREFIX = 'index.';

export const EXPIRY_KIND_TASK = 'index-task';
export const EXPIRY_KIND_NAMESPACE = 'index-namespace';

export function checkNamespace(ns: string, field = 'namespace'): void {
  if (ns.length > MAX_NAMESPACE_LENGTH || !NAMESPACE_FORMAT.test(ns)) {
    throw badArgs(`${field} '${ns}' must be dot-separated words of [a-zA-Z0-9_!~*'()%-], at most ${MAX_NAMESPACE_LENGTH} characters`);
  }
}

/** Namespaces expire at the end of the day after their latest entry, so busy paths rarely rewrite them (as Taskcluster does). */
export function namespaceExpiry(expires: string): string {
  const d = new Date(expires);
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1)).toJSON();
}

/** The path's ancestors, outermost first: `a.b.c` → `a`, `a.b`. */
function ancestors(path: string): string[] {
  const words = path.split('.');
  return words.slice(0, -1).map((_w, i) => words.slice(0, i + 1).join('.'));
}

/** Whether `next` should replace `cur`: a higher rank, or an equal rank that is not older. */
export function prefers(next: Pick<IndexedTask, 'rank' | 'order'>, cur: Pick<IndexedTask, 'rank' | 'order'>): boolean {
  if (next.rank !== cur.rank) return next.rank > cur.rank;
  return next.order >= cur.order;
}

export interface InsertInput {
  taskId: string;
  rank: number;
  data: Record<string, unknown>;
  expires: string;
}

/**
 * Indexes `taskId` at `path` unless a preferred live entry is there. `order` breaks ties of equal rank
 * (the API passes the current time, the consumer the task's resolution time). Returns the entry
 * that is at the path afterwards.
 */
export async function insertIndexedTask(d: IndexDeps, path: string, input: InsertInput, order: string): Promise<IndexedTask> {
  checkNamespace(path);
  if (JSON.stringify(input.data).length > MAX_DATA_CHARS) throw inputError(`data must be at most ${MAX_DATA_CHARS} characters of JSON`);
  const store = new IndexStore(d.storage);
  const next: IndexedTask = { namespace: path, taskId: input.taskId, rank: input.rank, data: input.data, expires: new Date(input.expires).toJSON(), order };

  // Expiry rows first, so every row this call may leave behind is found when it expires.
  const nsExpires = namespaceExpiry(next.expires);
  const parents = ancestors(path);
  await d.expiry.record(EXPIRY_KIND_TASK, encodeKey(path), next.expires, { path });
  if (parents.length) {
    await d.expiry.record(EXPIRY_KIND_NAMESPACE, encodeKey(splitPath(path).parent), nsExpires, { paths: parents });
    // A parent always lives at least as long as its children (raised first, removed last), so
    // when the innermost namespace lives long enough, so do all of them: one read on the usual path.
    const inner = await store.getNamespace(parents[parents.length - 1]);
    if (!inner || inner.expires < nsExpires) {
      // Parents before children: a namespace row never exists without its parent's.
      for (const ns of parents) await store.ensureNamespace(ns, nsExpires);
    }
  }

  const stored = await store.putTask(path, (cur) => {
    if (!cur) return next;
    // An expired entry is replaced whatever its rank (as Taskcluster's): it is no longer there.
    if (!prefers(next, cur) && new Date(cur.expires) > d.now()) return undefined;
    return sameEntry(next, cur) ? undefined : next;
  });
  return strip(stored!);
}

function strip(t: StoredTask): IndexedTask {
  const { etag: _etag, ...rest } = t;
  return rest;
}

function sameEntry(a: IndexedTask, b: IndexedTask): boolean {
  return a.taskId === b.taskId && a.rank === b.rank && a.expires === b.expires && a.order === b.order && JSON.stringify(a.data) === JSON.stringify(b.data);
}

/** The live entry at `path` (expired entries the reaper has not removed yet are not found). */
export async function findIndexedTask(d: IndexDeps, path: string): Promise<IndexedTask> {
  checkNamespace(path, 'indexPath');
  const t = await new IndexStore(d.storage).getTask(path);
  if (!t || new Date(t.expires) <= d.now()) throw notFound(`Indexed task not found at ${path}`);
  return strip(t);
}

export async function deleteIndexedTask(d: IndexDeps, path: string): Promise<void> {
  await new IndexStore(d.storage).deleteTask(path);
}

/** The completed task as the consumer receives it (the shape of a task row). */
export interface CompletedTask {
  taskId: string;
  definition: { routes: string[]; expires: string; extra: Record<string, unknown> };
  runs: { state: string; resolved?: string }[];
}

/**
 * Indexes a completed task at every `index.<namespace>` route: rank, data and expiry from
 * `task.extra.index`. Order between equal ranks is the completing run's resolution time, so a
 * redelivered older completion never replaces a newer one. Invalid routes are logged and skipped
 * (the task is done; nobody could fix them now).
 */
export async function indexCompletedTask(d: IndexDeps, task: CompletedTask): Promise<string[]> {
  const run = task.runs[task.runs.length - 1];
  if (!run || run.state !== 'completed') return [];
  const opts = (task.definition.extra?.index ?? {}) as { rank?: unknown; data?: unknown; expires?: unknown };
  const rank = typeof opts.rank === 'number' && Number.isFinite(opts.rank) ? opts.rank : 0;
  const data = opts.data && typeof opts.data === 'object' && !Array.isArray(opts.data) ? (opts.data as Record<string, unknown>) : {};
  const expires = typeof opts.expires === 'string' && !isNaN(Date.parse(opts.expires)) ? new Date(opts.expires).toJSON() : task.definition.expires;
  const order = run.resolved ?? '';
  const indexed: string[] = [];
  for (const route of task.definition.routes) {
    if (!route.startsWith(INDEX_ROUTE_PREFIX)) continue;
    const path = route.slice(INDEX_ROUTE_PREFIX.length);
    try {
      await insertIndexedTask(d, path, { taskId: task.taskId, rank, data, expires }, order);
      indexed.push(path);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err; // storage trouble: let the delivery be retried
      d.log.warn('index-route-skipped', { taskId: task.taskId, route, error: (err as Error).message });
    }
  }
  return indexed;
}

/** Reaper: removes the entry at `data.path` if it is (still) expired; a re-inserted later entry stays. */
export async function expireIndexedTask(d: IndexDeps, row: ExpiryRow): Promise<void> {
  const path = row.data.path as string;
  const store = new IndexStore(d.storage);
  const t = await store.getTask(path);
  if (!t || new Date(t.expires) > d.now()) return;
  await store.deleteTask(path, t.etag); // if replaced meanwhile, its own expiry row handles it
}

/** Reaper: removes those of `data.paths` (deepest first) whose expiry has passed. */
export async function expireNamespaces(d: IndexDeps, row: ExpiryRow): Promise<void> {
  const store = new IndexStore(d.storage);
  for (const path of [...(row.data.paths as string[])].reverse()) {
    const ns = await store.getNamespace(path);
    if (!ns || new Date(ns.expires) > d.now()) continue;
    await store.deleteNamespace(path, ns.etag);
  }
}
