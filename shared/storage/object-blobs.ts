/**
 * Object bytes (the Object API's data) in the artifact container, under `o/` (a taskId is never
 * `o`, so object blobs and s3-artifact blobs `<taskId>/<runId>/…` cannot collide).
 *
 * Uploaders PUT the whole object to a create/write SAS URL of a staging blob with the headers we
 * hand them (the Object API's `putUrl` method: both taskcluster clients send those headers
 * verbatim); finishUpload copies it to the object's blob. Downloads are short-lived read SAS URLs.
 * The artifact container's port operations do the work (and the metering).
 */
import crypto from 'node:crypto';
import type { Storage } from './port';

/** Azure caps blob names at 1024 characters. */
const MAX_BLOB_NAME = 1024;

export interface PutUrl {
  url: string;
  headers: Record<string, string>;
}

/**
 * The blob of an object: `o/<name>`, readable in download URLs. Names HTTP clients would rewrite
 * (`.`/`..` or empty segments, backslashes, a trailing `.` or `/`) or that are too long go to
 * `o.h/<sha256(name)>`.
 */
export function objectBlobName(name: string): string {
  const plain = `o/${name}`;
  const unsafe = name.split('/').some((s) => s === '.' || s === '..' || s === '') || name.includes('\\') || /\.$/.test(name) || plain.length > MAX_BLOB_NAME;
  return unsafe ? `o.h/${crypto.createHash('sha256').update(name, 'utf8').digest('hex')}` : plain;
}

/**
 * Where a `putUrl` upload lands: `o.up/<sha256(name)>/<uploadId>`, never the object's own blob.
 * finishUpload copies it there (server-side) after checking its length, so nothing written
 * through a putUrl afterwards reaches readers.
 */
export function stagingBlobName(name: string, uploadId: string): string {
  return `o.up/${crypto.createHash('sha256').update(name, 'utf8').digest('hex')}/${uploadId}`;
}

export class ObjectBlobs {
  constructor(private readonly storage: Storage) {}

  /** Stages small object data sent inline with the request (the `dataInline` upload method). */
  async upload(name: string, uploadId: string, data: Buffer, contentType: string): Promise<void> {
    await this.storage.artifacts.upload(stagingBlobName(name, uploadId), data, contentType);
  }

  /** A URL and headers for one PUT of the whole object to its staging blob (Put Blob needs `x-ms-blob-type`). */
  putUrl(name: string, uploadId: string, contentType: string, contentLength: number, expiresOn: Date): PutUrl {
    return {
      url: this.storage.artifacts.putUrl(stagingBlobName(name, uploadId), expiresOn),
      headers: { 'x-ms-blob-type': 'BlockBlob', 'Content-Type': contentType, 'Content-Length': String(contentLength) },
    };
  }

  /** A read-only URL for the object's data. */
  getUrl(name: string, expiresOn: Date): string {
    return this.storage.artifacts.readUrl(objectBlobName(name), expiresOn);
  }

  async exists(name: string): Promise<boolean> {
    return this.storage.artifacts.exists(objectBlobName(name));
  }

  /**
   * Copies the staged upload to the object's blob, unless that exists already (a finish that ran
   * before): the object's blob is written once. Its size, or undefined if nothing was staged.
   */
  async publish(name: string, uploadId: string): Promise<number | undefined> {
    return (await this.storage.artifacts.copyIfAbsent(stagingBlobName(name, uploadId), objectBlobName(name)))?.size;
  }

  /** Deletes the staged upload; a missing blob is fine. */
  async dropStaged(name: string, uploadId: string): Promise<void> {
    await this.storage.artifacts.delete(stagingBlobName(name, uploadId));
  }

  /** Deletes the object's data (and the staged upload `uploadId`, if given); a missing blob is fine. */
  async delete(name: string, uploadId?: string): Promise<void> {
    await this.storage.artifacts.delete(objectBlobName(name));
    if (uploadId) await this.storage.artifacts.delete(stagingBlobName(name, uploadId));
  }
}
