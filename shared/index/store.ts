/**
 * Index storage. Two tables, both partitioned by the parent namespace so that listing a
 * namespace's children (sub-namespaces or indexed tasks) is one partition query, never a scan:
 *   IndexNamespaces: PartitionKey = `ns:<parent>`, RowKey = <name>  (one row per namespace)
 *   IndexTasks:      PartitionKey = `ns:<parent>`, RowKey = <name>  (the task indexed at `<parent>.<name>`)
 * Every query of the index lives in this file.
 */
import { UNCHANGED, deleteIfMatch, guardedUpdate, readPage, type Storage, type CountedTable, type StoredEntity } from '../storage/storage';
import { decodeKey, encodeKey } from '../storage/keys';

export interface IndexedTask {
  /** The full index path, `<parent>.<name>`. */
  namespace: string;
  taskId: string;
  rank: number;
  data: Record<string, unknown>;
  expires: string;
  /** Ties of equal rank go to the entry with the later order (insert time, or the task's resolution time). */
  order: string;
}

export interface IndexNamespace {
  namespace: string;
  name: string;
  expires: string;
}

/** Splits `a.b.c` into parent `a.b` and name `c`; a path without dots sits in the root (''). */
export function splitPath(path: string): { parent: string; name: string } {
  const i = path.lastIndexOf('.');
  return i < 0 ? { parent: '', name: path } : { parent: path.slice(0, i), name: path.slice(i + 1) };
}

export const partitionOf = (parent: string): string => `ns:${encodeKey(parent)}`;

function keysOf(path: string): { partitionKey: string; rowKey: string } {
  const { parent, name } = splitPath(path);
  return { partitionKey: partitionOf(parent), rowKey: encodeKey(name) };
}

export type StoredTask = IndexedTask & { etag: string };
export type StoredNamespace = IndexNamespace & { etag: string };

function taskFrom(e: StoredEntity): StoredTask {
  return {
    namespace: e.namespace as string,
    taskId: e.taskId as string,
    rank: e.rank as number,
    data: JSON.parse((e.data as string) || '{}'),
    expires: e.expires as string,
    order: e.order as string,
    etag: e.etag,
  };
}

function namespaceFrom(e: StoredEntity): StoredNamespace {
  const parent = decodeKey(e.partitionKey.slice(3));
  const name = decodeKey(e.rowKey);
  return { namespace: parent ? `${parent}.${name}` : name, name, expires: e.expires as string, etag: e.etag };
}

export class IndexStore {
  constructor(private readonly storage: Storage) {}

  private get tasks(): CountedTable {
    return this.storage.table('IndexTasks');
  }
  private get namespaces(): CountedTable {
    return this.storage.table('IndexNamespaces');
  }

  async getTask(path: string): Promise<StoredTask | undefined> {
    const k = keysOf(path);
    const e = await this.tasks.get(k.partitionKey, k.rowKey);
    return e ? taskFrom(e) : undefined;
  }

  private taskEntity(t: IndexedTask) {
    return { ...keysOf(t.namespace), namespace: t.namespace, taskId: t.taskId, rank: t.rank, data: JSON.stringify(t.data), expires: t.expires, order: t.order };
  }

  /**
   * Writes the entry `decide` answers for the one at `path` (undefined: keep it), under its ETag,
   * deciding again after a lost race (guardedUpdate). Returns the entry there afterwards.
   */
  async putTask(path: string, decide: (cur: StoredTask | undefined) => IndexedTask | undefined): Promise<StoredTask | undefined> {
    const out = await guardedUpdate(
      this.tasks,
      keysOf(path),
      (e) => {
        const next = decide(e && taskFrom(e));
        return next ? this.taskEntity(next) : UNCHANGED;
      },
      { what: `index entry ${path}` },
    );
    return out.row && taskFrom(out.row);
  }

  /** Deletes the entry unless it changed since read (then it is left as it is). */
  async deleteTask(path: string, etag = '*'): Promise<void> {
    const k = keysOf(path);
    await deleteIfMatch(this.tasks, k.partitionKey, k.rowKey, etag);
  }

  async getNamespace(path: string): Promise<StoredNamespace | undefined> {
    const k = keysOf(path);
    const e = await this.namespaces.get(k.partitionKey, k.rowKey);
    return e ? namespaceFrom(e) : undefined;
  }

  /** Creates the namespace row or raises its expiry to `expires` (never lowers it). */
  async ensureNamespace(path: string, expires: string): Promise<void> {
    await guardedUpdate(this.namespaces, keysOf(path), (cur) => (cur && (cur.expires as string) >= expires ? UNCHANGED : { expires }), {
      what: `index namespace ${path}`,
      mode: 'merge',
    });
  }

  /** Deletes the namespace unless it changed since read (then it is left as it is). */
  async deleteNamespace(path: string, etag = '*'): Promise<void> {
    const k = keysOf(path);
    await deleteIfMatch(this.namespaces, k.partitionKey, k.rowKey, etag);
  }

  async listNamespaces(parent: string, limit: number, continuation?: string): Promise<{ items: StoredNamespace[]; continuation?: string }> {
    const page = await readPage(this.namespaces, { partitionKey: partitionOf(parent) }, limit, continuation);
    return { items: page.items.map(namespaceFrom), continuation: page.continuation };
  }

  async listTasks(parent: string, limit: number, continuation?: string): Promise<{ items: StoredTask[]; continuation?: string }> {
    const page = await readPage(this.tasks, { partitionKey: partitionOf(parent) }, limit, continuation);
    return { items: page.items.map(taskFrom), continuation: page.continuation };
  }
}
