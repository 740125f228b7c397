/**
 * Expiring one object (called from the artifact expiry index, which also indexes objects): its
 * data first, then its row, so a crash in between leaves a row the next pass finds again.
 */
import type { Storage } from '../storage/storage';
import { ObjectBlobs } from '../storage/object-blobs';
import { ObjectStore } from './store';

/** Deletes the object if it is past `nowIso`; returns 1 if it was deleted, else 0 (a stale index row). */
export async function expireObject(storage: Storage, name: string, nowIso: string): Promise<number> {
  const store = new ObjectStore(storage);
  const o = await store.get(name);
  if (!o || o.expires >= nowIso) return 0;
  await new ObjectBlobs(storage).delete(name);
  await store.delete(o);
  return 1;
}
