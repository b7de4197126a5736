/**
 * Quiet hours in the user's own time zone, daylight-saving changes included: the wall-clock time is computed by
 * Intl.DateTimeFormat for the IANA zone at the instant being checked, never by a fixed offset, so 22:00 Paris is
 * 21:00 UTC in winter and 20:00 UTC in summer.
 */
import type { QuietHours } from './machine.js';

const HHMM = /^([01]\d|2[0-3]):([0-5]\d)$/;
const formatters = new Map<string, Intl.DateTimeFormat>();

export function isValidTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en-GB', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

export function isValidClock(text: string): boolean {
  return HHMM.test(text);
}

/** Minutes since local midnight in `zone` at `at` (epoch ms). */
export function localMinutes(at: number, zone: string): number {
  let f = formatters.get(zone);
  if (f === undefined) {
    f = new Intl.DateTimeFormat('en-GB', { timeZone: zone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
    formatters.set(zone, f);
  }
  let hour = 0;
  let minute = 0;
  for (const part of f.formatToParts(new Date(at))) {
    if (part.type === 'hour') hour = Number(part.value);
    if (part.type === 'minute') minute = Number(part.value);
  }
  return hour * 60 + minute;
}

function minutesOf(clock: string): number {
  const m = HHMM.exec(clock)!;
  return Number(m[1]) * 60 + Number(m[2]);
}

/** Whether `at` falls inside the quiet hours (start inclusive, end exclusive; start > end spans midnight). */
export function inQuietHours(quiet: QuietHours | null, at: number): boolean {
  if (quiet === null) return false;
  const start = minutesOf(quiet.start);
  const end = minutesOf(quiet.end);
  if (start === end) return false;
  const now = localMinutes(at, quiet.timezone);
  return start < end ? now >= start && now < end : now >= start || now < end;
}
