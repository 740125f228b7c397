/**
 * Object bytes (the Object API's data) in the artifact container, under `o/` (a taskId is never
 * `o`, so object blobs and s3-artifact blobs `<taskId>/<runId>/…` cannot collide).
 *
 * Uploaders PUT the whole object to a create/write SAS URL with the headers we hand them (the
 * Object API's `putUrl` method: both taskcluster clients send those headers verbatim), so unlike
 * s3 artifacts no commit step is needed. Downloads are short-lived read SAS URLs.
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

export class ObjectBlobs {
  constructor(private readonly storage: Storage) {}

  /** Stores small object data sent inline with the request (the `dataInline` upload method). */
  async upload(name: string, data: Buffer, contentType: string): Promise<void> {
    await this.storage.artifacts.upload(objectBlobName(name), data, contentType);
  }

  /** A URL and headers for one PUT of the whole object (Put Blob needs `x-ms-blob-type`). */
  putUrl(name: string, contentType: string, contentLength: number, expiresOn: Date): PutUrl {
    return {
      url: this.storage.artifacts.putUrl(objectBlobName(name), expiresOn),
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

  /** Deletes the object's data; a missing blob is fine. */
  async delete(name: string): Promise<void> {
    await this.storage.artifacts.delete(objectBlobName(name));
  }
}
