/**
 * The Object API on Blob storage, with Taskcluster's object-service rules:
 *
 * - createUpload reserves a name for one uploadId (callable again with the same uploadId, projectId
 *   and expires, to renegotiate or renew a URL) and picks an upload method: `dataInline` (stored at
 *   once) before `putUrl` (a SAS URL plus the headers the PUT must carry); none proposed just
 *   reserves.
 * - Both methods write a staging blob of the upload, never the object's own blob; finishUpload
 *   copies it there server-side (once: the copy never replaces an existing object blob), checks
 *   that its size is the declared one, records the hashes and makes the object downloadable and
 *   immutable: nothing written through a putUrl afterwards reaches readers. Repeating finishUpload
 *   is fine unless it brings a new or different hash.
 * - startDownload offers `getUrl` (URL, expiry and hashes, so the client checks the data) before
 *   `simple` (a URL).
 * - Every object expires through the artifact expiry index (shared/artifacts/expiry.ts); an upload
 *   never finished is dropped after UPLOAD_TTL_MS, as Taskcluster drops it.
 */
import { Storage, UNCHANGED } from '../storage/storage';
import { ObjectBlobs, PutUrl } from '../storage/object-blobs';
import { ApiError, conflict, inputError, notFound } from '../errors';
import { normalizeDate } from '../tasks/model';
import { noteExpiry } from './expiry-index';
import { ObjectRecord, ObjectStore, isFinished, objectKey } from './store';

/** The dataInline method carries at most 8 KiB of decoded data (Taskcluster's schema). */
export const DATA_INLINE_MAX_BYTES = 8192;
/** putUrl URLs are valid this long (Taskcluster's), plus a little for clock drift. */
export const PUT_URL_TTL_MS = 45 * 60 * 1000;
const PUT_URL_DRIFT_MS = 10 * 1000;
/** getUrl downloads must start within a minute (Taskcluster's); the signature allows one more for skew. */
export const GET_URL_TTL_MS = 60 * 1000;
const GET_URL_SKEW_MS = 60 * 1000;
/** simple download URLs live 30 minutes, as the queue's signed artifact URLs do. */
export const SIMPLE_URL_TTL_MS = 30 * 60 * 1000;
/** Unfinished uploads are dropped after a day (Taskcluster's). */
export const UPLOAD_TTL_MS = 24 * 3600 * 1000;
/** Download methods in order of preference. */
const DOWNLOAD_METHODS = ['getUrl', 'simple'] as const;

export interface ObjectDeps {
  storage: Storage;
  now: () => Date;
}

export interface CreateUploadInput {
  projectId: string;
  uploadId: string;
  expires: string;
  hashes?: Record<string, string>;
  proposedUploadMethods: {
    dataInline?: { contentType: string; objectData: string };
    putUrl?: { contentType: string; contentLength: number };
  };
}

export type UploadMethod = { dataInline: true } | { putUrl: PutUrl & { expires: string } } | Record<string, never>;

/** Hashes after adding `given`; 409 when one contradicts a recorded hash. */
function mergeHashes(name: string, recorded: Record<string, string>, given: Record<string, string> = {}): Record<string, string> {
  for (const [algo, hash] of Object.entries(given)) {
    if (recorded[algo] !== undefined && recorded[algo] !== hash) throw conflict(`Object "${name}" already has a different ${algo} hash`);
  }
  return { ...recorded, ...given };
}

const sameHashes = (a: Record<string, string>, b: Record<string, string>) =>
  Object.keys(a).length === Object.keys(b).length && Object.entries(a).every(([k, v]) => b[k] === v);

/**
 * Creates the object row for an upload, or checks a repeat against it (same uploadId, projectId
 * and, unless `anyExpires`, expires) and adds its hashes. The expiry index row comes first, so no
 * object row ever lacks one.
 */
async function reserve(d: ObjectDeps, name: string, wanted: ObjectRecord, anyExpires = false): Promise<ObjectRecord> {
  const out = await new ObjectStore(d.storage).modify(name, async (o) => {
    if (!o) {
      const now = d.now();
      const uploadExpires = new Date(now.getTime() + UPLOAD_TTL_MS).toJSON();
      const key = `o~${objectKey(name)}`;
      await noteExpiry(d.storage, key, wanted.expires, now, name);
      if (uploadExpires < wanted.expires) await noteExpiry(d.storage, key, uploadExpires, now, name);
      return { ...wanted, uploadExpires };
    }
    if (isFinished(o) || o.uploadId !== wanted.uploadId || o.projectId !== wanted.projectId || (!anyExpires && o.expires !== wanted.expires)) {
      throw conflict(`Object "${name}" already exists`);
    }
    const hashes = mergeHashes(name, o.hashes, wanted.hashes);
    const stagedLength = wanted.stagedLength >= 0 ? wanted.stagedLength : o.stagedLength;
    if (sameHashes(hashes, o.hashes) && stagedLength === o.stagedLength) return UNCHANGED;
    return { ...o, hashes, stagedLength, stagingId: wanted.uploadId };
  });
  return out.record!;
}

/** What the queue does for an object artifact: reserve the upload, proposing no method. */
export async function reserveUpload(d: ObjectDeps, name: string, projectId: string, uploadId: string, expires: string): Promise<ObjectRecord> {
  return reserve(d, name, { name, projectId, uploadId, expires, uploadExpires: '', hashes: {}, stagingId: uploadId, stagedLength: -1 }, true);
}

