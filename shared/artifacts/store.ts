/**
 * Artifact rows: point reads, ETag-guarded writes and per-run pages.
 */
import {
  Condition,
  CountedTable,
  MAX_TABLE_PAGE,
  Storage,
  insertIfAbsent,
  keptEtag,
  mergeIfMatch,
  readPage,
  replaceIfMatch,
  rowBatches,
} from '../storage/storage';
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

  /** Inserts; returns false if the artifact already exists. */
  async insert(a: ArtifactRecord): Promise<boolean> {
    return keptEtag(await insertIfAbsent(this.table, encodeArtifact(a)), a);
  }

  /** Replaces the row if unchanged since it was read; returns false if it changed or vanished. */
  async replace(a: ArtifactRecord): Promise<boolean> {
    return keptEtag(await replaceIfMatch(this.table, encodeArtifact(a), a.etag!), a);
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
