/**
 * What the ratelimit benchmark's load does per check, in the main process and in its generator threads alike: the
 * identifiers it draws and how it counts the answers.
 */
import { OpError } from '../load.js';

/**
 * Every identifier's string is made once, when the first check of a thread draws (before the measured window), and
 * kept: formatting an IP and a user id per check was about a tenth of what the generator allocated per check, and
 * every byte the generator allocates is a scavenge in the latencies it measures (ours and redis's alike: both
 * sides draw here).
 */
let ips: string[] = [];
let users: string[] = [];

/** A check's identifiers: IP and user drawn independently and uniformly from `keys` values each. */
export function identifiers(keys: number): { ip: string; user_id: string } {
  if (ips.length !== keys) {
    ips = Array.from({ length: keys }, (_, i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
    users = Array.from({ length: keys }, (_, u) => `u${u}`);
  }
  return { ip: ips[Math.floor(Math.random() * keys)]!, user_id: users[Math.floor(Math.random() * keys)]! };
}

/**
 * Counts the answers a side gave: allowed, denied, failed open, overloaded; the probes read the counts as the
 * window opens and closes, so the report has the window's figures. An answer that failed open (allowed with
 * remaining -1: our store did not answer within the check's time budget) counted nothing against the store, and an
 * overloaded one (our check instance's queue to its store was full; decided from its local fallback bucket) did
 * not ask the store: both are counted apart and reported as failed operations, not checks, so neither makes the
 * throughput look better.
 */
export class Answers {
  allowed = 0;
  denied = 0;
  failOpen = 0;
  overloaded = 0;

  add(r: { allowed: boolean; remaining: number; overloaded?: boolean }): void {
    if (r.overloaded === true) {
      this.overloaded++;
      throw new OpError('overloaded (decided from the local fallback bucket: the queue to the store was full)');
    }
    if (r.allowed && r.remaining < 0) {
      this.failOpen++;
      throw new OpError('fail-open (the store did not answer within the budget)');
    }
    if (r.allowed) this.allowed++;
    else this.denied++;
  }

  figures(): Record<string, number> {
    return {
      answers_allowed: this.allowed,
      answers_denied: this.denied,
      answers_fail_open: this.failOpen,
      answers_overloaded: this.overloaded,
    };
  }
}