export async function createUpload(
  d: ObjectDeps,
  name: string,
  input: CreateUploadInput,
): Promise<{ projectId: string; uploadId: string; expires: string; uploadMethod: UploadMethod }> {
  const expires = normalizeDate(input.expires, 'expires');
  const { dataInline, putUrl } = input.proposedUploadMethods;
  let data: Buffer | undefined;
  if (dataInline) {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(dataInline.objectData)) throw inputError('Invalid base64 objectData');
    data = Buffer.from(dataInline.objectData, 'base64');
    if (data.length > DATA_INLINE_MAX_BYTES) throw inputError(`dataInline carries at most ${DATA_INLINE_MAX_BYTES} bytes`);
  }
  const stagedLength = data ? data.length : putUrl ? putUrl.contentLength : -1;
  const wanted = {
    name,
    projectId: input.projectId,
    uploadId: input.uploadId,
    expires,
    uploadExpires: '',
    hashes: input.hashes ?? {},
    stagingId: input.uploadId,
    stagedLength,
  };
  await reserve(d, name, wanted);
  const reply = { projectId: input.projectId, uploadId: input.uploadId, expires: input.expires };
  const blobs = new ObjectBlobs(d.storage);
  if (dataInline && data) {
    await blobs.upload(name, input.uploadId, data, dataInline.contentType);
    return { ...reply, uploadMethod: { dataInline: true } };
  }
  if (putUrl) {
    const now = d.now().getTime();
    const url = blobs.putUrl(name, input.uploadId, putUrl.contentType, putUrl.contentLength, new Date(now + PUT_URL_TTL_MS + PUT_URL_DRIFT_MS));
    return { ...reply, uploadMethod: { putUrl: { ...url, expires: new Date(now + PUT_URL_TTL_MS).toJSON() } } };
  }
  return { ...reply, uploadMethod: {} };
}

export async function finishUpload(
  d: ObjectDeps,
  name: string,
  input: { projectId: string; uploadId: string; hashes?: Record<string, string> },
): Promise<void> {
  const blobs = new ObjectBlobs(d.storage);
  let staged = '';
  const out = await new ObjectStore(d.storage).modify(name, async (o) => {
    if (!o) throw notFound(`Object "${name}" not found`);
    if (o.projectId !== input.projectId) throw inputError(`Object "${name}" does not have projectId ${input.projectId}`);
    if (isFinished(o)) {
      // Idempotent, as long as it adds no hash and changes none.
      for (const [algo, hash] of Object.entries(input.hashes ?? {})) {
        if (o.hashes[algo] !== hash) throw conflict(`Object "${name}" is already finished, without this ${algo} hash`);
      }
      return UNCHANGED;
    }
    if (o.uploadId !== input.uploadId) throw conflict(`Object "${name}" does not have uploadId ${input.uploadId}`);
    const hashes = mergeHashes(name, o.hashes, input.hashes);
    const size = o.stagedLength < 0 ? undefined : await blobs.publish(name, o.uploadId);
    if (size === undefined) throw inputError(`No data was uploaded for object "${name}"`);
    if (size !== o.stagedLength) {
      // Not the declared bytes: unpublish, so the uploader can PUT again and finish.
      await blobs.delete(name);
      throw inputError(`Object "${name}" was uploaded with ${size} bytes, but ${o.stagedLength} were declared; upload it again`);
    }
    staged = o.uploadId;
    return { ...o, uploadId: '', uploadExpires: '', hashes };
  });
  if (out.written) await blobs.dropStaged(name, staged).catch(() => undefined);
}

/** A finished object, or 404 (an open upload is not an object yet). */
async function finished(d: ObjectDeps, name: string): Promise<ObjectRecord> {
  const o = await new ObjectStore(d.storage).get(name);
  if (!o || !isFinished(o)) throw notFound(`Object "${name}" not found`);
  return o;
}

export type DownloadResponse = { method: 'getUrl'; url: string; expires: string; hashes: Record<string, string> } | { method: 'simple'; url: string };

/** A read URL for a finished object's data (what the queue's getArtifact redirects to). */
export async function simpleUrl(d: ObjectDeps, name: string): Promise<string> {
  await finished(d, name);
  return new ObjectBlobs(d.storage).getUrl(name, new Date(d.now().getTime() + SIMPLE_URL_TTL_MS));
}

export async function startDownload(d: ObjectDeps, name: string, accept: Record<string, unknown>): Promise<DownloadResponse> {
  const o = await finished(d, name);
  const method = DOWNLOAD_METHODS.find((m) => accept[m] === true);
  if (!method) throw new ApiError('NoMatchingMethod', `Object supports methods ${DOWNLOAD_METHODS.join(', ')}`);
  const now = d.now().getTime();
  const blobs = new ObjectBlobs(d.storage);
  if (method === 'simple') return { method, url: blobs.getUrl(name, new Date(now + SIMPLE_URL_TTL_MS)) };
  return {
    method,
    url: blobs.getUrl(name, new Date(now + GET_URL_TTL_MS + GET_URL_SKEW_MS)),
    expires: new Date(now + GET_URL_TTL_MS).toJSON(),
    hashes: o.hashes,
  };
}

export async function objectMetadata(d: ObjectDeps, name: string): Promise<{ projectId: string; expires: string; hashes: Record<string, string> }> {
  const o = await finished(d, name);
  return { projectId: o.projectId, expires: o.expires, hashes: o.hashes };
}

/** Whether a finished object of that name exists (finishArtifact's check). */
export async function objectFinished(d: ObjectDeps, name: string): Promise<boolean> {
  const o = await new ObjectStore(d.storage).get(name);
  return !!o && isFinished(o);
}
