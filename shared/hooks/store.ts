/**
 * Hook storage. Every query of the hooks tables lives in this file.
 *   Hooks:     PartitionKey = <hookGroupId>, RowKey = <hookId>; the definition, the trigger token
 *              (encrypted), the schedule state (next date, the claimed fire) and the last fire.
 *   HookFires: PartitionKey = <hookGroupId>~<hookId>, RowKey = <inverted fire time>~<taskId>,
 *              newest first; removed a year later through the expiry index.
 */
import {
  UNCHANGED,
  allRows,
  guardedUpdate,
  insertIfAbsent,
  keptEtag,
  readPage,
  replaceIfMatch,
  rows,
  type Query,
  type Storage,
  type CountedTable,
  type StoredEntity,
} from '../storage/storage';
import { decodeKey, encodeKey } from '../storage/keys';
import { createHash } from 'node:crypto';

export interface HookDefinition {
  hookGroupId: string;
  hookId: string;
  metadata: { name: string; description: string; owner: string; emailOnError: boolean };
  schedule: string[];
  task: Record<string, unknown>;
  triggerSchema: Record<string, unknown>;
  bindings: { exchange: string; routingKeyPattern: string }[];
  /** `skip`: a scheduled fire is skipped while the previous fire's task is unresolved. */
  overlap?: 'allow' | 'skip';
}

/** Names a definition as stored (a hook change's sweep trigger compares it with the stored one). */
export function definitionDigest(def: HookDefinition): string {
  return createHash('sha256').update(JSON.stringify(def)).digest('base64url');
}

/** A scheduled fire claimed by one instance: its taskId and time are fixed before the attempt. */
export interface PendingFire {
  taskId: string;
  /** The tick this fire is for (the hook's nextScheduledDate when claimed). */
  scheduled: string;
  /** `created` and JSON-e `now` of the task. */
  time: string;
  /** Another instance takes the fire over (with the same taskId) only after this. */
  leaseUntil: string;
  /** Which claim (or takeover) this is: a claim whose retry met its own success knows it by this. */
  claimId?: string;
}

export type LastFire =
  { result: 'success'; taskId: string; time: string } | { result: 'error'; error: Record<string, unknown>; time: string } | { result: 'no-fire' };

export interface HookRecord {
  definition: HookDefinition;
  /** Encrypted trigger token. */
  token: string;
  /** '' when the hook has no schedule. */
  nextScheduledDate: string;
  pendingFire?: PendingFire;
  lastFire: LastFire;
  /** The task of the last successful fire, for the overlap rule. */
  lastTaskId?: string;
  etag?: string;
}

export interface FireRecord {
  hookGroupId: string;
  hookId: string;
  firedBy: 'schedule' | 'triggerHook' | 'triggerHookWithToken' | 'pulseMessage';
  taskId: string;
  taskCreateTime: string;
  result: 'success' | 'error';
  error: string;
}

/** Newest first: RowKeys sort ascending, so the time is inverted. */
const MAX_MS = 1e14;
export const fireKeys = (f: Pick<FireRecord, 'hookGroupId' | 'hookId' | 'taskCreateTime' | 'taskId'>) => ({
  partitionKey: `${encodeKey(f.hookGroupId)}~${encodeKey(f.hookId)}`,
  rowKey: `${String(MAX_MS - new Date(f.taskCreateTime).getTime()).padStart(15, '0')}~${f.taskId}`,
});

function recordFrom(e: StoredEntity): HookRecord {
  return {
    definition: JSON.parse(e.definition as string),
    token: e.token as string,
    nextScheduledDate: (e.nextScheduledDate as string) ?? '',
    pendingFire: e.pendingFire ? JSON.parse(e.pendingFire as string) : undefined,
    lastFire: e.lastFire ? JSON.parse(e.lastFire as string) : { result: 'no-fire' },
    lastTaskId: (e.lastTaskId as string) || undefined,
    etag: e.etag,
  };
}

function entityOf(h: HookRecord) {
  return {
    partitionKey: encodeKey(h.definition.hookGroupId),
    rowKey: encodeKey(h.definition.hookId),
    definition: JSON.stringify(h.definition),
    token: h.token,
    nextScheduledDate: h.nextScheduledDate,
    pendingFire: h.pendingFire ? JSON.stringify(h.pendingFire) : '',
    lastFire: JSON.stringify(h.lastFire),
    lastTaskId: h.lastTaskId ?? '',
  };
}

