/**
 * The set of already-linearized operations of one partition: a bitset that
 * also keeps a 64-bit (two 32-bit halves) Zobrist hash up to date, so the
 * cache can find candidate entries in O(1) instead of hashing n/32 words at
 * every step.
 */
export class LinearizedSet {
  readonly words: Uint32Array;
  private low = 0;
  private high = 0;

  constructor(size: number) {
    this.words = new Uint32Array(Math.max(1, Math.ceil(size / 32)));
  }

  /** Adds or removes `index` (toggling keeps the hash update a plain XOR). */
  toggle(index: number): void {
    this.words[index >>> 5]! ^= 1 << (index & 31);
    this.low = (this.low ^ mix32(2 * index)) >>> 0;
    this.high = (this.high ^ mix32(2 * index + 1)) >>> 0;
  }

  get hashLow(): number {
    return this.low;
  }

  get hashHigh(): number {
    return this.high;
  }

  copyTo(target: Uint32Array, offset: number): void {
    target.set(this.words, offset);
  }

  equalsAt(source: Uint32Array, offset: number): boolean {
    const words = this.words;
    for (let i = 0; i < words.length; i++) if (words[i] !== source[offset + i]) return false;
    return true;
  }
}

/**
 * A fixed pseudo-random 32-bit value per integer (murmur3's finaliser), so
 * hashes are deterministic across runs without a stored table.
 */
export function mix32(value: number): number {
  let h = (value + 0x9e3779b9) | 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
