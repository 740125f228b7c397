/**
 * Loading and writing task rows, with the other rows of the task's partition that go in the same
 * entity-group transaction. Every change is guarded by the row's ETag; what to write, and the
 * retries after a lost race, are the executor's (shared/lifecycle/executor.ts carries out a write's plan).
 */
import crypto from 'node:crypto';
import { Entity, KeyRange, MAX_TRANSACTION_ACTIONS, Storage, StorageConflict, TableAction, allRows, deleteRows } from '../storage/storage';
import { taskRowKey, TaskRecord, decodeTask, encodeTask, encodeTaskUpdate, type TaskDefinition } from './model';
import { BoundedCache } from '../bounded-cache';

/**
 * Task rows this instance read or wrote last, kept so its next transition of the task (the claim
 * after a create, the report after a claim) skips the read: at most this many rows...
 */
const RECENT_ROWS = 2_000;
/** ...of at most this size each, bounding the cache to about 32 MB (larger definitions are re-read). */
const RECENT_ROW_MAX_BYTES = 16 * 1024;

/** Rough size of an encoded row (strings and binary chunks dominate). */
function rowBytes(row: Entity): number {
  let n = 0;
  for (const v of Object.values(row)) n += typeof v === 'string' ? v.length : v instanceof Uint8Array ? v.byteLength : 8;
  return n;
}

/** A kept task row: as written or read, with its ETag and the amendments made since (amendRecent). */
interface RecentRow {
  readonly row: Entity;
  readonly etag: string;
  amends?: ((t: TaskRecord) => void)[];
  /** The row's definition once decoded: it never changes, so every hand-out shares it (frozen). */
  definition?: TaskDefinition;
}

/** The definition's properties of an encoded row (its chunks and their count). */
function definitionProps(row: Entity): Entity {
  const n = Number(row.defChunks);
  const out: Entity = { partitionKey: row.partitionKey, rowKey: row.rowKey, defChunks: n };
  for (let i = 0; i < n; i++) out[`def${i}`] = row[`def${i}`];
  return out;
}

/** Freezes a decoded definition and everything in it: shared by the records handed out, nobody may change it. */
function deepFreeze<T>(v: T): T {
  if (v && typeof v === 'object' && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const x of Object.values(v)) deepFreeze(x);
  }
  return v;
}

/** A task row with the id of the write that stores it (see TaskStore.ownWrite). */
function withWriteId(row: Entity): Entity {
  return { ...row, writeId: crypto.randomUUID() };
}

export class TaskStore {
  constructor(private readonly storage: Storage) {}

  /**
   * Least recently used first (a Map keeps insertion order). The encoded row, not the record: a
   * row is never changed after it is written or read, so keeping it costs no copy, and each
   * hand-out decodes a record of its own.
   */
  private readonly recent = new BoundedCache<string, RecentRow>(RECENT_ROWS);

  private get table() {
    return this.storage.table('Tasks');
  }

  async load(taskId: string): Promise<TaskRecord | undefined> {
    const row = await this.table.get(taskId, taskRowKey(taskId));
    if (!row) {
      this.recent.delete(taskId);
      return undefined;
    }
    const t = decodeTask(row);
    this.keep(t, row);
    return t;
  }

  /**
   * The row as this instance last read or wrote it, if kept. Another instance may have written
   * since: only an ETag-guarded write may rely on it (shared/lifecycle/executor.ts re-reads the row
   * before it refuses or answers without a write).
   */
  recentRow(taskId: string): TaskRecord | undefined {
    const kept = this.recent.get(taskId);
    if (!kept) return undefined;
    const t = decodeTask(kept.row, kept.definition);
    kept.definition ??= deepFreeze(t.definition);
    t.etag = kept.etag;
    for (const amend of kept.amends ?? []) amend(t);
    return t;
  }

  private keep(t: TaskRecord, row: Entity, definition?: TaskDefinition): void {
    this.recent.delete(t.taskId);
    if (!t.etag || rowBytes(row) > RECENT_ROW_MAX_BYTES) return;
    this.recent.set(t.taskId, { row, etag: t.etag, ...(definition ? { definition } : {}) });
  }

  /**
   * A trigger ref of the task that changed after its write (a re-armed deadline trigger): the row
   * kept here carries it into this instance's next write of the task. Another instance's write
   * keeps the old ref, whose drop then fails harmlessly (the trigger fires and finds nothing to do).
   */
  amendRecent(taskId: string, amend: (t: TaskRecord) => void): void {
    const kept = this.recent.get(taskId);
    if (kept) (kept.amends ??= []).push(amend);
  }

