/**
 * Each log entry's MessagePack encoding, made once and reused: the leader writes an entry to its own log and
 * sends it to every follower (often more than once, on retries), and none of those should pay for encoding it again.
 *
 * The bytes are kept in a WeakMap keyed by the entry object, so they live exactly as long as the entry does (in
 * the in-memory log, until compaction) and nothing about the Entry type changes. Entries are never mutated after
 * they are created (the core appends and slices, it does not edit), which is what makes the cached bytes stay
 * equal to `encodeValue(entry)`.
 *
 * A MessagePack array is its header followed by its elements' encodings, so a block of entries (storage) or the
 * `entries` field of an append message (transport) can be assembled from the cached bytes by copying.
 *
 * Why: an entry is encoded once instead of once per follower frame and once for the block; most of an encoding is
 * copying the data, which assembling still does, so the gain is modest (bench-micro) but it is per entry per
 * follower.
 */
import type { Entry } from '../types.js';
import { encodeValue } from './msgpack.js';

const cache = new WeakMap<Entry, Uint8Array>();

/**
 * Encodings larger than this are not kept: for them encoding is mostly copying the data, which the cache would
 * not save, while keeping them would double the memory of a log of large commands.
 */
export const MAX_CACHED_ENTRY_BYTES = 16 * 1024;

/**
 * Kept encodings are copied into slabs of this size, one after another. A fresh ArrayBuffer per entry costs more
 * than encoding it; keeping msgpackr's result (a view into its shared, possibly huge, output buffer) would keep
 * that buffer alive. Entries leave the log in index order, so a slab is freed once its last entry is compacted:
 * the memory kept is about the live encodings plus one slab.
 */
const SLAB_BYTES = 64 * 1024;
let slab = new Uint8Array(0);
let slabUsed = 0;

function keep(bytes: Uint8Array): Uint8Array {
  if (slabUsed + bytes.byteLength > slab.byteLength) {
    slab = new Uint8Array(SLAB_BYTES);
    slabUsed = 0;
  }
  const kept = slab.subarray(slabUsed, slabUsed + bytes.byteLength);
  kept.set(bytes);
  slabUsed += bytes.byteLength;
  return kept;
}

/** The encoding of `entry`, exactly `encodeValue(entry)`, made on first use and kept (up to MAX_CACHED_ENTRY_BYTES). */
export function entryBytes(entry: Entry): Uint8Array {
  const cached = cache.get(entry);
  if (cached !== undefined) return cached;
  const bytes = encodeValue(entry);
  if (bytes.byteLength > MAX_CACHED_ENTRY_BYTES) return bytes;
  const kept = keep(bytes);
  cache.set(entry, kept);
  return kept;
}

/** Bytes of the MessagePack header of an array of `length` elements. */
function arrayHeaderBytes(length: number): number {
  return length < 16 ? 1 : length < 0x10000 ? 3 : 5;
}

/** Writes the MessagePack header of an array of `length` elements at `offset`; returns the offset after it. */
function writeArrayHeader(target: Uint8Array, offset: number, length: number): number {
  if (length < 16) {
    target[offset] = 0x90 | length;
    return offset + 1;
  }
  const view = new DataView(target.buffer, target.byteOffset, target.byteLength);
  if (length < 0x10000) {
    target[offset] = 0xdc;
    view.setUint16(offset + 1, length);
    return offset + 3;
  }
  target[offset] = 0xdd;
  view.setUint32(offset + 1, length);
  return offset + 5;
}

/** The encoded size of `entries` as one MessagePack array, and the element encodings it is made of. */
export function entryArrayParts(entries: readonly Entry[]): { parts: Uint8Array[]; byteLength: number } {
  const parts = entries.map(entryBytes);
  let byteLength = arrayHeaderBytes(entries.length);
  for (const part of parts) byteLength += part.byteLength;
  return { parts, byteLength };
}

/** Writes an array made of `parts` at `offset`; returns the offset after it. */
export function writeEntryArray(target: Uint8Array, offset: number, parts: readonly Uint8Array[]): number {
  let at = writeArrayHeader(target, offset, parts.length);
  for (const part of parts) {
    target.set(part, at);
    at += part.byteLength;
  }
  return at;
}

/**
 * `entries` as one MessagePack array, exactly `encodeValue(entries)`: assembled from the kept encodings when every
 * entry has one (a leader's entries, once a frame has carried them), else encoded in one call without keeping
 * anything (a follower's entries, which it will most likely never send: one array is cheaper to encode than
 * its entries one by one).
 */
export function encodeEntries(entries: readonly Entry[]): Buffer {
  for (const entry of entries) if (!cache.has(entry)) return encodeValue(entries);
  const { parts, byteLength } = entryArrayParts(entries);
  const out = Buffer.allocUnsafe(byteLength);
  writeEntryArray(out, 0, parts);
  return out;
}
