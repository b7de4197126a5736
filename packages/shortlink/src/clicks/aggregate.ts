/**
 * The pure part of the analytics consumer: which counters a batch of clicks increments, after dropping
 * duplicates (a producer's seq at or below the last one counted) and clicks that are not well formed.
 *
 * Counter keys (LevelDB, ordered so one link's counters are one contiguous range):
 *   s!<code>!t             total
 *   s!<code>!d!<YYYY-MM-DD> per UTC day
 *   s!<code>!c!<CC>         per country ("unknown" when none)
 *   s!<code>!r!<host>       per referer host ("direct" when none, "invalid" when unparsable, "other" past the cap)
 */
import type { StreamedClick } from './wire.js';

export const CODE = /^[A-Za-z0-9_-]{1,64}$/;

export interface BatchAggregate {
  /** Counter key -> increment. */
  counts: Map<string, number>;
  /** Producer -> highest seq counted in this batch. */
  seqs: Map<string, number>;
  accepted: number;
  duplicates: number;
  invalid: number;
}

export const statPrefix = (code: string): string => `s!${code}!`;

export function aggregate(clicks: Array<StreamedClick | null>, lastSeq: (producer: string) => number | undefined): BatchAggregate {
  const out: BatchAggregate = { counts: new Map(), seqs: new Map(), accepted: 0, duplicates: 0, invalid: 0 };
  const add = (key: string) => out.counts.set(key, (out.counts.get(key) ?? 0) + 1);
  for (const click of clicks) {
    if (click === null || !CODE.test(click.short_code)) {
      out.invalid++;
      continue;
    }
    const seen = out.seqs.get(click.producer) ?? lastSeq(click.producer) ?? -1;
    if (click.seq <= seen) {
      out.duplicates++;
      continue;
    }
    out.seqs.set(click.producer, click.seq);
    out.accepted++;
    const prefix = statPrefix(click.short_code);
    add(`${prefix}t`);
    add(`${prefix}d!${dayOf(click.timestamp)}`);
    add(`${prefix}c!${countryKey(click.country)}`);
    add(`${prefix}r!${refererHost(click.referer)}`);
  }
  return out;
}

const DAY_MS = 86_400_000;
/** The Date range (ECMAScript): beyond it a timestamp has no day. */
const MAX_DATE_MS = 8.64e15;
/** The last day formatted: a batch's clicks are nearly all of one day, and formatting a date costs more than the rest. */
let lastDay = { index: NaN, text: '' };

/** UTC day of a millisecond timestamp, "unknown" outside the Date range. */
export function dayOf(timestamp: number): string {
  if (!(Math.abs(timestamp) <= MAX_DATE_MS)) return 'unknown';
  // Date drops the fraction toward zero; so must the day, for a timestamp just before the epoch.
  const index = Math.floor(Math.trunc(timestamp) / DAY_MS);
  if (index === lastDay.index) return lastDay.text;
  lastDay = { index, text: new Date(timestamp).toISOString().slice(0, 10) };
  return lastDay.text;
}

function countryKey(country: string | null): string {
  return country !== null && /^[A-Z]{2}$/.test(country) ? country : 'unknown';
}

export function refererHost(referer: string | null): string {
  if (referer === null || referer === '') return 'direct';
  try {
    const host = new URL(referer).hostname.toLowerCase();
    return host === '' ? 'invalid' : host;
  } catch {
    return 'invalid';
  }
}
