/**
 * Task groups: one meta row (schedulerId, expires, sealed) and one member row per task, in the
 * group's partition so the first task of a group writes both in one transaction. An *open* row per
 * unresolved task (written with its member row, removed when the task resolves, written again by a
 * rerun) tells whether the group has unresolved tasks with one short key-range read, however large
 * the group (task-group-resolved); rows are deleted and inserted, never counted, so concurrent
 * resolutions in one group do not contend.
 *
 * The common group has one task (its taskGroupId is its taskId): the task that created the meta row
 * keeps the meta row's ETag, every later member changes it (it merges the meta row in its own
 * transaction), so the creator's resolution can delete its open row on the condition that the ETag
 * is unchanged and know, without a read, that the group is now without unresolved tasks.
 */
import { Storage, StorageConflict, TableAction, deleteRows } from '../storage/storage';
import { conflict } from '../errors';

/** The meta row's key, unique per group (a shared RowKey makes Azurite's point writes O(groups), see taskRowKey). */
export const groupRowKey = (taskGroupId: string): string => `~group~${taskGroupId}`;

export interface TaskGroupMeta {
  taskGroupId: string;
  schedulerId: string;
  expires: string;
  sealed?: string;
}

/** Member row keys are taskIds (slugids), which all sort before the meta row's '~group~…'. */
const MEMBERS_END = '~';
/** Open rows: `~open~<taskId>`, after every member row ('~' sorts after slugid characters). */
const OPEN_PREFIX = '~open~';
export const openRowKey = (taskId: string): string => `${OPEN_PREFIX}${taskId}`;
/**
 * The group's tasks newest created first (operator query listTaskGroupLatest): `~new~<inverted
 * created>~<taskId>`, written in the member's transaction, so this read model costs no call.
 */
export const LATEST_PREFIX = '~new~';
/** Largest epoch milliseconds inverted (year 2286): fixed-width, newest-first keys (as shared/ops/keys.ts). */
const MAX_MS = 9_999_999_999_999;
export const latestRowKey = (taskId: string, created: string): string => `${LATEST_PREFIX}${String(MAX_MS - Date.parse(created)).padStart(13, '0')}~${taskId}`;

/**
 * Expiry-index kind of a group's rows (shared/tasks/expire.ts): each task records one at its own
 * expires beside its task row, in the same write; the one at the group's expires (the latest of its
 * members') removes the group's partition.
 */
export const EXPIRY_KIND_GROUP = 'task-group';

/**
 * A group created by its namesake task (taskGroupId === taskId) holds this row, and the meta row
 * says so (`alone`), until another task joins: the first joiner deletes it in its own transaction.
 * So the creator's expiry can delete the group's rows, this one included, in one transaction
 * without reading the partition: the transaction fails if anyone ever joined (shared/tasks/expire.ts).
 */
export const aloneRowKey = (taskGroupId: string): string => `~alone~${taskGroupId}`;

/** A group can gain members concurrently; re-read a few times on races. */
const MAX_GROUP_ATTEMPTS = 5;

export class TaskGroups {
  constructor(private readonly storage: Storage) {}

  private get table() {
    return this.storage.table('TaskGroups');
  }

  /** `joined`: a task other than the group's creator joined it; `alone`: the group holds its aloneRowKey row (until someone joined). */
  async meta(taskGroupId: string): Promise<(TaskGroupMeta & { etag: string; joined?: true; alone?: true }) | undefined> {
    const r = await this.table.get(taskGroupId, groupRowKey(taskGroupId));
    if (!r) return undefined;
    return {
      taskGroupId,
      schedulerId: r.schedulerId as string,
      expires: r.expires as string,
      sealed: (r.sealed as string) || undefined,
      etag: r.etag,
      ...(r.joined ? { joined: true } : {}),
      ...(r.alone ? { alone: true } : {}),
    };
  }