  /**
   * Inserts a new task row with `rows` of its partition; returns false if the taskId is taken (or,
   * with `actions`, other actions of its partition in the same transaction, one of them failed).
   */
  async insert(t: TaskRecord, rows: Entity[] = [], actions: TableAction[] = []): Promise<boolean> {
    const row = withWriteId(encodeTask(t));
    try {
      t.etag = await this.write(t.taskId, row, rows, undefined, actions);
      this.keep(t, row);
    } catch (err) {
      if (!(err instanceof StorageConflict)) throw err;
      const own = await this.ownWrite(t.taskId, row);
      if (!own) return false;
      t.etag = own;
    }
    return true;
  }

  /**
   * Replaces `current` by `next` if the row still has `current`'s ETag, with `rows` of its
   * partition in the same transaction (and `actions`, which may fail it too). Sets `next.etag`;
   * 'etag' when another write came first, 'missing' when the task (or a row `actions` need) is gone.
   */
  async replace(current: TaskRecord, next: TaskRecord, rows: Entity[] = [], actions: TableAction[] = []): Promise<'written' | 'etag' | 'missing'> {
    const update = withWriteId(encodeTaskUpdate(next));
    // The whole row is kept here: the definition's chunks of the row kept before (they never change), else encoded.
    const kept = this.recent.get(current.taskId);
    const row = { ...(kept ? definitionProps(kept.row) : encodeTask(next)), ...update };
    try {
      // Only what changed goes out (the definition never does).
      next.etag = await this.write(current.taskId, update, rows, current.etag!, actions);
      this.keep(next, row, kept?.definition);
    } catch (err) {
      this.recent.delete(current.taskId);
      if (!(err instanceof StorageConflict && (err.reason === 'etag' || err.reason === 'missing'))) throw err;
      const own = err.reason === 'etag' ? await this.ownWrite(current.taskId, row) : undefined;
      if (!own) return err.reason;
      next.etag = own;
    }
    return 'written';
  }

  /**
   * After a conflict: the row's ETag if the stored row is this very write (its retry, as the SDK
   * sends it after a timeout, met the write's own success as 409 or 412), else undefined (another
   * writer came first). The write id tells the two apart; the row's content could not.
   */
  private async ownWrite(taskId: string, row: Entity): Promise<string | undefined> {
    const stored = await this.table.get(taskId, taskRowKey(taskId));
    if (!stored || stored.writeId !== row.writeId) return undefined;
    this.keep(decodeTask(stored), stored);
    return stored.etag;
  }

  /**
   * Writes the task row (insert, or merge If-Match `etag`: an update carries the changed
   * properties only, encodeTaskUpdate) with `extra` rows and `actions` in one transaction.
   */
  private async write(taskId: string, row: Entity, extra: Entity[], etag?: string, actions: TableAction[] = []): Promise<string> {
    if (!extra.length && !actions.length) return etag ? this.table.merge(row, etag) : this.table.insert(row);
    const etags = await this.table.transact([
      etag ? { op: 'update', entity: row, etag, mode: 'Merge' } : { op: 'create', entity: row },
      ...extra.map((e) => ({ op: 'upsert' as const, entity: e })),
      ...actions,
    ]);
    const newEtag = etags[0];
    if (newEtag) return newEtag;
    const reread = await this.table.get(taskId, taskRowKey(taskId));
    if (!reread) throw new StorageConflict('missing', `Tasks: ${taskId} gone after write`);
    return reread.etag;
  }

  /**
   * Deletes the task row and the rows of its partition that `rows` names (its history: their keys, or
   * the range to read them from). They go in entity-group transactions, the task row in the last
   * one: a crash in between leaves a task without history, never history without a task.
   * `alongWith`: other keys of the partition (a group of one's rows) that go all together in the
   * task row's transaction or not at all: true if they went.
   */
  async delete(taskId: string, rows: string[] | KeyRange = [], alongWith: string[] = []): Promise<boolean> {
    this.recent.delete(taskId);
    const listed = Array.isArray(rows) ? rows : (await allRows(this.table, { partitionKey: taskId, rowKey: rows, select: ['RowKey'] })).map((r) => r.rowKey);
    const keys = [...listed, taskRowKey(taskId)];
    if (!alongWith.length) {
      await deleteRows(this.table, taskId, keys);
      return false;
    }
    const last = keys.splice(Math.max(0, keys.length - (MAX_TRANSACTION_ACTIONS - alongWith.length)));
    await deleteRows(this.table, taskId, keys);
    try {
      await this.table.transact([...alongWith, ...last].map((rowKey) => ({ op: 'delete' as const, partitionKey: taskId, rowKey })));
      return true;
    } catch (err) {
      if (!(err instanceof StorageConflict)) throw err;
      await deleteRows(this.table, taskId, last);
      return false;
    }
  }
}
