/**
 * The leader's view of one follower's replication: how far its log matches, what to send next, and how much is
 * in flight. Three modes, as in etcd's tracker: probe (one append at a time until the match point is found),
 * replicate (pipelined appends within a window bounded by count and bytes), snapshot (waiting for a snapshot).
 */
type ProgressState = 'probe' | 'replicate' | 'snapshot';

export class Progress {
  match = 0;
  next: number;
  state: ProgressState = 'probe';
  /** In probe mode: an append was sent and no answer has come yet. */
  probeSent = false;
  /** In snapshot mode: the index of the snapshot sent, and ticks since. */
  pendingSnapshot = 0;
  snapshotTicks = 0;
  /** Heard from since the last check-quorum round. */
  recentActive = false;
  /** Highest read round this member has acknowledged. */
  ackedRound = 0;
  /** Refusals in a row hinting below `match` (see maybeDecreaseTo). */
  private lostRefusals = 0;
  private inflight: Array<{ last: number; bytes: number }> = [];
  private inflightBytes = 0;

  constructor(
    next: number,
    public learner: boolean,
    private readonly maxInflightMessages: number,
    private readonly maxInflightBytes: number,
  ) {
    this.next = next;
  }

  /** A refusal hinting below `match` came and the next will decide (maybeDecreaseTo): the group must not idle. */
  get suspectsLoss(): boolean {
    return this.lostRefusals > 0;
  }

  /** Whether the leader should hold back appends to this follower for now. */
  isPaused(): boolean {
    switch (this.state) {
      case 'probe':
        return this.probeSent;
      case 'replicate':
        return this.inflight.length >= this.maxInflightMessages || this.inflightBytes >= this.maxInflightBytes;
      case 'snapshot':
        return true;
    }
  }

  becomeProbe(): void {
    // After a snapshot, the follower is known to have at least the snapshot's index.
    const from = this.state === 'snapshot' ? Math.max(this.match + 1, this.pendingSnapshot + 1) : this.match + 1;
    this.reset('probe');
    this.next = from;
  }

  becomeReplicate(): void {
    this.reset('replicate');
    this.next = this.match + 1;
  }

  becomeSnapshot(index: number): void {
    this.reset('snapshot');
    this.pendingSnapshot = index;
  }

  private reset(state: ProgressState): void {
    this.state = state;
    this.probeSent = false;
    this.pendingSnapshot = 0;
    this.snapshotTicks = 0;
    this.inflight = [];
    this.inflightBytes = 0;
  }

  /** An append with entries up to `last` (of `bytes` bytes) was sent. */
  sentAppend(last: number, bytes: number, entryCount: number): void {
    if (this.state === 'replicate') {
      if (entryCount > 0) {
        this.next = last + 1;
        this.inflight.push({ last, bytes });
        this.inflightBytes += bytes;
      }
    } else if (this.state === 'probe') {
      this.probeSent = true;
    }
  }

  /** A successful append response up to `index`. Returns whether it told us anything new. */
  maybeUpdate(index: number): boolean {
    this.lostRefusals = 0;
    let updated = false;
    if (index > this.match) {
      this.match = index;
      updated = true;
      this.probeSent = false;
    }
    this.next = Math.max(this.next, index + 1);
    this.freeUpTo(index);
    return updated;
  }

  /**
   * A rejected append at `rejected`, with the follower's hint of where logs may match (`probeIndex`). Returns
   * false when the rejection is stale (an answer to an older append we already moved past).
   */
  maybeDecreaseTo(rejected: number, probeIndex: number): boolean {
    if (this.state !== 'replicate' && this.next - 1 !== rejected) return false;
    // A follower whose log still holds what it acknowledged hints at `match` or above: its prefix up to `match` is
    // the leader's, and the leader's terms never decrease along its log. A hint below `match` means the follower
    // lost acknowledged entries: its disk was replaced under the same id (a wiped worker restarted in place).
    // Raft assumes that never happens, and probing from a `match` that is gone would be refused forever; so the
    // leader starts over from what the follower still has. A stale duplicate of an older refusal looks the same
    // but comes once, while a wiped follower refuses every append: the second such refusal in a row decides.
    if (probeIndex < this.match && ++this.lostRefusals >= 2) {
      this.lostRefusals = 0;
      this.match = probeIndex;
    }
    if (this.state === 'replicate') {
      if (rejected <= this.match) return false;
      this.next = this.match + 1;
      return true;
    }
    this.next = Math.max(Math.min(rejected, probeIndex + 1), this.match + 1);
    this.probeSent = false;
    return true;
  }

  /** Forget the oldest in-flight append (presumed lost). */
  freeFirstOne(): void {
    const first = this.inflight.shift();
    if (first !== undefined) this.inflightBytes -= first.bytes;
  }

  private freeUpTo(index: number): void {
    let n = 0;
    while (n < this.inflight.length && this.inflight[n]!.last <= index) {
      this.inflightBytes -= this.inflight[n]!.bytes;
      n++;
    }
    if (n > 0) this.inflight.splice(0, n);
  }

  get inflightCount(): number {
    return this.inflight.length;
  }
}