  /**
   * Adds a task to its group, creating the group; 409 on a schedulerId mismatch or a sealed group.
   * The meta row's ETag if this call created the group (see `close`).
   */
  async addMember(taskGroupId: string, taskId: string, schedulerId: string, expires: string, created: string): Promise<string | undefined> {
    const member = { partitionKey: taskGroupId, rowKey: taskId, expires };
    const open = { op: 'upsert' as const, entity: { partitionKey: taskGroupId, rowKey: openRowKey(taskId), expires } };
    const latest = { op: 'upsert' as const, entity: { partitionKey: taskGroupId, rowKey: latestRowKey(taskId, created), expires } };
    const ownGroup = taskGroupId === taskId;
    const metaRow = { partitionKey: taskGroupId, rowKey: groupRowKey(taskGroupId), schedulerId, expires, sealed: '', ...(ownGroup ? { alone: true } : {}) };
    const alone: TableAction[] = ownGroup ? [{ op: 'upsert', entity: { partitionKey: taskGroupId, rowKey: aloneRowKey(taskGroupId), expires } }] : [];
    // The first joiner of a group that is `alone` deletes its alone row (and marks it `joined`); a
    // concurrent first joiner's transaction then fails on the missing row and reads again.
    const leaveAlone = (m: { alone?: true; joined?: true }): TableAction[] =>
      m.alone && !m.joined ? [{ op: 'delete', partitionKey: taskGroupId, rowKey: aloneRowKey(taskGroupId) }] : [];
    // A task that starts its own group (the common case) needs no read.
    let known = ownGroup ? undefined : await this.meta(taskGroupId);
    for (let attempt = 0; attempt < MAX_GROUP_ATTEMPTS; attempt++) {
      if (!known) {
        try {
          const [etag] = await this.table.transact([{ op: 'create', entity: metaRow }, { op: 'upsert', entity: member }, open, latest, ...alone]);
          return etag;
        } catch (err) {
          if (!(err instanceof StorageConflict)) throw err;
          known = await this.meta(taskGroupId);
          if (!known) continue;
        }
      }
      if (known.schedulerId !== schedulerId) {
        throw conflict(`task group ${taskGroupId} belongs to schedulerId '${known.schedulerId}', not '${schedulerId}'`);
      }
      if (known.sealed) throw conflict(`task group ${taskGroupId} is sealed; no more tasks can be added`);
      if (new Date(expires) > new Date(known.expires)) {
        try {
          await this.table.transact([
            { op: 'update', entity: { partitionKey: taskGroupId, rowKey: groupRowKey(taskGroupId), expires, joined: true }, mode: 'Merge', etag: known!.etag },
            ...leaveAlone(known!),
            { op: 'upsert', entity: member },
            open,
            latest,
          ]);
          return undefined;
        } catch (err) {
          if (!(err instanceof StorageConflict)) throw err;
          known = await this.meta(taskGroupId);
          continue;
        }
      }
      try {
        // The first members after the creator change the meta row's ETag (telling the creator's
        // resolution that the group has another member); later ones find `joined` and leave it
        // alone, so a large group's members do not all write one row.
        const touch = { partitionKey: taskGroupId, rowKey: groupRowKey(taskGroupId), joined: true };
        const members: TableAction[] = [{ op: 'upsert', entity: member }, open, latest];
        await this.table.transact(known.joined ? members : [{ op: 'update', entity: touch, mode: 'Merge', etag: '*' }, ...leaveAlone(known), ...members]);
        return undefined;
      } catch (err) {
        if (!(err instanceof StorageConflict)) throw err;
        known = await this.meta(taskGroupId); // the group expired meanwhile: create it again
        continue;
      }
    }
    throw conflict(`task group ${taskGroupId} is changing too fast; retry`);
  }

  /**
   * Removes a task from its group; `open`: also its open row (a task that never resolved); `created`:
   * also its latest row. One transaction when all are there, else row by row (deletes ignore missing rows).
   */
  async removeMember(taskGroupId: string, taskId: string, open = false, created?: string): Promise<void> {
    const keys = [taskId, ...(open ? [openRowKey(taskId)] : []), ...(created ? [latestRowKey(taskId, created)] : [])];
    await deleteRows(this.table, taskGroupId, keys);
  }

