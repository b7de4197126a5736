/**
 * How one record sits in a segment file: [u32 length][u32 crc32 of the payload][payload], big-endian. The checksum
 * is what lets `open` tell a torn tail (a crash mid-write) from a valid record.
 */
import { crc32 } from 'node:zlib';

export const HEADER_BYTES = 8;

export function encodeRecord(payload: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(HEADER_BYTES + payload.length);
  out.writeUInt32BE(payload.length, 0);
  out.writeUInt32BE(crc32(payload), 4);
  out.set(payload, HEADER_BYTES);
  return out;
}

export interface ScannedRecord {
  /** Byte position of the record's header within the scanned buffer. */
  position: number;
  payload: Buffer;
}

/**
 * The complete, valid records at the start of `buf`, stopping at the first incomplete or corrupt one, at `max`
 * records, or when a record would be longer than `maxPayload` (a garbage length). `end` is the byte position just
 * after the last valid record; `corrupt` says the stop was a bad checksum or length rather than a short buffer.
 */
export function scanRecords(
  buf: Buffer,
  max = Infinity,
  maxPayload = Infinity,
): { records: ScannedRecord[]; end: number; corrupt: boolean } {
  const records: ScannedRecord[] = [];
  let pos = 0;
  while (records.length < max && pos + HEADER_BYTES <= buf.length) {
    const length = buf.readUInt32BE(pos);
    if (length > maxPayload) return { records, end: pos, corrupt: true };
    if (pos + HEADER_BYTES + length > buf.length) break;
    const payload = buf.subarray(pos + HEADER_BYTES, pos + HEADER_BYTES + length);
    if (crc32(payload) !== buf.readUInt32BE(pos + 4)) return { records, end: pos, corrupt: true };
    records.push({ position: pos, payload });
    pos += HEADER_BYTES + length;
  }
  return { records, end: pos, corrupt: false };
}
