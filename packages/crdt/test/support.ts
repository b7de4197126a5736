import { Doc, type Op } from '../src/index.js';

/** A small deterministic PRNG (mulberry32) so a fast-check seed fixes every shuffle. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function shuffle<T>(xs: readonly T[], seed: number): T[] {
  const out = [...xs];
  const r = rng(seed);
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** A fresh replica that receives `ops` in the given order. */
export function replay(ops: readonly Op[], clientId = 'observer'): Doc {
  const d = new Doc(clientId);
  d.apply(ops);
  return d;
}

export const view = (d: Doc): string => JSON.stringify(d.spans());
