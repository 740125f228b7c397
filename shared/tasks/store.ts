/**
 * Loading and changing task rows. Every change is a read-modify-write guarded by the row's ETag;
 * the modifier re-checks its preconditions on each attempt, so concurrent actors never both win.
 */
import { Storage, StorageConflict } from '../storage/storage';
import { TASK_RK, TaskRecord, decodeTask, encodeTask } from './model';

/** ETag races on one task are short-lived; a handful of retries settles them. */
const MAX_MODIFY_ATTEMPTS = 10;

export class TaskStore {
  constructor(private readonly storage: Storage) {}

  private get table() {
    return this.storage.table('Tasks');
  }

  async load(taskId: string): Promise<TaskRecord | undefined> {
    const row = await this.table.get(taskId, TASK_RK);
    return row ? decodeTask(row) : undefined;
  }

  /** Inserts a new task row; returns false if the taskId is taken. */
  async insert(t: TaskRecord): Promise<boolean> {
    try {
      t.etag = await this.table.insert(encodeTask(t));
      return true;
    } catch (err) {
      if (err instanceof StorageConflict) return false;
      throw err;
    }
  }

  /**
   * Applies `fn` to the current row and writes it back if `fn` returns true. `fn` may be called
   * several times (after ETag races) and must derive everything from the record it is given.
   * Returns the final record (changed or not), or undefined if the task does not exist.
   */
  async modify(taskId: string, fn: (t: TaskRecord) => boolean, first?: TaskRecord): Promise<{ task: TaskRecord; changed: boolean } | undefined> {
    let current = first;
    for (let attempt = 0; attempt < MAX_MODIFY_ATTEMPTS; attempt++) {
      if (!current || attempt > 0) current = await this.load(taskId);
      if (!current) return undefined;
      const copy: TaskRecord = JSON.parse(JSON.stringify(current));
      copy.etag = current.etag;
      if (!fn(copy)) return { task: current, changed: false };
      try {
        copy.etag = await this.table.update(encodeTask(copy), current.etag!);
        return { task: copy, changed: true };
      } catch (err) {
        if (err instanceof StorageConflict && err.reason === 'etag') continue;
        if (err instanceof StorageConflict && err.reason === 'missing') return undefined;
        throw err;
      }
    }
    throw new Error(`task ${taskId}: too many concurrent modifications`);
  }

  async delete(taskId: string): Promise<void> {
    await this.table.delete(taskId, TASK_RK);
  }
}
