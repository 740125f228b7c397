/**
 * Artifact upload as the interaction documents describe: `createArtifact` with storageType `s3`
 * returns a `putUrl`, and the bytes go there in a plain PUT carrying only `content-type` and
 * `content-length`. With object artifacts (--object-artifacts, as today's Taskcluster workers do)
 * `createArtifact` returns credentials for one object, the bytes go through the Object API, and
 * `finishArtifact` makes the artifact visible. A declared file that is not there becomes an
 * `error` artifact, so consumers see why instead of a 404.
 */
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { Credentials, RunQueue, statusOf, messageOf } from './types';

/** Attempts per upload (createArtifact + PUT) on network errors and 5xx from the storage. */
const UPLOAD_ATTEMPTS = 4;
/** First backoff between attempts; doubles each time. */
const UPLOAD_BACKOFF_MS = 500;
/** Per-PUT inactivity timeout. */
const PUT_TIMEOUT_MS = 5 * 60_000;

const CONTENT_TYPES: Record<string, string> = {
  '.txt': 'text/plain',
  '.log': 'text/plain',
  '.md': 'text/markdown',
  '.html': 'text/html',
  '.css': 'text/css',
  '.csv': 'text/csv',
  '.js': 'application/javascript',
  '.json': 'application/json',
  '.xml': 'application/xml',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.pdf': 'application/pdf',
  '.gz': 'application/gzip',
  '.tgz': 'application/gzip',
  '.tar': 'application/x-tar',
  '.zip': 'application/zip',
};

export function contentTypeFor(file: string): string {
  return CONTENT_TYPES[path.extname(file).toLowerCase()] ?? 'application/octet-stream';
}

export class UploadError extends Error {
  constructor(
    message: string,
    /** HTTP status of the failing call, if any. */
    readonly status?: number,
    /** True when the queue answered 409: the run is no longer ours to upload to. */
    readonly conflict = false,
    /** True when the storage (not the queue) answered. */
    readonly storage = false,
  ) {
    super(message);
  }
}

/** PUTs a file to a pre-signed URL with only content-type and content-length. */
export function putFile(url: string, file: string, contentType: string, size: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const req = (u.protocol === 'https:' ? https : http).request(
      u,
      { method: 'PUT', headers: { 'content-type': contentType, 'content-length': String(size) }, timeout: PUT_TIMEOUT_MS },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.length < 16 && chunks.push(c));
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          if (status >= 200 && status < 300) return resolve();
          const body = Buffer.concat(chunks).toString('utf8').slice(0, 500);
          reject(new UploadError(`PUT ${u.origin}${u.pathname} answered ${status}: ${body}`, status, false, true));
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`PUT ${u.origin}${u.pathname} timed out`)));
    req.on('error', reject);
    const src = fs.createReadStream(file);
    src.on('error', (err) => req.destroy(err));
    src.pipe(req);
  });
}

/** Uploads one object's data through the Object API with the credentials createArtifact returned. */
export type ObjectUpload = (o: {
  credentials: Credentials;
  projectId: string;
  name: string;
  uploadId: string;
  expires: string;
  contentType: string;
  file: string;
  size: number;
}) => Promise<void>;

export interface UploaderDeps {
  /** The run's queue client, signed with the latest credentials at the time of the call. */
  queue: () => RunQueue;
  taskId: string;
  runId: number;
  put?: typeof putFile;
  /** When set, files are uploaded as object artifacts through it. */
  uploadObject?: ObjectUpload;
  sleep?: (ms: number) => Promise<void>;
}

const retryable = (err: unknown) => {
  const s = err instanceof UploadError ? err.status : statusOf(err);
  // A 403 from the storage means the signed URL went stale: ask for a new one.
  return s === undefined || s >= 500 || (s === 403 && err instanceof UploadError && err.storage);
};

export class ArtifactUploader {
  private readonly put: typeof putFile;
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(private readonly deps: UploaderDeps) {
    this.put = deps.put ?? putFile;
    this.sleep = deps.sleep ?? ((ms) => new Promise((r) => setTimeout(r, ms)));
  }

