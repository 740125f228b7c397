/**
 * createArtifact: the checks in the real queue's order, idempotent re-creation with its documented
 * exceptions, and the per-type reply (an upload URL for s3; for object, an upload reserved in the
 * Object API and credentials for that one object).
 */
import * as slugid from 'slugid';
import type { LifecycleDeps } from '../lifecycle/ports';
import { execute } from '../lifecycle/executor';
import { markUploads } from '../lifecycle/transitions';
import { conflict, inputError } from '../errors';
import { isDeepStrictEqual } from 'node:util';
import { normalizeDate } from '../tasks/model';
import { ArtifactRecord, DEFAULT_CONTENT_TYPE, MAX_NAME_LENGTH, StorageType, isPresent, objectNameFor, runKey } from './model';
import { ArtifactStore } from './store';
import { UNCHANGED } from '../storage/storage';
import { ArtifactBlobs, PUT_URL_TTL_MS, blobNameFor } from './blobs';
import { noteExpiry } from './expiry';
import { Issuer, uploadCredentials } from './object';
import { reserveUpload } from '../objects/objects';
import type { EventRecorder } from '../events/recorder';

/** `expires` may lie this far in the past (clock drift), as in the real queue. */
const EXPIRES_PAST_TOLERANCE_MS = 15 * 60 * 1000;
/** Artifacts may still be created this long after a run is resolved `exception`. */
export const EXCEPTION_UPLOAD_GRACE_MS = 25 * 60 * 1000;

export interface CreateArtifactDeps extends LifecycleDeps {
  /** Signs object artifacts' upload credentials. */
  clients: { issuer: Issuer };
  /** artifact-created events (absent: none are published). */
  events?: EventRecorder;
}

export interface CreateArtifactInput {
  storageType: StorageType;
  expires: string;
  contentType?: string;
  contentLength?: number;
  url?: string;
  artifact?: string;
  reason?: string;
  message?: string;
}

function detailsOf(input: CreateArtifactInput): Record<string, string> {
  switch (input.storageType) {
    case 'reference':
      return { url: input.url! };
    case 'link':
      return { artifact: input.artifact! };
    case 'error':
      return { reason: input.reason!, message: input.message! };
    case 'object':
      // Present once finished; until then it holds the upload's secret id.
      return { uploadId: slugid.nice() };
    default:
      return {};
  }
}

/** One upload is one Put Block of a blob, which Azure caps at 4000 MiB. */
export const MAX_UPLOAD_BYTES = 4000 * 1024 * 1024;
/** Schemes a reference may point at: readers follow it, and the dashboard shows it as a link. */
const REFERENCE_PROTOCOLS = ['http:', 'https:'];

/** Refuses what the schema allows but no reader could use. */
function checkContent(input: CreateArtifactInput): void {
  if (input.contentLength !== undefined && input.contentLength > MAX_UPLOAD_BYTES) {
    throw inputError(`contentLength ${input.contentLength} is larger than one upload can carry (${MAX_UPLOAD_BYTES} bytes); split the artifact`);
  }
  if (input.storageType === 'reference') {
    let protocol = '';
    try {
      protocol = new URL(input.url!).protocol;
    } catch {
      // reported below
    }
    if (!REFERENCE_PROTOCOLS.includes(protocol)) throw inputError(`reference artifacts must point at an http or https URL, not '${input.url}'`);
  }
}

/** Whether a repeated createArtifact may update the stored artifact (the real queue's rules). */
export function compatible(original: ArtifactRecord, next: ArtifactRecord): boolean {
  // Content types never change, but links have none of their own.
  if (next.storageType !== 'link' && original.contentType !== next.contentType) return false;
  // Expiry may be extended, never shortened.
  if (original.expires > next.expires) return false;
  if (original.storageType === next.storageType) {
    // Same type: same details, except that a reference may point somewhere else.
    return next.storageType === 'reference' || isDeepStrictEqual(original.details, next.details);
  }
  // The only type change allowed: a reference becomes a link.
  return original.storageType === 'reference' && next.storageType === 'link';
}

/** The stored record after a compatible repeat, or undefined when nothing needs writing. */
function merged(original: ArtifactRecord, next: ArtifactRecord): ArtifactRecord | undefined {
  const out: ArtifactRecord = {
    ...original,
    storageType: next.storageType,
    expires: next.expires,
    details: next.details,
    // A repeated s3 create hands out a new upload URL: its upload must be committed again.
    uncommitted: original.uncommitted || next.storageType === 's3',
  };
  const same =
    out.storageType === original.storageType &&
    out.expires === original.expires &&
    isDeepStrictEqual(out.details, original.details) &&
    out.uncommitted === original.uncommitted;
  return same ? undefined : out;
}

