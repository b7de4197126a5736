/**
 * Clicks as they travel through the stream. A record is either one click, the msgpack array [producer, seq,
 * short_code, timestamp, referer, country, user_agent], or (what app servers send) a block of clicks,
 * [producer, firstSeq, [[short_code, timestamp, referer, country, user_agent], ...]], whose i-th click has seq
 * firstSeq + i. `producer` (one id per emitter and partition) and `seq` let the analytics consumer drop the
 * duplicates that at-least-once delivery can create. A block costs the stream one record (one checksum, one
 * length, one entry in a fetch) and the producer one msgpack call, whatever the number of clicks in it; the
 * producer id is written once per block instead of once per click.
 */
import { pack, unpack } from 'msgpackr';
import type { ClickRecord } from './record.js';

export interface StreamedClick extends ClickRecord {
  producer: string;
  seq: number;
}

/** Long free-text headers are cut, so one odd client cannot bloat the stream. */
export const MAX_TEXT = 512;

const text = (value: string | null): string | null => (value === null ? null : value.slice(0, MAX_TEXT));

export function encodeClick(producer: string, seq: number, r: ClickRecord): Uint8Array {
  return pack([producer, seq, r.short_code, r.timestamp, text(r.referer), r.country, text(r.user_agent)]);
}

/** A block of clicks, the i-th with seq firstSeq + i (records must be non-empty). */
export function encodeClicks(producer: string, firstSeq: number, records: readonly ClickRecord[]): Uint8Array {
  const rows = new Array<unknown[]>(records.length);
  for (let i = 0; i < records.length; i++) {
    const r = records[i]!;
    rows[i] = [r.short_code, r.timestamp, text(r.referer), r.country, text(r.user_agent)];
  }
  return pack([producer, firstSeq, rows]);
}

/** The click, or null when the bytes are not one single click (see decodeRecord for blocks). */
export function decodeClick(bytes: Uint8Array): StreamedClick | null {
  const clicks = decodeRecord(bytes);
  return clicks.length === 1 && clicks[0] !== null && !isBlock(bytes) ? clicks[0] : null;
}

/**
 * The clicks of one stream record: one for a single click, one per row for a block; null stands for a click that
 * is not well formed (a whole record that is not one gives [null]). Skipped and counted by the consumer, never fatal.
 */
export function decodeRecord(bytes: Uint8Array): Array<StreamedClick | null> {
  let value: unknown;
  try {
    value = unpack(bytes);
  } catch {
    return [null];
  }
  if (!Array.isArray(value)) return [null];
  if (value.length === 7) {
    const [producer, seq, ...row] = value as unknown[];
    if (typeof producer !== 'string' || !Number.isSafeInteger(seq)) return [null];
    return [clickOf(producer, seq as number, row)];
  }
  const [producer, firstSeq, rows] = value as unknown[];
  if (
    value.length !== 3 ||
    typeof producer !== 'string' ||
    !Number.isSafeInteger(firstSeq) ||
    !Array.isArray(rows) ||
    rows.length === 0
  )
    return [null];
  return rows.map((row: unknown, i) => (Array.isArray(row) ? clickOf(producer, (firstSeq as number) + i, row) : null));
}

function isBlock(bytes: Uint8Array): boolean {
  // A msgpack fixarray header: 0x93 is an array of 3 (a block), 0x97 an array of 7 (one click).
  return bytes[0] === 0x93;
}

const optionalString = (v: unknown) => v === null || typeof v === 'string';

function clickOf(producer: string, seq: number, row: unknown[]): StreamedClick | null {
  if (row.length !== 5) return null;
  const [short_code, timestamp, referer, country, user_agent] = row;
  if (typeof short_code !== 'string' || !Number.isFinite(timestamp)) return null;
  if (!optionalString(referer) || !optionalString(country) || !optionalString(user_agent)) return null;
  return {
    producer,
    seq,
    short_code,
    timestamp: timestamp as number,
    referer: referer as string | null,
    country: country as string | null,
    user_agent: user_agent as string | null,
  };
}
