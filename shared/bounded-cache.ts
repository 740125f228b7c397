/**
 * The one in-process cache: at most `max` entries, the least recently set going first when a new
 * one would pass it (a Map keeps insertion order, and `set` moves a key to the end), and
 * optionally a time to live after which `get` no longer answers an entry. Forgetting an entry must
 * only ever cost a storage call, never correctness: every cache here is a shortcut.
 */
export class BoundedCache<K, V> {
  private readonly entries = new Map<K, { at: number; value: V }>();

  constructor(
    readonly max: number,
    private readonly opts: { ttlMs?: number; now?: () => number } = {},
  ) {}

  private now(): number {
    return (this.opts.now ?? Date.now)();
  }

  /** The entry's value, unless missing or older than the time to live. */
  get(key: K): V | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (this.opts.ttlMs !== undefined && this.now() - e.at >= this.opts.ttlMs) {
      this.entries.delete(key);
      return undefined;
    }
    return e.value;
  }

  has(key: K): boolean {
    return this.get(key) !== undefined;
  }

  /** Sets the entry (now the newest), evicting the oldest past `max`. */
  set(key: K, value: V): this {
    this.entries.delete(key);
    this.entries.set(key, { at: this.now(), value });
    if (this.entries.size > this.max) this.entries.delete(this.entries.keys().next().value as K);
    return this;
  }

  delete(key: K): boolean {
    return this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }
}
