/**
 * The document's runs in order, kept in chunks of at most `max` runs, each knowing its visible length, so an
 * insert or split moves at most MAX references (a flat array moved tens of thousands per edit on the large
 * traces) and finding a visible index skips whole chunks.
 */
/** Default chunk capacity; tests use tiny chunks so chunk splits happen on small documents. */
const DEFAULT_CHUNK = 128;

export interface Entry {
  chunk: Chunk | null;
  /** Visible characters this entry contributes (0 for a tombstone). */
  vis(): number;
}

export class Chunk {
  entries: Entry[] = [];
  vis = 0;
  constructor(public order: number) {}
}

export class ChunkList<T extends Entry> {
  readonly chunks: Chunk[] = [];
  constructor(private readonly max: number = DEFAULT_CHUNK) {
    if (!Number.isInteger(max) || max < 2 || max > 4096)
      throw new RangeError('chunk size must be an integer in 2..4096');
  }

  get size(): number {
    let n = 0;
    for (const c of this.chunks) n += c.entries.length;
    return n;
  }

  first(): T | null {
    return (this.chunks[0]?.entries[0] as T | undefined) ?? null;
  }

  next(e: T): T | null {
    const c = e.chunk!;
    const i = c.entries.indexOf(e);
    if (i + 1 < c.entries.length) return c.entries[i + 1] as T;
    return (this.chunks[c.order + 1]?.entries[0] as T | undefined) ?? null;
  }

  prev(e: T): T | null {
    const c = e.chunk!;
    const i = c.entries.indexOf(e);
    if (i > 0) return c.entries[i - 1] as T;
    const p = this.chunks[c.order - 1];
    return p !== undefined ? (p.entries[p.entries.length - 1] as T) : null;
  }

  /** Removes e (an empty chunk goes too, which counts as a split for cursor caches). */
  remove(e: T): void {
    const c = e.chunk!;
    c.entries.splice(c.entries.indexOf(e), 1);
    c.vis -= e.vis();
    e.chunk = null;
    if (c.entries.length === 0) {
      this.chunks.splice(c.order, 1);
      for (let i = c.order; i < this.chunks.length; i++) this.chunks[i]!.order = i;
      this.splits++;
    }
  }

  /** A number that orders entries by position (valid until the next insert). */
  key(e: T): number {
    const c = e.chunk!;
    return c.order * 8192 + c.entries.indexOf(e);
  }

  /** Inserts e after `prev` (null: at the start). */
  insertAfter(prev: T | null, e: T): void {
    let c: Chunk;
    let at: number;
    if (prev === null) {
      if (this.chunks.length === 0) this.chunks.push(new Chunk(0));
      c = this.chunks[0]!;
      at = 0;
    } else {
      c = prev.chunk!;
      at = c.entries.indexOf(prev) + 1;
    }
    c.entries.splice(at, 0, e);
    e.chunk = c;
    c.vis += e.vis();
    if (c.entries.length > this.max) this.splitChunk(c);
  }

  /** Call after an entry's visible length changed by delta. */
  changed(e: T, delta: number): void {
    e.chunk!.vis += delta;
  }

  /** Split count: lets a cursor cache know chunk orders moved. */
  splits = 0;

  private splitChunk(c: Chunk): void {
    const half = c.entries.length >> 1;
    const n = new Chunk(c.order + 1);
    n.entries = c.entries.splice(half);
    for (const e of n.entries) {
      e.chunk = n;
      const v = e.vis();
      n.vis += v;
      c.vis -= v;
    }
    this.chunks.splice(c.order + 1, 0, n);
    for (let i = c.order + 2; i < this.chunks.length; i++) this.chunks[i]!.order = i;
    this.splits++;
  }

  *[Symbol.iterator](): IterableIterator<T> {
    for (const c of this.chunks) for (const e of c.entries) yield e as T;
  }
}
