/**
 * Reading artifacts: following links (authorizing every name on the way), expiry, and what each
 * storage type answers: a short-lived read URL for s3, the stored URL for reference, the error,
 * and for object the object's name with credentials to download just it.
 */
import type { Storage } from '../storage/storage';
import { ApiError, inputError, notFound } from '../errors';
import { ArtifactRecord, isExpired, isPresent, objectNameFor } from './model';
import { ArtifactStore } from './store';
import { ArtifactBlobs, blobNameFor } from './blobs';
import { commitIfPending } from './commit';
import { downloadCredentials, Issuer } from './object';
import type { Credentials } from '../auth/certificate';

/** Links are followed at most this many hops (a run has finitely many artifacts anyway). */
export const MAX_LINK_HOPS = 32;

export interface ReadDeps {
  storage: Storage;
  now: () => Date;
  /** Signs object artifacts' download credentials. */
  clients: { issuer: Issuer };
}

/** Checks `queue:get-artifact:<name>` for every name in the list (the route's template). */
export type AuthorizeNames = (names: string[]) => Promise<void>;

/**
 * The artifact a name resolves to after following links. Each name is authorized before its row
 * is read, so a caller learns nothing about artifacts it may not read.
 */
export async function resolveArtifact(d: ReadDeps, taskId: string, runId: number, name: string, authorize: AuthorizeNames): Promise<ArtifactRecord> {
  const store = new ArtifactStore(d.storage);
  const names: string[] = [];
  for (;;) {
    names.push(name);
    await authorize(names);
    const a = await store.get(taskId, runId, name);
    if (!a || !isPresent(a)) throw notFound('Artifact not found');
    if (isExpired(a, d.now())) throw new ApiError('ResourceExpired', 'Artifact expired');
    if (a.storageType !== 'link') return a;
    const target = a.details.artifact;
    if (names.includes(target)) throw inputError('Artifact leads to a link cycle');
    if (names.length >= MAX_LINK_HOPS) throw inputError(`Artifact links are followed at most ${MAX_LINK_HOPS} hops`);
    name = target;
  }
}

export type Content =
  | { storageType: 's3'; url: string }
  | { storageType: 'object'; name: string; credentials: Credentials }
  | { storageType: 'reference'; url: string }
  | { storageType: 'error'; reason: string; message: string };

/** What `artifact()` returns; for s3 this commits a waiting upload first. */
export async function contentOf(d: ReadDeps, a: ArtifactRecord): Promise<Content> {
  switch (a.storageType) {
    case 's3':
      await commitIfPending(d.storage, a);
      return { storageType: 's3', url: new ArtifactBlobs(d.storage).getUrl(blobNameFor(a.taskId, a.runId, a.name), d.now()) };
    case 'object':
      return { storageType: 'object', name: objectNameFor(a.taskId, a.runId, a.name), credentials: downloadCredentials(d.clients.issuer, a, d.now()) };
    case 'reference':
      return { storageType: 'reference', url: a.details.url };
    case 'error':
      return { storageType: 'error', reason: a.details.reason, message: a.details.message };
    default:
      throw new Error(`unexpected artifact storage type ${a.storageType}`);
  }
}
