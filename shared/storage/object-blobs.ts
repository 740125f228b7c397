/**
 * Object bytes (the Object API's data) in the artifact container, under `o/` (a taskId is never
 * `o`, so object blobs and s3-artifact blobs `<taskId>/<runId>/…` cannot collide).
 *
 * Uploaders PUT the whole object to a create/write SAS URL with the headers we hand them (the
 * Object API's `putUrl` method: both taskcluster clients send those headers verbatim), so unlike
 * s3 artifacts no commit step is needed. Downloads are short-lived read SAS URLs.
 * SAS minting is local computation; uploads, existence checks and deletes are metered.
 */
import crypto from 'node:crypto';
import { BlobSASPermissions, BlockBlobClient, SASProtocol, StorageSharedKeyCredential, generateBlobSASQueryParameters } from '@azure/storage-blob';
import type { Storage } from './storage';

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
  private readonly key: StorageSharedKeyCredential;
  private readonly protocol: SASProtocol;

  constructor(private readonly storage: Storage) {
    this.key = new StorageSharedKeyCredential(storage.conn.accountName, storage.conn.accountKey);
    // Azurite serves plain http; an https-only SAS would be refused there.
    this.protocol = storage.conn.blobEndpoint.startsWith('https:') ? SASProtocol.Https : SASProtocol.HttpsAndHttp;
  }

  private blob(name: string): BlockBlobClient {
    return this.storage.artifacts.getBlockBlobClient(objectBlobName(name));
  }

  private sas(name: string, permissions: string, expiresOn: Date): string {
    return generateBlobSASQueryParameters(
      {
        containerName: this.storage.artifacts.containerName,
        blobName: objectBlobName(name),
        permissions: BlobSASPermissions.parse(permissions),
        expiresOn,
        protocol: this.protocol,
      },
      this.key,
    ).toString();
  }

  /** Stores small object data sent inline with the request (the `dataInline` upload method). */
  async upload(name: string, data: Buffer, contentType: string): Promise<void> {
    await this.storage.meter.run('objects.put', async () => {
      await this.blob(name).upload(data, data.length, { blobHTTPHeaders: { blobContentType: contentType } });
    });
  }

  /** A URL and headers for one PUT of the whole object (Put Blob needs `x-ms-blob-type`). */
  putUrl(name: string, contentType: string, contentLength: number, expiresOn: Date): PutUrl {
    return {
      url: `${this.blob(name).url}?${this.sas(name, 'cw', expiresOn)}`,
      headers: { 'x-ms-blob-type': 'BlockBlob', 'Content-Type': contentType, 'Content-Length': String(contentLength) },
    };
  }

  /** A read-only URL for the object's data. */
  getUrl(name: string, expiresOn: Date): string {
    return `${this.blob(name).url}?${this.sas(name, 'r', expiresOn)}`;
  }

  async exists(name: string): Promise<boolean> {
    return this.storage.meter.run('objects.exists', () => this.blob(name).exists());
  }

  /** Deletes the object's data; a missing blob is fine. */
  async delete(name: string): Promise<void> {
    await this.storage.meter.run('objects.delete', async () => {
      await this.blob(name).deleteIfExists();
    });
  }
}
