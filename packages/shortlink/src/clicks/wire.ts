/**
 * A click as it travels through the stream: a msgpack array [producer, seq, short_code, timestamp, referer,
 * country, user_agent]. `producer` (one id per emitter process) and `seq` (its count of emitted clicks) let the
 * analytics consumer drop the duplicates that at-least-once delivery can create.
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

/** The click, or null when the bytes are not one (skipped and counted by the consumer, never fatal). */
export function decodeClick(bytes: Uint8Array): StreamedClick | null {
  let value: unknown;
  try {
    value = unpack(bytes);
  } catch {
    return null;
  }
  if (!Array.isArray(value) || value.length !== 7) return null;
  const [producer, seq, short_code, timestamp, referer, country, user_agent] = value as unknown[];
  const optionalString = (v: unknown) => v === null || typeof v === 'string';
  if (typeof producer !== 'string' || !Number.isSafeInteger(seq) || typeof short_code !== 'string' || !Number.isFinite(timestamp)) return null;
  if (!optionalString(referer) || !optionalString(country) || !optionalString(user_agent)) return null;
  return {
    producer,
    seq: seq as number,
    short_code,
    timestamp: timestamp as number,
    referer: referer as string | null,
    country: country as string | null,
    user_agent: user_agent as string | null,
  };
}
