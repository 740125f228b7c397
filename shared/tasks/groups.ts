/**
 * Task groups: one meta row (schedulerId, expires, sealed) and one member row per task, in the
 * group's partition so the first task of a group writes both in one transaction. An *open* row per
 * unresolved task (written with its member row, removed when the task resolves, written again by a
 * rerun) tells whether the group has unresolved tasks with one short key-range read, however large
 * the group (task-group-resolved); rows are deleted and inserted, never counted, so concurrent
 * resolutions in one group do not contend.
 *
 * Where: table Tasks, partition = the group's id, row keys prefixed GROUP_PREFIX (task rows are
 * `task~…`, history rows `h-…`). The common group has one task (its taskGroupId is its taskId), so
 * its rows share that task's partition and go in the task row's own transactions: the group's
 * creation (createActions, in createTask's insert) and its removal (aloneKeys, with the task at
 * expiry).
 *
 * "Nobody joined" is proven without a read. A group created by its namesake task holds an `alone`
 * row, and the creator's task row says `groupAlone`, until the first other member joins: its join
 * transaction deletes the alone row and sets the creator's row `groupAlone: false` under the ETag
 * it read (creatorActions). So the creator's resolution, a write under its row's ETag, is itself
 * the proof: written with `groupAlone`, nobody joined, and the group is resolved with it (no group
 * row to change: the creator's open row stays while it is alone; the joiner deletes it then if the
 * creator had resolved). A join in between moves the ETag, and the resolution reads the row again.
 * Any other group's emptiness is read (hasOpen).
 */
import {
  StoredEntity,
  Storage,
  Table,
  TableAction,
  UNCHANGED,
  deleteIfMatch,
  deleteRows,
  firstRow,
  guardedUpdate,
  readPage,
  rows,
  transactIf,
  withActions,
} from '../storage/storage';
import { conflict } from '../errors';
import { isResolved, taskRowKey, type TaskState } from './model';

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
 * Prefix of a group's row keys in the Tasks table (task rows are `task~…`, history `h-…`). Member
 * keys are taskIds, which may begin with `h-` themselves, so every group key carries it.
 */
export const GROUP_PREFIX = 'g~';
/** Every group key sorts below this: after the prefix come a slugid character or '~' and a letter, both before '~~'. */
const GROUP_END = `${GROUP_PREFIX}~~`;

/**
 * Expiry-index kind of a group's rows (shared/lifecycle/remove-expired.ts): each task records one at its own
 * expires beside its task row, in the same write; the one at the group's expires (the latest of its
 * members') removes the group's partition.
 */
export const EXPIRY_KIND_GROUP = 'task-group';

/**
 * A group created by its namesake task (taskGroupId === taskId) holds this row, and the meta row
 * says so (`alone`), until another task joins: the first joiner deletes it in its own transaction.
 * So the creator's resolution and expiry can require it in their transactions and know, without a
 * read, that nobody ever joined: the transaction fails otherwise.
 */
export const aloneRowKey = (taskGroupId: string): string => `~alone~${taskGroupId}`;

/** The group's table and how its row keys are stored there (after the task's rows, see GROUP_PREFIX). */
interface Place {
  table: Table;
  key: (k: string) => string;
}

/** Rows per entity-group transaction. */
const MAX_BATCH = 100;

type StoredMeta = TaskGroupMeta & { etag: string; joined?: true; alone?: true };

