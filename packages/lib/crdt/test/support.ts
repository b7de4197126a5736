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
  const d = new Doc(clientId, { chunkSize: 2 + (clientId.length % 3) });
  d.apply(ops);
  return d;
}

export const view = (d: Doc): string => JSON.stringify(d.spans());

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';

/** ../shared/data/editing-traces beside the repository, found from this compiled file (dist/test/ → package root). */
const packageRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const tracesDir = resolve(packageRoot, '../../../../shared/data/editing-traces');

export interface Trace {
  readonly endContent: string;
  readonly txns: readonly { readonly patches: readonly (readonly [number, number, string])[] }[];
}

/** The gzipped traces (name, parsed); throws with the path when the shared data is missing. */
export function loadTraces(): { name: string; trace: Trace }[] {
  if (!existsSync(tracesDir))
    throw new Error(`editing traces not found at ${tracesDir} (expected ../shared/data beside the repository)`);
  return readdirSync(tracesDir)
    .filter((f) => f.endsWith('.json.gz'))
    .sort()
    .map((f) => ({
      name: f.replace(/\.json\.gz$/, ''),
      trace: JSON.parse(gunzipSync(readFileSync(join(tracesDir, f))).toString('utf8')) as Trace,
    }));
}

/** Replays a trace as one user's local edits (positions are code points; the traces hold no astral characters). */
export function replayTrace(trace: Trace, clientId = 'author', chunkSize?: number): Doc {
  const d = chunkSize === undefined ? new Doc(clientId) : new Doc(clientId, { chunkSize });
  for (const { patches } of trace.txns) {
    for (const [pos, del, ins] of patches) {
      if (del > 0) d.localDelete(pos, del);
      if (ins.length > 0) d.localInsert(pos, ins);
    }
  }
  return d;
}