  /**
   * The expiry of a group's creator (taskGroupId === taskId) whose group nobody joined: its meta,
   * alone, member and latest rows (and `open` row, if the task never resolved) in one transaction,
   * no read. False if that fails (someone joined, the group predates alone rows, a row is gone
   * already): then the partition read (expireGroup) finds what is left.
   */
  async removeAlone(taskGroupId: string, created: string, open: boolean): Promise<boolean> {
    const keys = [
      groupRowKey(taskGroupId),
      aloneRowKey(taskGroupId),
      taskGroupId,
      latestRowKey(taskGroupId, created),
      ...(open ? [openRowKey(taskGroupId)] : []),
    ];
    try {
      await this.table.transact(keys.map((rowKey) => ({ op: 'delete' as const, partitionKey: taskGroupId, rowKey })));
      return true;
    } catch (err) {
      if (!(err instanceof StorageConflict)) throw err;
      return false;
    }
  }

  /** The task is unresolved again (rerun): written before the task row says so. */
  async reopen(taskGroupId: string, taskId: string, expires: string): Promise<void> {
    await this.table.upsert({ partitionKey: taskGroupId, rowKey: openRowKey(taskId), expires });
  }

  /**
   * The task resolved: written after the task row says so (repeating it is harmless). With
   * `metaEtag` (the task created the group, `addMember`), one transaction also checks that no other
   * task joined since: true then, as the group is now without unresolved tasks (no read needed).
   */
  async close(taskGroupId: string, taskId: string, metaEtag?: string): Promise<boolean> {
    if (metaEtag) {
      try {
        // Merging the meta row changes its ETag: a repeat of this (a crash before the event) reads instead.
        const touch = { partitionKey: taskGroupId, rowKey: groupRowKey(taskGroupId) };
        await this.table.transact([
          { op: 'delete', partitionKey: taskGroupId, rowKey: openRowKey(taskId) },
          { op: 'update', entity: touch, mode: 'Merge', etag: metaEtag },
        ]);
        return true;
      } catch (err) {
        if (!(err instanceof StorageConflict)) throw err;
      }
    }
    await this.table.delete(taskGroupId, openRowKey(taskId));
    return false;
  }

  /** Whether any task of the group is unresolved: the first open row, if any (one short range read). */
  async hasOpen(taskGroupId: string): Promise<boolean> {
    let continuation: string | undefined;
    do {
      // Azure may answer an empty page with a continuation (a server-side time slice): read on.
      const page = await this.table.page(
        { partitionKey: taskGroupId, rowKey: { ge: OPEN_PREFIX, lt: OPEN_PREFIX + '~' }, select: ['RowKey'] },
        1,
        continuation,
      );
      if (page.items.length) return true;
      continuation = page.continuation;
    } while (continuation);
    return false;
  }

  /** Seals the group (irreversible; repeating it changes nothing). Undefined if there is no group. */
  async seal(taskGroupId: string, now: Date): Promise<TaskGroupMeta | undefined> {
    for (let attempt = 0; attempt < MAX_GROUP_ATTEMPTS; attempt++) {
      const meta = await this.meta(taskGroupId);
      if (!meta || meta.sealed) return meta;
      try {
        await this.table.merge({ partitionKey: taskGroupId, rowKey: groupRowKey(taskGroupId), sealed: now.toJSON() }, meta.etag);
        return { ...meta, sealed: now.toJSON() };
      } catch (err) {
        if (!(err instanceof StorageConflict)) throw err;
      }
    }
    throw conflict(`task group ${taskGroupId} is changing too fast; retry`);
  }

  /** One page of the group's members that have not expired by `now`. */
  async memberPage(taskGroupId: string, limit: number, now: Date, continuation?: string): Promise<{ taskIds: string[]; continuation?: string }> {
    const where = [{ prop: 'expires', op: 'ge', value: now.toJSON() } as const];
    const page = await this.table.page({ partitionKey: taskGroupId, rowKey: { lt: MEMBERS_END }, where, select: ['RowKey'] }, limit, continuation);
    return { taskIds: page.items.map((r) => r.rowKey), continuation: page.continuation };
  }
}
