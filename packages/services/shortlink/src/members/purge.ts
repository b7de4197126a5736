/**
 * The leader's purge duty: links dead (expired or deleted) for longer than a grace period are dropped from the
 * store, through the log, so memory follows the live links instead of every link ever made. The grace period
 * outlives every cache (edge 5 s, shared 3 h, both ending at expiry or evicted on delete) and every retry of a
 * create, so nothing can still hold or re-send a purged link. Apply re-checks each code against the proposed
 * cutoff and the entry's time: a slow or stale leader can purge late, never early.
 */
import type { ServiceContext } from '@raftkit/http';
import { diedAt, type Link, type LinkCommand, type LinkMachine, type LinkResult } from '../machine.js';

interface PurgeOptions {
  /** How long a link stays after it died (default one day). */
  graceMs: number;
  /** Time between rounds (default one minute). */
  everyMs: number;
  /** Links examined per round: bounds the leader's CPU per round, a full pass takes size / scanPerRound rounds. */
  scanPerRound: number;
  /** Codes per purge entry: bounds the entry's size. */
  codesPerEntry: number;
}

export const PURGE_DEFAULTS: PurgeOptions = {
  graceMs: 24 * 60 * 60 * 1000,
  everyMs: 60_000,
  scanPerRound: 100_000,
  codesPerEntry: 1000,
};

/**
 * A resumable walk over the store that picks the codes of links dead at or before a cutoff. Pure: it reads what
 * `source` yields and keeps only its position; when a walk ends, the next call starts a new one.
 */
export class PurgeScanner {
  private walk: Iterator<[string, Link]> | null = null;

  constructor(private readonly source: () => Iterator<[string, Link]>) {}

  /**
   * Up to `max` dead codes among at most `budget` links; `seen` links were examined; `done` when the walk reached
   * the end of the store.
   */
  next(before: number, budget: number, max: number): { codes: string[]; seen: number; done: boolean } {
    this.walk ??= this.source();
    const codes: string[] = [];
    let seen = 0;
    while (seen < budget && codes.length < max) {
      const step = this.walk.next();
      if (step.done === true) {
        this.walk = null;
        return { codes, seen, done: true };
      }
      seen++;
      const [code, link] = step.value;
      if (diedAt(link) <= before) codes.push(code);
    }
    return { codes, seen, done: false };
  }
}

/** Read the purge options of a member from its environment (members get no `--set` settings). */
export function purgeOptions(env: Record<string, string | undefined>): PurgeOptions {
  const read = (name: string, fallback: number, min: number): number => {
    const text = env[name];
    if (text === undefined || text === '') return fallback;
    const v = Number(text);
    if (!Number.isSafeInteger(v) || v < min)
      throw new RangeError(`${name} must be an integer >= ${min}, got ${JSON.stringify(text)}`);
    return v;
  };
  return {
    graceMs: read('SHORTLINK_PURGE_GRACE_MS', PURGE_DEFAULTS.graceMs, 0),
    everyMs: read('SHORTLINK_PURGE_EVERY_MS', PURGE_DEFAULTS.everyMs, 10),
    scanPerRound: PURGE_DEFAULTS.scanPerRound,
    codesPerEntry: PURGE_DEFAULTS.codesPerEntry,
  };
}

/** Run the purge on this member while it leads; returns the stopper. */
export function startPurge(
  service: ServiceContext<LinkCommand, LinkResult>,
  machine: LinkMachine,
  options: PurgeOptions,
  onPurged: (count: number) => void,
): () => void {
  const scanner = new PurgeScanner(() => machine.entries());
  let busy = false;
  const timer = setInterval(() => {
    if (busy || !service.group().node.isLeader) return;
    busy = true;
    void round()
      .catch((e: unknown) => service.logger.log('warn', 'purge round failed', { error: String(e) }))
      .finally(() => {
        busy = false;
      });
  }, options.everyMs);
  timer.unref();

  async function round(): Promise<void> {
    const before = Date.now() - options.graceMs;
    let budget = options.scanPerRound;
    while (budget > 0 && service.group().node.isLeader) {
      const { codes, seen, done } = scanner.next(before, budget, options.codesPerEntry);
      budget -= seen;
      if (codes.length > 0) {
        const result = await service.group().node.propose({ op: 'purge', before, codes });
        if (result.ok && result.op === 'purge') onPurged(result.purged);
      }
      if (done) return;
    }
  }

  return () => clearInterval(timer);
}