function metaOf(taskGroupId: string, r: StoredEntity | undefined): StoredMeta | undefined {
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

export class TaskGroups {
  private readonly home: Place;

  constructor(storage: Storage) {
    this.home = { table: storage.table('Tasks'), key: (k) => GROUP_PREFIX + k };
  }

  private async metaAt(p: Place, taskGroupId: string): Promise<StoredMeta | undefined> {
    return metaOf(taskGroupId, await p.table.get(taskGroupId, p.key(groupRowKey(taskGroupId))));
  }

  /** `joined`: a task other than the group's creator joined it; `alone`: the group holds its aloneRowKey row (until someone joined). */
  async meta(taskGroupId: string): Promise<StoredMeta | undefined> {
    return this.metaAt(this.home, taskGroupId);
  }

  private memberActions(p: Place, taskGroupId: string, taskId: string, expires: string, created: string): TableAction[] {
    return [
      { op: 'upsert', entity: { partitionKey: taskGroupId, rowKey: p.key(taskId), expires } },
      { op: 'upsert', entity: { partitionKey: taskGroupId, rowKey: p.key(openRowKey(taskId)), expires } },
      { op: 'upsert', entity: { partitionKey: taskGroupId, rowKey: p.key(latestRowKey(taskId, created)), expires } },
    ];
  }

  /**
   * The rows that create the group with its first member (in the Tasks table, partition
   * `taskGroupId`); the meta row is a `create`, so the transaction fails if the group exists.
   * createTask of a task that starts its own group puts them in its task row's transaction.
   */
  createActions(taskGroupId: string, taskId: string, schedulerId: string, expires: string, created: string): TableAction[] {
    return [{ op: 'create', entity: this.newMeta(taskGroupId, taskId, schedulerId, expires) }, ...this.firstRows(taskGroupId, taskId, expires, created)];
  }

  /** The meta row of a group `taskId` creates. */
  private newMeta(taskGroupId: string, taskId: string, schedulerId: string, expires: string) {
    const own = taskGroupId === taskId;
    return { partitionKey: taskGroupId, rowKey: this.home.key(groupRowKey(taskGroupId)), schedulerId, expires, sealed: '', ...(own ? { alone: true } : {}) };
  }

  /** The rows that go with a new group's meta row: its first member's, and the alone row of a namesake creator. */
  private firstRows(taskGroupId: string, taskId: string, expires: string, created: string): TableAction[] {
    const alone = { partitionKey: taskGroupId, rowKey: this.home.key(aloneRowKey(taskGroupId)), expires };
    return [
      ...this.memberActions(this.home, taskGroupId, taskId, expires, created),
      ...(taskGroupId === taskId ? [{ op: 'upsert' as const, entity: alone }] : []),
    ];
  }

  /**
   * Adds a task to its group, creating the group; 409 on a schedulerId mismatch or a sealed group.
   * `exists`: the group is known
   * to exist (a createTask whose own creation of it conflicted), so no creation is tried first.
   */
  async addMember(taskGroupId: string, taskId: string, schedulerId: string, expires: string, created: string, exists = false): Promise<void> {
    const p = this.home;
    const members = this.memberActions(p, taskGroupId, taskId, expires, created);
    // The first joiner of a group that is `alone` deletes its alone row (and marks it `joined`) and
    // tells the creator's row; a concurrent first joiner's transaction then fails on the missing row,
    // and a join that meets a creator's write in between on its ETag: both decide again.
    const leaveAlone = async (m: { alone?: true; joined?: true }): Promise<TableAction[]> =>
      m.alone && !m.joined
        ? [{ op: 'delete', partitionKey: taskGroupId, rowKey: p.key(aloneRowKey(taskGroupId)) }, ...(await this.creatorActions(taskGroupId))]
        : [];
    await guardedUpdate(
      p.table,
      { partitionKey: taskGroupId, rowKey: p.key(groupRowKey(taskGroupId)) },
      async (row) => {
        const known = metaOf(taskGroupId, row);
        if (!known) return withActions(this.newMeta(taskGroupId, taskId, schedulerId, expires), this.firstRows(taskGroupId, taskId, expires, created));
        if (known.schedulerId !== schedulerId) {
          throw conflict(`task group ${taskGroupId} belongs to schedulerId '${known.schedulerId}', not '${schedulerId}'`);
        }
        if (known.sealed) throw conflict(`task group ${taskGroupId} is sealed; no more tasks can be added`);
        // A later expiry raises the meta row's. Else the first members after the creator mark the
        // meta row `joined` (and take the alone row away); later ones find it so and leave the row
        // alone, so a large group's members do not all write one row (upserts: nothing to guard).
        if (new Date(expires) > new Date(known.expires)) return withActions({ expires, joined: true }, [...(await leaveAlone(known)), ...members]);
        if (!known.joined) return withActions({ joined: true }, [...(await leaveAlone(known)), ...members]);
        await p.table.transact(members);
        return UNCHANGED;
      },
      // A task that starts its own group (the common case) needs no read.
      { what: `task group ${taskGroupId}`, mode: 'merge', current: taskGroupId === taskId && !exists ? 'absent' : undefined },
    );
  }

  /**
   * Removes a task from its group; `open`: also its open row (a task that never resolved); `created`:
   * also its latest row. One transaction when all are there, else row by row (deletes ignore missing rows).
   */
  async removeMember(taskGroupId: string, taskId: string, open = false, created?: string): Promise<void> {
    const keys = [taskId, ...(open ? [openRowKey(taskId)] : []), ...(created ? [latestRowKey(taskId, created)] : [])];
    await this.removeRows(taskGroupId, keys);
  }

  /**
   * Row keys (as stored) of a group nobody joined, for its creator's expiry to delete in the task's
   * own transaction (shared/tasks/store.ts `delete`): meta, alone, member, latest and open rows
   * (kept while it is alone, resolved or not). The transaction fails if anyone joined (the alone
   * row is gone) or a row is gone already; the partition read (expire) then finds what is left.
   */
  aloneKeys(taskGroupId: string, created: string): string[] {
    const keys = [groupRowKey(taskGroupId), aloneRowKey(taskGroupId), taskGroupId, latestRowKey(taskGroupId, created), openRowKey(taskGroupId)];
    return keys.map(this.home.key);
  }

  /** The task is unresolved again (rerun): written before the task row says so. */
  async reopen(taskGroupId: string, taskId: string, expires: string): Promise<void> {
    const p = this.home;
    await p.table.upsert({ partitionKey: taskGroupId, rowKey: p.key(openRowKey(taskId)), expires });
  }

  /**
   * What the first joiner of a group its namesake created does to the creator's rows, in its join
   * transaction: its task row learns it is no longer alone (`groupAlone: false`, under the ETag read
   * here: a resolution in between fails the join, which reads again), and the open row it kept
   * while alone goes if it has resolved (it now counts as any member: hasOpen). None if its row is
   * gone (expired with the group, which the join then creates anew).
   */
  private async creatorActions(taskGroupId: string): Promise<TableAction[]> {
    const { table, key } = this.home;
    const [row, open] = await Promise.all([
      firstRow(table, { partitionKey: taskGroupId, rowKey: taskRowKey(taskGroupId), select: ['state'] }),
      // Read too, as a delete of a row already gone would fail the join every time.
      firstRow(table, { partitionKey: taskGroupId, rowKey: key(openRowKey(taskGroupId)), select: ['RowKey'] }),
    ]);
    if (!row) return [];
    return [
      { op: 'update', entity: { partitionKey: taskGroupId, rowKey: taskRowKey(taskGroupId), groupAlone: false }, mode: 'Merge', etag: row.etag },
      ...(open && isResolved(row.state as TaskState) ? [{ op: 'delete' as const, partitionKey: taskGroupId, rowKey: open.rowKey }] : []),
    ];
  }

  /** The task resolved: written after the task row says so (repeating it is harmless). */
  async close(taskGroupId: string, taskId: string): Promise<void> {
    await this.home.table.delete(taskGroupId, this.home.key(openRowKey(taskId)));
  }

  /** Whether any task of the group is unresolved: the first open row, if any (one short range read). */
  async hasOpen(taskGroupId: string): Promise<boolean> {
    const p = this.home;
    const range = { ge: p.key(OPEN_PREFIX), lt: p.key(OPEN_PREFIX + '~') };
    return !!(await firstRow(p.table, { partitionKey: taskGroupId, rowKey: range, select: ['RowKey'] }));
  }

  /** Seals the group (irreversible; repeating it changes nothing). Undefined if there is no group. */
  async seal(taskGroupId: string, now: Date): Promise<TaskGroupMeta | undefined> {
    const out = await guardedUpdate(
      this.home.table,
      { partitionKey: taskGroupId, rowKey: this.home.key(groupRowKey(taskGroupId)) },
      (row) => (!row || row.sealed ? UNCHANGED : { sealed: now.toJSON() }),
      { what: `task group ${taskGroupId}`, mode: 'merge' },
    );
    return metaOf(taskGroupId, out.row);
  }

  /** One page of the group's members that have not expired by `now`. */
  async memberPage(taskGroupId: string, limit: number, now: Date, continuation?: string): Promise<{ taskIds: string[]; continuation?: string }> {
    const p = this.home;
    const where = [{ prop: 'expires', op: 'ge', value: now.toJSON() } as const];
    const rowKey = { ge: p.key(''), lt: p.key(MEMBERS_END) };
    const page = await readPage(p.table, { partitionKey: taskGroupId, rowKey, where, select: ['RowKey'] }, limit, continuation);
    return { taskIds: page.items.map((r) => r.rowKey.slice(p.key('').length)), continuation: page.continuation };
  }

  /** One page of the group's latest rows (listTaskGroupLatest), newest created first: their keys without the place's prefix. */
  async latestPage(taskGroupId: string, limit: number, continuation?: string): Promise<{ keys: string[]; continuation?: string }> {
    const p = this.home;
    const rowKey = { ge: p.key(LATEST_PREFIX), lt: p.key(LATEST_PREFIX + '~') };
    const page = await readPage(p.table, { partitionKey: taskGroupId, rowKey, select: ['RowKey'] }, limit, continuation);
    return { keys: page.items.map((r) => r.rowKey.slice(p.key('').length)), continuation: page.continuation };
  }

  /**
   * Deletes rows of the group (keys without the place's prefix), 100 per transaction; with
   * `metaEtag`, the meta row too, in the last one, only if unchanged. If a row was gone already (a
   * repeat after a crash) or a task joined: row by row, the meta
   * row still only if unchanged.
   */
  async removeRows(taskGroupId: string, keys: string[], metaEtag?: string): Promise<void> {
    const p = this.home;
    const stored = keys.map(p.key);
    if (!metaEtag) return deleteRows(p.table, taskGroupId, stored);
    const metaKey = p.key(groupRowKey(taskGroupId));
    const last = stored.splice(Math.max(0, stored.length - (MAX_BATCH - 1))); // with the meta row, one transaction's worth
    await deleteRows(p.table, taskGroupId, stored);
    const together = await transactIf(p.table, [
      ...last.map((rowKey) => ({ op: 'delete' as const, partitionKey: taskGroupId, rowKey })),
      { op: 'delete', partitionKey: taskGroupId, rowKey: metaKey, etag: metaEtag },
    ]);
    if (together.ok) return;
    await deleteRows(p.table, taskGroupId, last);
    await deleteIfMatch(p.table, taskGroupId, metaKey, metaEtag);
  }

  /**
   * A group's expiry row came due: once the meta row's expires has passed (it is the latest of
   * every member's), every row of the group goes, the meta row in the last transaction, guarded by
   * its ETag (a task joining meanwhile extends it; its own group row comes later). An earlier row,
   * or a repeat, finds it not due or gone. Only the group's key range: in the Tasks table its
   * partition may hold a task's rows too.
   */
  async expire(taskGroupId: string, now: Date): Promise<void> {
    const p = this.home;
    const metaKey = p.key(groupRowKey(taskGroupId));
    const keys: string[] = [];
    let meta: { expires: string; etag: string } | undefined;
    for await (const r of rows(p.table, { partitionKey: taskGroupId, rowKey: { ge: GROUP_PREFIX, lt: GROUP_END } })) {
      if (r.rowKey === metaKey) meta = { expires: r.expires as string, etag: r.etag };
      else keys.push(r.rowKey.slice(p.key('').length));
    }
    if (meta && new Date(meta.expires) > now) return;
    await this.removeRows(taskGroupId, keys, meta?.etag);
  }
}
