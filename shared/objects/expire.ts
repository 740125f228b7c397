/**
 * Expiring one object (called from the artifact expiry index, which also indexes objects): its
 * data first, then its row, so a crash in between leaves a row the next pass finds again.
 */
import type { Storage } from '../storage/storage';
import { ObjectBlobs } from '../storage/object-blobs';
import { ObjectStore, isFinished } from './store';

/**
 * Deletes the object if it is past `expires`, or is an upload never finished past `uploadExpires`;
 * returns 1 if it was deleted, else 0 (a stale index row).
 */
export async function expireObject(storage: Storage, name: string, nowIso: string): Promise<number> {
  const store = new ObjectStore(storage);
  const o = await store.get(name);
  const due = !!o && (o.expires < nowIso || (!isFinished(o) && o.uploadExpires !== '' && o.uploadExpires < nowIso));
  if (!o || !due) return 0;
  await new ObjectBlobs(storage).delete(name, o.stagingId);
  await store.delete(o);
  return 1;
}
