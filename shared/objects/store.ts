/**
 * Object records in the Objects table: one row per object name (partition = sha256 of the name,
 * which fits any name in a key; the stored name settles the theoretical collision).
 */
import crypto from 'node:crypto';
import { Decision, Entity, Storage, UNCHANGED, deleteIfMatch, guardedUpdate } from '../storage/storage';
import { conflict } from '../errors';

export interface ObjectRecord {
  name: string;
  projectId: string;
  /** The upload's secret id while the upload is open; '' once finished. */
  uploadId: string;
  /** ISO date (toJSON form). */
  expires: string;
  /** When an unfinished upload is dropped (ISO); '' once finished. */
  uploadExpires: string;
  /** `{algorithm: hex}`, as the uploader declared them. */
  hashes: Record<string, string>;
  /** The uploadId whose staging blob holds the upload (kept once finished, to delete it at expiry); '' if none. */
  stagingId: string;
  /** How many bytes the upload method declared (putUrl's contentLength, dataInline's data); -1 if no method was chosen. */
  stagedLength: number;
  etag?: string;
}

const ROW_KEY = 'object';

export const objectKey = (name: string) => crypto.createHash('sha256').update(name, 'utf8').digest('hex');

export const isFinished = (o: ObjectRecord) => o.uploadId === '';

export class ObjectStore {
  constructor(private readonly storage: Storage) {}

  private get table() {
    return this.storage.table('Objects');
  }

  private entity(o: ObjectRecord) {
    return {
      partitionKey: objectKey(o.name),
      rowKey: ROW_KEY,
      name: o.name,
      projectId: o.projectId,
      uploadId: o.uploadId,
      expires: o.expires,
      uploadExpires: o.uploadExpires,
      hashes: JSON.stringify(o.hashes),
      stagingId: o.stagingId,
      stagedLength: o.stagedLength,
    };
  }

  async get(name: string): Promise<ObjectRecord | undefined> {
    const row = await this.table.get(objectKey(name), ROW_KEY);
    return row && row.name === name ? this.record(name, row) : undefined;
  }

  private record(name: string, row: Entity & { etag: string }): ObjectRecord {
    return {
      name,
      projectId: row.projectId as string,
      uploadId: (row.uploadId as string) ?? '',
      expires: row.expires as string,
      uploadExpires: (row.uploadExpires as string) ?? '',
      hashes: JSON.parse((row.hashes as string) || '{}'),
      stagingId: (row.stagingId as string) ?? '',
      stagedLength: typeof row.stagedLength === 'number' ? row.stagedLength : -1,
      etag: row.etag,
    };
  }

  /**
   * Reads, decides and writes the object's row under its ETag (guardedUpdate; `decide` may run
   * again after a lost race). The record as stored afterwards, and whether this call wrote it.
   */
  async modify(
    name: string,
    decide: (o: ObjectRecord | undefined) => Promise<ObjectRecord | typeof UNCHANGED>,
  ): Promise<{ record: ObjectRecord | undefined; written: boolean }> {
    const out = await guardedUpdate(
      this.table,
      { partitionKey: objectKey(name), rowKey: ROW_KEY },
      async (row): Promise<Decision> => {
        // Another name with the same hash: never overwritten (sha256 makes this theoretical).
        if (row && row.name !== name) throw conflict(`Object "${name}" cannot be stored: its key is taken`);
        const next = await decide(row && this.record(name, row));
        return next === UNCHANGED ? UNCHANGED : this.entity(next);
      },
      { what: `object ${name}` },
    );
    return { record: out.row && this.record(name, out.row), written: out.written };
  }

  /** Deletes the row if unchanged since it was read (a missing or changed row is left as it is). */
  async delete(o: ObjectRecord): Promise<void> {
    await deleteIfMatch(this.table, objectKey(o.name), ROW_KEY, o.etag ?? '*');
  }
}