export class HookStore {
  constructor(private readonly storage: Storage) {}

  private get hooks(): CountedTable {
    return this.storage.table('Hooks');
  }
  private get fires(): CountedTable {
    return this.storage.table('HookFires');
  }

  async get(hookGroupId: string, hookId: string): Promise<HookRecord | undefined> {
    const e = await this.hooks.get(encodeKey(hookGroupId), encodeKey(hookId));
    return e ? recordFrom(e) : undefined;
  }

  /** False when the hook exists already. */
  async insert(h: HookRecord): Promise<boolean> {
    return keptEtag(await insertIfAbsent(this.hooks, entityOf(h)), h);
  }

  /** ETag-guarded replace; false when the hook changed or went away. */
  async replace(h: HookRecord): Promise<boolean> {
    return keptEtag(await replaceIfMatch(this.hooks, entityOf(h), h.etag!), h);
  }

  /**
   * Writes the record `change` answers for the stored hook (undefined: write nothing) under its
   * ETag, deciding again on the new record after a lost race (guardedUpdate). `known`, a record
   * read before, saves the first read. Returns the hook as stored afterwards.
   */
  async modify(
    hookGroupId: string,
    hookId: string,
    change: (cur: HookRecord | undefined) => HookRecord | undefined,
    known?: HookRecord,
  ): Promise<HookRecord | undefined> {
    const current = known?.etag ? { ...entityOf(known), etag: known.etag } : undefined;
    const out = await guardedUpdate(
      this.hooks,
      { partitionKey: encodeKey(hookGroupId), rowKey: encodeKey(hookId) },
      (e) => {
        const next = change(e && recordFrom(e));
        return next ? entityOf(next) : UNCHANGED;
      },
      { what: `hook ${hookGroupId}/${hookId}`, current },
    );
    return out.row && recordFrom(out.row);
  }

  async remove(hookGroupId: string, hookId: string): Promise<boolean> {
    return this.hooks.delete(encodeKey(hookGroupId), encodeKey(hookId));
  }

  /** Every hook of a group (one partition). */
  async list(hookGroupId: string): Promise<HookRecord[]> {
    return this.all({ partitionKey: encodeKey(hookGroupId) });
  }

  /** The distinct hook groups. Reads only the keys of every hook: deployments hold hundreds, not millions. */
  async groups(): Promise<string[]> {
    const out = new Set<string>();
    for await (const e of rows(this.hooks, { partitionKey: { ge: '' }, select: ['PartitionKey'] })) out.add(decodeKey(e.partitionKey));
    return [...out].sort();
  }

  /**
   * Up to `limit` hooks whose next scheduled fire is due (a filtered query over the hooks, as
   * Taskcluster's scheduler does): a filter over the whole table often ends a page empty and continues.
   */
  async due(now: Date, limit: number): Promise<HookRecord[]> {
    const due = await allRows(
      this.hooks,
      {
        where: [
          { prop: 'nextScheduledDate', op: 'gt', value: '' },
          { prop: 'nextScheduledDate', op: 'le', value: now.toJSON() },
        ],
      },
      { max: limit },
    );
    return due.map(recordFrom);
  }

  private async all(query: Query): Promise<HookRecord[]> {
    return (await allRows(this.hooks, query)).map(recordFrom);
  }

  /** Idempotent: the same fire always lands on the same row. */
  async recordFire(f: FireRecord): Promise<{ partitionKey: string; rowKey: string }> {
    const keys = fireKeys(f);
    await this.fires.upsert({ ...keys, ...f });
    return keys;
  }

  async listFires(hookGroupId: string, hookId: string, limit: number, continuation?: string): Promise<{ items: FireRecord[]; continuation?: string }> {
    const pk = fireKeys({ hookGroupId, hookId, taskCreateTime: new Date(0).toJSON(), taskId: '' }).partitionKey;
    const page = await readPage(this.fires, { partitionKey: pk }, limit, continuation);
    return {
      items: page.items.map((e) => ({
        hookGroupId: e.hookGroupId as string,
        hookId: e.hookId as string,
        firedBy: e.firedBy as FireRecord['firedBy'],
        taskId: e.taskId as string,
        taskCreateTime: e.taskCreateTime as string,
        result: e.result as FireRecord['result'],
        error: (e.error as string) ?? '',
      })),
      continuation: page.continuation,
    };
  }

  async removeFire(partitionKey: string, rowKey: string): Promise<void> {
    await this.fires.delete(partitionKey, rowKey);
  }
}