export async function createArtifact(
  d: CreateArtifactDeps,
  taskId: string,
  runId: number,
  name: string,
  input: CreateArtifactInput,
): Promise<Record<string, unknown>> {
  if (name.length > MAX_NAME_LENGTH) throw inputError(`artifact names are at most ${MAX_NAME_LENGTH} characters`);
  checkContent(input);
  const now = d.now();
  const expires = normalizeDate(input.expires, 'expires');
  if (new Date(expires).getTime() < now.getTime() - EXPIRES_PAST_TOLERANCE_MS) throw inputError('Expires must be in the future');

  const task = await d.tasks.load(taskId);
  if (!task) throw inputError('Task not found');
  const run = task.runs[runId];
  if (!run) throw inputError('Run not found');
  if (!run.workerGroup || !run.workerId) throw inputError('Run was not claimed by a worker and so no artifacts can exist');
  if (expires > task.definition.expires) {
    throw inputError(
      `Artifact expires (${expires}) after the task expiration ${task.definition.expires} (task.expires < expires) - this is not allowed, artifacts may not expire after the task they belong to expires`,
    );
  }
  if (run.state !== 'running') {
    const inGrace = run.state === 'exception' && !!run.resolved && new Date(run.resolved).getTime() > now.getTime() - EXCEPTION_UPLOAD_GRACE_MS;
    if (!inGrace) {
      throw conflict(
        `Artifacts cannot be created for a task after it is resolved, unless it is resolved 'exception', and even in this case only up to 25 min past resolution. ` +
          `This ensures that artifacts have been uploaded before a task is 'completed' and its output is consumed by a dependent task.\n\nRun ${runId} is ${run.state}.`,
      );
    }
  }

  const wanted: ArtifactRecord = {
    taskId,
    runId,
    name,
    storageType: input.storageType,
    contentType: input.contentType ?? DEFAULT_CONTENT_TYPE,
    expires,
    details: detailsOf(input),
    uncommitted: input.storageType === 's3',
  };
  if (input.contentLength !== undefined) wanted.contentLength = input.contentLength;

  // The run is marked before its first upload row exists, so the run's resolution knows to commit it.
  if (input.storageType === 's3' && !run.uploads) await execute(d, taskId, (t) => markUploads(t, { runId }), task);
  // The index row first: a crash after it leaves a harmless hint, never an artifact that never expires.
  await noteExpiry(d.storage, runKey(taskId, runId), expires, now);
  // artifact-created is not a task write: its sweep trigger carries the event and is put before the
  // row, and the reaper delivers it if the row exists, so a crash after the row never loses it.
  const announce = await d.events?.prepareArtifact(task, runId, wanted, isPresent(wanted));
  const stored = await save(new ArtifactStore(d.storage), wanted);
  await d.events?.delivered(announce);

  if (stored.storageType === 'object') {
    if (!stored.details.uploadId) throw conflict(`Artifact ${name} is already finished`);
    const { projectId } = task.definition;
    const objectName = objectNameFor(taskId, runId, name);
    // Reserved after the artifact row, so a retry after a crash finds the row and reuses its uploadId.
    const object = await reserveUpload(d, objectName, projectId, stored.details.uploadId, stored.expires);
    const { workerGroup, workerId } = run as { workerGroup: string; workerId: string };
    return {
      storageType: 'object',
      name: objectName,
      projectId,
      uploadId: object.uploadId,
      expires: object.expires,
      credentials: uploadCredentials(d.clients.issuer, { taskId, runId, name, projectId, expires: object.expires, workerGroup, workerId }, now),
    };
  }
  if (stored.storageType !== 's3') return { storageType: stored.storageType };
  return {
    storageType: 's3',
    contentType: stored.contentType,
    expires: new Date(now.getTime() + PUT_URL_TTL_MS).toJSON(),
    putUrl: new ArtifactBlobs(d.storage).putUrl(blobNameFor(taskId, runId, name), now),
  };
}

/** Inserts the artifact, or applies a compatible repeat to the stored one (409 otherwise). */
async function save(store: ArtifactStore, wanted: ArtifactRecord): Promise<ArtifactRecord> {
  const stored = await store.modify(
    wanted,
    (original) => {
      if (!original) return wanted; // new, or deleted meanwhile (expired): insert again
      // A repeat of an unfinished object artifact keeps its upload (and so may retry after a lost reply).
      const next =
        original.storageType === 'object' && original.details.uploadId && wanted.storageType === 'object' ? { ...wanted, details: original.details } : wanted;
      if (!compatible(original, next)) {
        throw conflict(
          `Artifact already exists with different properties, and none of the allowed exceptions apply: ` +
            JSON.stringify({ storageType: original.storageType, contentType: original.contentType, expires: original.expires }),
        );
      }
      return merged(original, next) ?? UNCHANGED;
    },
    'absent',
  );
  return stored!;
}
