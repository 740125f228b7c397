/**
 * Object records in the Objects table: one row per object name (partition = sha256 of the name,
 * which fits any name in a key; the stored name settles the theoretical collision).
 */
import crypto from 'node:crypto';
import { Storage, deleteIfMatch, insertIfAbsent, keptEtag, replaceIfMatch } from '../storage/storage';

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
      etag: row.etag,
    };
  }

  /** Inserts; false if the object already exists. */
  async insert(o: ObjectRecord): Promise<boolean> {
    return keptEtag(await insertIfAbsent(this.table, this.entity(o)), o);
  }

  /** Replaces the row if unchanged since it was read; false if it changed or vanished. */
  async replace(o: ObjectRecord): Promise<boolean> {
    return keptEtag(await replaceIfMatch(this.table, this.entity(o), o.etag!), o);
  }

  /** Deletes the row if unchanged since it was read (a missing or changed row is left as it is). */
  async delete(o: ObjectRecord): Promise<void> {
    await deleteIfMatch(this.table, objectKey(o.name), ROW_KEY, o.etag ?? '*');
  }
}
