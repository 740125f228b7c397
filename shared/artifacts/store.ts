/**
 * Artifact rows: point reads, ETag-guarded writes and per-run pages.
 */
import {
  Condition,
  CountedTable,
  Decision,
  Entity,
  MAX_TABLE_PAGE,
  Storage,
  UNCHANGED,
  guardedUpdate,
  mergeIfMatch,
  readPage,
  rowBatches,
} from '../storage/storage';
import { conflict } from '../errors';
import { ArtifactRecord, artifactRowKey, decodeArtifact, encodeArtifact, runKey } from './model';

export interface ArtifactPage {
  items: ArtifactRecord[];
  continuation?: string;
}

export class ArtifactStore {
  constructor(private readonly storage: Storage) {}

  get table(): CountedTable {
    return this.storage.table('Artifacts');
  }

  async get(taskId: string, runId: number, name: string): Promise<ArtifactRecord | undefined> {
    const row = await this.table.get(runKey(taskId, runId), artifactRowKey(name));
    // A hashed row key could in theory be shared; the stored name settles it.
    if (!row || row.name !== name) return undefined;
    return decodeArtifact(row);
  }

  /**
   * Reads, decides and writes the artifact's row under its ETag (guardedUpdate; `decide` may run
   * again after a lost race). `first`: the record as the caller read it (saves a read), or 'absent'
   * to try an insert before any read. The record as stored afterwards.
   */
  async modify(
    at: { taskId: string; runId: number; name: string },
    decide: (a: ArtifactRecord | undefined) => ArtifactRecord | typeof UNCHANGED,
    first?: ArtifactRecord | 'absent',
  ): Promise<ArtifactRecord | undefined> {
    const out = await guardedUpdate<Entity>(
      this.table,
      { partitionKey: runKey(at.taskId, at.runId), rowKey: artifactRowKey(at.name) },
      (row): Decision => {
        // Another name with the same hashed key: never overwritten (theoretical).
        if (row && row.name !== at.name) throw conflict(`Artifact ${at.name} cannot be stored: its key is taken`);
        const next = decide(row && decodeArtifact(row));
        return next === UNCHANGED ? UNCHANGED : encodeArtifact(next);
      },
      { what: `artifact ${at.name}`, current: first === 'absent' || first === undefined ? first : { ...encodeArtifact(first), etag: first.etag! } },
    );
    return out.row && decodeArtifact(out.row);
  }

  /** Marks an s3 artifact committed, unless the row changed meanwhile (a re-create re-opens it). */
  async markCommitted(a: ArtifactRecord): Promise<void> {
    const r = await mergeIfMatch(this.table, { partitionKey: runKey(a.taskId, a.runId), rowKey: artifactRowKey(a.name), uncommitted: false }, a.etag!);
    if (!r.ok) return;
    a.etag = r.etag;
    a.uncommitted = false;
  }

  /** One page of a run's artifacts, in row-key order; `where` narrows it further. */
  async page(taskId: string, runId: number, limit: number, continuation?: string, where: Condition[] = []): Promise<ArtifactPage> {
    const page = await readPage(this.table, { partitionKey: runKey(taskId, runId), where }, limit, continuation);
    return { items: page.items.map((e) => decodeArtifact(e)), continuation: page.continuation };
  }

  /** Every artifact of a run that `where` selects, `size` at a time, read to the end. */
  async *batches(taskId: string, runId: number, where: Condition[], size = MAX_TABLE_PAGE): AsyncGenerator<ArtifactRecord[]> {
    for await (const batch of rowBatches(this.table, { partitionKey: runKey(taskId, runId), where }, size)) yield batch.map((e) => decodeArtifact(e));
  }
}
