/**
 * The leader-side reorder buffer for pipelined appends. An owner sends several append entries of a document at once
 * over pooled connections, so entry k+1 may reach this member before entry k; proposed as it came, the log would
 * refuse it (`out_of_order`) and the owner would send it again: one more Raft commit on the keystroke's path. Here
 * an entry whose predecessor (same owner session) has not been proposed yet waits for it, at most HOLD_MS, then is
 * proposed anyway. Only an optimisation: the machine's sequence check keeps the order whatever happens here (a
 * new leader, a lost predecessor, a restart).
 */

/** How long an entry waits for its predecessor (it normally arrives within a few milliseconds). */
const HOLD_MS = 150;
/** Sessions remembered; the oldest are forgotten beyond this (forgetting one costs at most a refusal). */
const MAX_SESSIONS = 10_000;

interface Track {
  /** The highest sequence number proposed through this member. */
  last: number;
  /** Entries waiting for their predecessor, by sequence number. */
  waiting: Map<number, () => void>;
}

export class AppendOrder {
  private readonly tracks = new Map<string, Track>();

  /**
   * Calls `propose` once the entry `seq` of `key` (group, document and owner session) may go: now when its
   * predecessor went through this member (or it is unknown here), else when the predecessor goes or HOLD_MS pass.
   */
  async run<T>(key: string, seq: number, propose: () => Promise<T>): Promise<T> {
    let track = this.tracks.get(key);
    if (track !== undefined && seq > track.last + 1) {
      const t = track;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          t.waiting.delete(seq);
          resolve();
        }, HOLD_MS);
        t.waiting.set(seq, () => {
          clearTimeout(timer);
          t.waiting.delete(seq);
          resolve();
        });
      });
      track = this.tracks.get(key);
    }
    if (track === undefined) {
      track = { last: 0, waiting: new Map() };
      this.tracks.set(key, track);
      if (this.tracks.size > MAX_SESSIONS) this.tracks.delete(this.tracks.keys().next().value!);
    }
    const result = propose();
    // Proposed (the log entry is being appended): the successor, if it is waiting, goes right behind it.
    track.last = Math.max(track.last, seq);
    track.waiting.get(seq + 1)?.();
    return result;
  }
}
