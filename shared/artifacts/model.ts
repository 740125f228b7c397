/**
 * Artifact records, their row encoding in the Artifacts table, and the listing entry clients see.
 * One partition per run (`<taskId>-<runId>`), one row per artifact name.
 */
import crypto from 'node:crypto';
import { encodeKey } from '../storage/keys';
import type { Entity } from '../storage/storage';

export type StorageType = 's3' | 'object' | 'reference' | 'link' | 'error';

export interface ArtifactRecord {
  taskId: string;
  runId: number;
  name: string;
  storageType: StorageType;
  contentType: string;
  /** ISO date (toJSON form), so string order is time order. */
  expires: string;
  contentLength?: number;
  /** reference: {url}; link: {artifact}; error: {reason, message}; s3: {}; object: {uploadId} until finished, then {}. */
  details: Record<string, string>;
  /** s3 only: an uploaded block may still wait for its Put Block List (see blobs.ts). */
  uncommitted: boolean;
  etag?: string;
}

/** The listing schema caps artifact names at 1024 characters. */
export const MAX_NAME_LENGTH = 1024;
/** Default content type when a request gives none (links), as the real queue stores it. */
export const DEFAULT_CONTENT_TYPE = 'application/binary';
/**
 * Row keys are limited to 1 KiB; keep encoded names well under it (UTF-16 counting) and hash the
 * rest. Hashed keys are longer than any plain key, so the two forms never collide.
 */
const MAX_PLAIN_ROW_KEY = 500;
const HASHED_PREFIX_CHARS = 440;

/** A taskId is a fixed-length slugid, so `<taskId>-<runId>` is unambiguous. */
export function runKey(taskId: string, runId: number): string {
  return `${taskId}-${runId}`;
}

export function artifactRowKey(name: string): string {
  const plain = encodeKey(name);
  if (plain.length <= MAX_PLAIN_ROW_KEY) return plain;
  const hash = crypto.createHash('sha256').update(name, 'utf8').digest('hex');
  return `${plain.slice(0, HASHED_PREFIX_CHARS)}~${hash}`;
}

export function encodeArtifact(a: ArtifactRecord): Entity {
  const e: Entity = {
    partitionKey: runKey(a.taskId, a.runId),
    rowKey: artifactRowKey(a.name),
    taskId: a.taskId,
    runId: a.runId,
    name: a.name,
    storageType: a.storageType,
    contentType: a.contentType,
    expires: a.expires,
    details: JSON.stringify(a.details),
    uncommitted: a.uncommitted,
  };
  if (a.contentLength !== undefined) e.contentLength = a.contentLength;
  return e;
}

export function decodeArtifact(e: Record<string, unknown> & { etag?: string }): ArtifactRecord {
  const a: ArtifactRecord = {
    taskId: e.taskId as string,
    runId: Number(e.runId),
    name: e.name as string,
    storageType: e.storageType as StorageType,
    contentType: e.contentType as string,
    expires: e.expires as string,
    details: JSON.parse((e.details as string) || '{}'),
    uncommitted: Boolean(e.uncommitted),
    etag: e.etag,
  };
  if (e.contentLength !== undefined && e.contentLength !== null) a.contentLength = Number(e.contentLength);
  return a;
}

/** What listArtifacts and artifactInfo return for one artifact. */
export function listingEntry(a: ArtifactRecord): Record<string, unknown> {
  const out: Record<string, unknown> = { storageType: a.storageType, name: a.name, expires: a.expires, contentType: a.contentType };
  if (a.contentLength !== undefined) out.contentLength = a.contentLength;
  return out;
}

/** Object artifacts are not present (invisible everywhere) until finishArtifact. */
export function isPresent(a: ArtifactRecord): boolean {
  return a.storageType !== 'object' || !a.details.uploadId;
}

/** The Object API name of an object artifact's data (Taskcluster's naming). */
export function objectNameFor(taskId: string, runId: number, name: string): string {
  return `t/${taskId}/${runId}/${name}`;
}

export function isExpired(a: ArtifactRecord, now: Date): boolean {
  return a.expires < now.toJSON();
}
