/**
 * The deployment-wide `Indexes latest` and `Indexes resolved` partitions, written by versions
 * before the read models moved into each task queue's partition, are read by nothing any more.
 * Each process looks once at start whether rows are left there and, while some are, every reaper
 * pass deletes a bounded share; once they are gone this costs nothing.
 */
import { Storage, deleteRows } from '../storage/storage';

/** The partitions of the Indexes table that older versions wrote and nothing reads. */
export const LEGACY_INDEX_PARTITIONS = ['latest', 'resolved'];
/** Rows deleted per reaper pass (ten transactions), so a pass stays short however many are left. */
export const LEGACY_ROWS_PER_PASS = 1000;

export class LegacyIndexRows {
  private left: string[] = [];

  constructor(private readonly storage: Storage) {}

  private get table() {
    return this.storage.table('Indexes');
  }

  /** Which legacy partitions still hold rows (one short read each, once per process). */
  async start(): Promise<void> {
    const found = await Promise.all(
      LEGACY_INDEX_PARTITIONS.map(async (pk) => {
        const page = await this.table.page({ partitionKey: pk, select: ['RowKey'] }, 1);
        // Azure may answer an empty page with a continuation (a time slice): rows may follow.
        return page.items.length > 0 || page.continuation !== undefined;
      }),
    );
    this.left = LEGACY_INDEX_PARTITIONS.filter((_, i) => found[i]);
  }

  /** One reaper pass's share: deletes up to LEGACY_ROWS_PER_PASS rows; how many it deleted. */
  async sweep(): Promise<number> {
    const pk = this.left[0];
    if (pk === undefined) return 0;
    const page = await this.table.page({ partitionKey: pk, select: ['RowKey'] }, LEGACY_ROWS_PER_PASS);
    if (!page.items.length) {
      if (page.continuation === undefined) this.left.shift();
      return 0;
    }
    await deleteRows(
      this.table,
      pk,
      page.items.map((r) => r.rowKey),
    );
    return page.items.length;
  }
}
