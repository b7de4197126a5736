/**
 * The simulator's randomness: the project's seeded PRNG (src/prng.ts) with the helpers a simulation needs.
 * Nothing in sim/ may use Math.random: every choice flows from the run's seed, so a seed replays exactly.
 */
import { Prng } from '../src/prng.js';

export class Random extends Prng {
  /** A uniform integer in [lo, hi] (inclusive). */
  int(lo: number, hi: number): number {
    return lo + this.below(hi - lo + 1);
  }

  /** A uniform float in [lo, hi). */
  float(lo: number, hi: number): number {
    return lo + this.next() * (hi - lo);
  }

  chance(p: number): boolean {
    return p > 0 && this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError('pick from an empty list');
    return items[this.below(items.length)]!;
  }

  shuffle<T>(items: readonly T[]): T[] {
    const out = items.slice();
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.below(i + 1);
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  }

  /** An independent stream, so that one part of a run drawing more numbers does not shift another's. */
  fork(): Random {
    return new Random((this.nextUint32() ^ 0x5bd1e995) >>> 0);
  }
}
