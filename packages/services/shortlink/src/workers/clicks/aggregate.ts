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

/**
 * Counts per key, in the order the keys first arrived. Nearly always one key (a link's clicks in an interval are
 * of one day, and often of one country and one referer), kept inline: a Map per link and kind was most of the
 * consumer's garbage, and lived long enough (an interval) to be promoted before it died.
 */
export class Tally {
  private first: string | undefined = undefined;
  private firstCount = 0;
  private rest: Map<string, number> | undefined = undefined;

  add(key: string, n = 1): void {
    if (key === this.first) this.firstCount += n;
    else if (this.first === undefined) {
      this.first = key;
      this.firstCount = n;
    } else {
      this.rest ??= new Map();
      this.rest.set(key, (this.rest.get(key) ?? 0) + n);
    }
  }

  /** Each key and its count, first arrival first. */
  forEach(fn: (key: string, n: number) => void): void {
    if (this.first === undefined) return;
    fn(this.first, this.firstCount);
    if (this.rest !== undefined) for (const [key, n] of this.rest) fn(key, n);
  }
}

/** One link's increments: its total, and per UTC day, country and referer host (the store gives new hosts their own counters in arrival order, up to the cap). */
export class LinkDelta {
  total = 0;
  readonly days = new Tally();
  readonly countries = new Tally();
  readonly referers = new Tally();
}

export interface BatchAggregate {
  /** Short code -> its increments (the Map given to `aggregate`, which may hold earlier batches' too). */
  links: Map<string, LinkDelta>;
  /** Producer -> highest seq counted in this batch. */
  seqs: Map<string, number>;
  accepted: number;
  duplicates: number;
  invalid: number;
}

export const statPrefix = (code: string): string => `s!${code}!`;

/**
 * Counts the batch's clicks into `into` (by default a new Map), per link: one Map lookup of the short code per click
 * and a compare in each of the link's three tallies, whose keys (the day's cached text, "unknown", "direct", ...)
 * are mostly the same string objects click after click. Building four counter keys per click and counting them in
 * one Map was a third of the consumer's CPU; the keys are now built once per counter when the store writes.
 */
export function aggregate(
  clicks: Array<StreamedClick | null>,
  lastSeq: (producer: string) => number | undefined,
  into = new Map<string, LinkDelta>(),
): BatchAggregate {
  const out: BatchAggregate = { links: into, seqs: new Map(), accepted: 0, duplicates: 0, invalid: 0 };
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
    let link = into.get(click.short_code);
    if (link === undefined) {
      link = new LinkDelta();
      into.set(click.short_code, link);
    }
    link.total++;
    link.days.add(dayOf(click.timestamp));
    link.countries.add(countryKey(click.country));
    link.referers.add(refererHost(click.referer));
  }
  return out;
}

/** The counter keys (see the top of this file) and increments of `links`. */
export function counterIncrements(links: Map<string, LinkDelta>): Map<string, number> {
  const out = new Map<string, number>();
  for (const [code, link] of links) {
    const prefix = statPrefix(code);
    out.set(`${prefix}t`, link.total);
    link.days.forEach((day, n) => out.set(`${prefix}d!${day}`, n));
    link.countries.forEach((country, n) => out.set(`${prefix}c!${country}`, n));
    link.referers.forEach((host, n) => out.set(`${prefix}r!${host}`, n));
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

/** The last referer parsed and its host: a block's clicks often come from one page, and parsing a URL is costly. */
let lastReferer = { referer: '', host: 'direct' };

export function refererHost(referer: string | null): string {
  if (referer === null || referer === '') return 'direct';
  if (referer === lastReferer.referer) return lastReferer.host;
  let host: string;
  try {
    const name = new URL(referer).hostname.toLowerCase();
    host = name === '' ? 'invalid' : name;
  } catch {
    host = 'invalid';
  }
  lastReferer = { referer, host };
  return host;
}
