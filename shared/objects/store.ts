/**
 * Object records in the Objects table: one row per object name (partition = sha256 of the name,
 * which fits any name in a key; the stored name settles the theoretical collision).
 */
import crypto from 'node:crypto';
import { Storage, StorageConflict } from '../storage/storage';

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
    if (!row || row.name !== name) return undefined;
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

  /** Inserts; false if the object already exists. */
  async insert(o: ObjectRecord): Promise<boolean> {
    try {
      o.etag = await this.table.insert(this.entity(o));
      return true;
    } catch (err) {
      if (err instanceof StorageConflict && err.reason === 'exists') return false;
      throw err;
    }
  }

  /** Replaces the row if unchanged since it was read; false if it changed or vanished. */
  async replace(o: ObjectRecord): Promise<boolean> {
    try {
      o.etag = await this.table.update(this.entity(o), o.etag!);
      return true;
    } catch (err) {
      if (err instanceof StorageConflict) return false;
      throw err;
    }
  }

  /** Deletes the row if unchanged since it was read (a missing row is fine). */
  async delete(o: ObjectRecord): Promise<void> {
    try {
      await this.table.delete(objectKey(o.name), ROW_KEY, o.etag ?? '*');
    } catch (err) {
      if (!(err instanceof StorageConflict)) throw err;
    }
  }
}
