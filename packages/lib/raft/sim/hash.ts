/** Small non-cryptographic hashes (FNV-1a, 32 bits) for the invariant checker's fingerprints of log entries. */
import type { Entry } from '../src/types.js';

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** Mix one number (any finite double; integers up to 2^53 exactly) into a hash. */
export function mixNumber(h: number, x: number): number {
  const lo = x >>> 0;
  const hi = Math.floor(x / 4294967296) >>> 0;
  h = Math.imul(h ^ (lo & 0xffff), FNV_PRIME);
  h = Math.imul(h ^ (lo >>> 16), FNV_PRIME);
  h = Math.imul(h ^ (hi & 0xffff), FNV_PRIME);
  h = Math.imul(h ^ (hi >>> 16), FNV_PRIME);
  return h >>> 0;
}

function mixBytes(h: number, bytes: Uint8Array): number {
  for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i]!, FNV_PRIME);
  return h >>> 0;
}

export function mixString(h: number, s: string): number {
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), FNV_PRIME);
  return h >>> 0;
}

/** A fingerprint of everything an entry carries (index, term, time, kind, payload). */
export function entryHash(e: Entry): number {
  let h = mixNumber(mixNumber(mixNumber(FNV_OFFSET, e.index), e.term), e.time);
  switch (e.kind) {
    case 'command':
      return mixBytes(mixString(h, 'c'), e.data);
    case 'noop':
      return mixString(h, 'n');
    case 'config':
      h = mixString(h, `g${e.change.type}:${e.change.node}`);
      return mixString(h, `${e.config.voters.join(',')}|${e.config.learners.join(',')}`);
  }
}

/** The hash of a log prefix ending in an entry whose own hash is `entry`, given the hash of the prefix before. */
export function chain(previous: number, entry: number): number {
  return mixNumber(mixNumber(FNV_OFFSET, previous), entry);
}

export const HASH_SEED = FNV_OFFSET;
