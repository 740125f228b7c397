/**
 * The one read → decide → conditional write → retry loop for a row outside the task lifecycle
 * (workers, task queues, groups, objects, artifacts, clients, roles, accounts).
 *
 * - `decide(current)` sees the row as stored (undefined when missing) and answers the properties
 *   to write, `UNCHANGED`, `REMOVE`, or throws (a domain error goes to the caller as it is). It
 *   may run more than once, so any side effect it has must be safe to repeat.
 * - The write is conditional: insert-if-absent when the row was missing, else replace or merge
 *   If-Match the ETag read. A refusal (409/412/404: another writer came first) reads again and
 *   decides again, up to `GUARDED_ATTEMPTS` times.
 * - Every write stamps a fresh `writeId` on the row. A write can succeed on the server while its
 *   answer is lost; the SDK's retry then meets that success as 409/412. The next read finds the
 *   row carrying the id of the write just refused: that is this call's own success, not a lost race.
 *   A delete (`REMOVE`, If-Match the ETag read) whose answer was lost leaves no row to carry an id:
 *   the next read finds the row gone and `decide` sees it so (missing, as wanted).
 * - When the attempts run out: `WriteCongestion`, which the HTTP layer answers 500 like any
 *   unexpected error, as Taskcluster's entity `modify` does (EntityWriteCongestionError after 10
 *   attempts), so clients retry it; a 409 would tell them their request conflicts and never will work.
 */
import crypto from 'node:crypto';
import { Entity, Table, TableAction, deleteIfMatch, transactIf, unlessConflict } from './port';

/** Attempts before giving up: azure-entities' `modify` makes 10, and races on one row settle well within that. */
export const GUARDED_ATTEMPTS = 10;

/** `decide`'s answer when the row is already as wanted: nothing is written. */
export const UNCHANGED: unique symbol = Symbol('unchanged');

/** `decide`'s answer when the row should go: deleted If-Match the ETag read (a missing row stays missing). */
export const REMOVE: unique symbol = Symbol('remove');

/** The property that names the write that stored a row (see the module comment). */
export const WRITE_ID = 'writeId';

/** Properties to write, with actions that must commit in the same transaction (same partition). */
export class WithActions {
  constructor(
    readonly props: Record<string, unknown>,
    readonly actions: TableAction[],
  ) {}
}

/** A write of `props` that commits together with `actions` (one entity-group transaction), or not at all. */
export const withActions = (props: Record<string, unknown>, actions: TableAction[]): WithActions => new WithActions(props, actions);

export type Decision = Record<string, unknown> | WithActions | typeof UNCHANGED | typeof REMOVE;

/** A guarded update gave up: the row kept changing under it. The HTTP layer answers 500, which clients retry. */
export class WriteCongestion extends Error {
  constructor(what: string, attempts: number) {
    super(`${what} is changing too fast (${attempts} attempts lost a race); retry`);
    this.name = 'WriteCongestion';
  }
}

export interface GuardedOptions<T extends Entity> {
  /** Names the row in the error when attempts run out (e.g. `worker g/w`). */
  what: string;
  /** 'replace' (default): `decide` answers the whole row; 'merge': only the properties to change. */
  mode?: 'replace' | 'merge';
  /**
   * The row as the caller already knows it, saving the first read: a row it read (with its ETag),
   * or 'absent' to try an insert first. A refusal reads as usual.
   */
  current?: (T & { etag: string }) | 'absent';
  /** Attempts before WriteCongestion (tests); GUARDED_ATTEMPTS by default. */
  attempts?: number;
}

export interface Guarded<T extends Entity> {
  /** The row as stored afterwards (undefined: missing and `decide` left it so). */
  row: (T & { etag: string }) | undefined;
  /** Whether this call's write stored (or removed) it (false: `decide` answered UNCHANGED, or REMOVE of a missing row). */
  written: boolean;
}

/** System and key properties a read returns that are not the row's own. */
function own(props: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(props)) {
    if (k === 'partitionKey' || k === 'rowKey' || k === 'etag' || k === 'timestamp' || k.startsWith('odata.')) continue;
    out[k] = v;
  }
  return out;
}

/** Reads, decides and writes one row under its ETag, retrying lost races (see the module comment). */
export async function guardedUpdate<T extends Entity = Entity>(
  table: Table,
  key: { partitionKey: string; rowKey: string },
  decide: (current: (T & { etag: string }) | undefined) => Decision | Promise<Decision>,
  opts: GuardedOptions<T>,
): Promise<Guarded<T>> {
  const attempts = opts.attempts ?? GUARDED_ATTEMPTS;
  let known: (T & { etag: string }) | undefined | 'unread' = opts.current === 'absent' ? undefined : (opts.current ?? 'unread');
  let tried: string | undefined;
  for (let attempt = 0; attempt < attempts; attempt++) {
    const current = known === 'unread' ? await table.get<T>(key.partitionKey, key.rowKey) : known;
    known = 'unread';
    // The write just refused is stored: its answer was lost and the SDK's retry met it.
    if (tried !== undefined && current?.[WRITE_ID] === tried) return { row: current, written: true };
    const decision = await decide(current);
    if (decision === UNCHANGED || (decision === REMOVE && current === undefined)) return { row: current, written: false };
    if (decision === REMOVE) {
      if ((await deleteIfMatch(table, key.partitionKey, key.rowKey, current!.etag)).ok) return { row: undefined, written: true };
      continue;
    }
    const { props, actions } = decision instanceof WithActions ? decision : { props: decision, actions: [] };
    tried = crypto.randomUUID();
    const entity: Entity = { ...own(props), [WRITE_ID]: tried, ...key };
    const merge = opts.mode === 'merge' && current !== undefined;
    const write: TableAction =
      current === undefined ? { op: 'create', entity } : { op: 'update', entity, etag: current.etag, mode: merge ? 'Merge' : 'Replace' };
    const done = actions.length ? await transactIf(table, [write, ...actions]) : await unlessConflict(single(table, write));
    if (!done.ok) continue;
    const etag = (Array.isArray(done.value) ? done.value[0] : done.value) as string;
    const stored = merge ? { ...current, ...entity } : entity;
    return { row: { ...stored, etag } as T & { etag: string }, written: true };
  }
  throw new WriteCongestion(opts.what, attempts);
}

/** One write of a row as a single call (a transaction of one costs the same but reads worse in the counts). */
function single(table: Table, write: TableAction): Promise<string> {
  if (write.op === 'create') return table.insert(write.entity);
  if (write.op !== 'update') throw new Error(`not a guarded write: ${write.op}`);
  return write.mode === 'Merge' ? table.merge(write.entity, write.etag) : table.update(write.entity, write.etag);
}
