/** Removals between two rebuilds of a {@link ChurnMap}. */
const REBUILD_AFTER_REMOVALS = 512;

/**
 * A map by string key for entries that come and go once per step (a scheduler's held rows).
 * A plain `Map` that lives long is in V8's old generation, and so is every table it rehashes
 * into: one entry added and removed per step rehashed it every few steps, straight into old
 * space, which only a full collection reclaims (docs/performance.md "Allocation per step").
 * Here a removal only marks its entry (`null`), and after REBUILD_AFTER_REMOVALS of them the
 * live entries move to a new `Map`, young again: the tables its growth allocates die young.
 * Values are objects; `null` is reserved for removed entries.
 */
export class ChurnMap<V extends object> {
  private map = new Map<string, V | null>();
  private live = 0;
  private removed = 0;

  /** Live entries. */
  get size(): number {
    return this.live;
  }

  get(key: string): V | undefined {
    return this.map.get(key) ?? undefined;
  }

  has(key: string): boolean {
    return (this.map.get(key) ?? null) !== null;
  }

  set(key: string, value: V): void {
    const previous = this.map.get(key);
    if (previous === null) {
      // Re-added (rare: a row claimed again): at the end, as a Map would order it.
      this.map.delete(key);
      this.removed--;
    }
    if (previous === undefined || previous === null) this.live++;
    this.map.set(key, value);
  }

  /** Removes `key`'s entry; false when it had none. */
  delete(key: string): boolean {
    if ((this.map.get(key) ?? null) === null) return false;
    this.map.set(key, null);
    this.live--;
    if (++this.removed >= REBUILD_AFTER_REMOVALS) this.rebuild();
    return true;
  }

  /** The live values, in insertion order. */
  *values(): IterableIterator<V> {
    for (const value of this.map.values()) if (value !== null) yield value;
  }

  private rebuild(): void {
    const next = new Map<string, V | null>();
    this.map.forEach((value, key) => {
      if (value !== null) next.set(key, value);
    });
    this.map = next;
    this.removed = 0;
  }
}
