/**
 * The one msgpackr configuration shared by storage and transports, so bytes written by one can be read by the other.
 *
 * Plain MessagePack (no records, no msgpackr extensions for typed arrays): binary fields travel as `bin` and come
 * back as Buffers that alias the input. Callers turn them into owned `Uint8Array`s with {@link ownedBytes}; the
 * validators in `parse.ts` do that for every binary field of Entry, Snapshot and Message.
 */
import { Packr } from 'msgpackr';

const packr = new Packr({ useRecords: false, mapsAsObjects: true });

/** Encodes a plain-data value. The returned Buffer is not reused by later calls and may be retained. */
export function encodeValue(value: unknown): Buffer {
  return packr.pack(value);
}

/**
 * Decodes exactly one value occupying all of `bytes`. Throws on malformed or trailing data.
 * Binary fields of the result may alias `bytes`.
 */
export function decodeValue(bytes: Uint8Array): unknown {
  return packr.unpack(bytes);
}

/**
 * A plain `Uint8Array` (not a Buffer) holding a private copy of `bytes`, sized exactly: it neither aliases a
 * larger receive buffer (which it would keep alive) nor changes when the source is reused.
 */
export function ownedBytes(bytes: Uint8Array): Uint8Array {
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return copy;
}