  private async create(name: string, body: Record<string, unknown>): Promise<any> {
    try {
      return await this.deps.queue().createArtifact(this.deps.taskId, this.deps.runId, name, body);
    } catch (err) {
      const status = statusOf(err);
      throw new UploadError(`createArtifact ${name} failed: ${messageOf(err).split('\n')[0]}`, status, status === 409);
    }
  }

  /** `attempt` until it succeeds, with backoff on network errors and 5xx (a conflict is final). */
  private async retrying<T>(name: string, attempt: () => Promise<T>): Promise<T> {
    let last: unknown;
    for (let n = 1; n <= UPLOAD_ATTEMPTS; n++) {
      try {
        return await attempt();
      } catch (err) {
        last = err;
        if ((err instanceof UploadError && err.conflict) || !retryable(err) || n === UPLOAD_ATTEMPTS) break;
        await this.sleep(UPLOAD_BACKOFF_MS * 2 ** (n - 1));
      }
    }
    throw last instanceof UploadError ? last : new UploadError(`uploading ${name} failed: ${messageOf(last)}`);
  }

  /** Uploads `file` (which must exist) as an s3 artifact, or as an object artifact if so configured. */
  async uploadFile(name: string, file: string, opts: { contentType: string; expires: string }): Promise<{ size: number }> {
    const { size } = await fs.promises.stat(file);
    return this.retrying(name, async () => {
      if (this.deps.uploadObject) {
        await this.uploadObject(this.deps.uploadObject, name, file, size, opts);
        return { size };
      }
      const res = await this.create(name, { storageType: 's3', contentType: opts.contentType, expires: opts.expires });
      if (!res || typeof res.putUrl !== 'string') throw new UploadError(`createArtifact ${name} returned no putUrl (storageType ${res?.storageType})`);
      await this.put(res.putUrl, file, opts.contentType, size);
      return { size };
    });
  }

  /** A reference artifact: readers of `name` are redirected to `url`. */
  async reference(name: string, url: string, opts: { contentType: string; expires: string }): Promise<void> {
    await this.retrying(name, () => this.create(name, { storageType: 'reference', url, contentType: opts.contentType, expires: opts.expires }));
  }

  /** A link artifact: `name` reads as the artifact `target` of the same run. */
  async link(name: string, target: string, opts: { contentType: string; expires: string }): Promise<void> {
    await this.retrying(name, () => this.create(name, { storageType: 'link', artifact: target, contentType: opts.contentType, expires: opts.expires }));
  }

  /** createArtifact (object), the data through the Object API, then finishArtifact. */
  private async uploadObject(upload: ObjectUpload, name: string, file: string, size: number, opts: { contentType: string; expires: string }): Promise<void> {
    const res = await this.create(name, { storageType: 'object', contentType: opts.contentType, expires: opts.expires, contentLength: size });
    if (!res || typeof res.uploadId !== 'string') throw new UploadError(`createArtifact ${name} returned no uploadId (storageType ${res?.storageType})`);
    try {
      await upload({
        credentials: res.credentials,
        projectId: res.projectId,
        name: res.name,
        uploadId: res.uploadId,
        expires: res.expires,
        contentType: opts.contentType,
        file,
        size,
      });
    } catch (err) {
      throw new UploadError(`uploading object ${res.name} failed: ${messageOf(err).split('\n')[0]}`, statusOf(err), false, true);
    }
    const queue = this.deps.queue();
    if (!queue.finishArtifact) throw new UploadError('this queue client cannot finish object artifacts');
    try {
      await queue.finishArtifact(this.deps.taskId, this.deps.runId, name, { uploadId: res.uploadId });
    } catch (err) {
      const status = statusOf(err);
      throw new UploadError(`finishArtifact ${name} failed: ${messageOf(err).split('\n')[0]}`, status, status === 409);
    }
  }

  /** Records why a declared artifact could not be uploaded. */
  async uploadError(name: string, opts: { reason: 'file-missing-on-worker' | 'invalid-resource-on-worker'; message: string; expires: string }): Promise<void> {
    await this.create(name, { storageType: 'error', reason: opts.reason, message: opts.message, expires: opts.expires });
  }
}
