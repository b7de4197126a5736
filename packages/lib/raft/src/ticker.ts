/**
 * The timer that drives ticks. A process at rest pays for every wake-up of its event loop (on a shared machine a
 * timer firing costs far more in scheduling than the work it does), and a quiesced group does nothing on a tick but
 * count it. So while every subscriber says it is idle, the ticker wakes once per `idleTicks` periods and delivers
 * that many ticks in a row (the same count a member would have seen, so timeouts measured in ticks keep their
 * length); a subscriber with work calls `busy()` and the ticker returns to one tick per period.
 *
 * Paced wake-ups fall on wall-clock multiples of `idleTicks * periodMs`, so the processes of one machine wake
 * together: the pings they send one another then arrive while each is already awake, instead of waking it again.
 */

/** Calls its subscribers every period: one timer for many groups. */
export interface Ticker {
  /**
   * Calls `tick` every period until the returned function is called. `idle`, when given, says that a tick would do
   * nothing for this subscriber but count (a ticker may then deliver ticks in batches); without it, never idle.
   */
  subscribe(tick: () => void, idle?: () => boolean): () => void;
  /** A subscriber has work again: a ticker that slowed down while everyone idled returns to its period now. */
  busy?(): void;
}

/** Settings of a {@link PacedTicker}. */
export interface PacedTickerOptions {
  /** Milliseconds per tick. */
  periodMs: number;
  /** Ticks per wake-up while every subscriber is idle. 1: never slow down. */
  idleTicks?: number;
  /** Wall clock in ms (a test's clock). Default Date.now. */
  now?: () => number;
}

/**
 * A ticker for one process: one timer, paced down to one wake-up per `idleTicks` periods while every subscriber is
 * idle (the module's comment says why). RaftNode makes its own; a GroupHost shares one among its groups.
 */
export class PacedTicker implements Ticker {
  private readonly subscribers = new Map<() => void, (() => boolean) | undefined>();
  private readonly periodMs: number;
  private readonly idleTicks: number;
  private readonly now: () => number;
  private timer: NodeJS.Timeout | null = null;
  /** The armed timer is a paced one (idleTicks periods, aligned to the wall clock). */
  private paced = false;
  private lastFireMs = 0;

  constructor(options: PacedTickerOptions) {
    const idleTicks = options.idleTicks ?? 1;
    if (!(options.periodMs > 0)) throw new RangeError(`periodMs must be positive, got ${options.periodMs}`);
    if (!Number.isInteger(idleTicks) || idleTicks < 1)
      throw new RangeError(`idleTicks must be a whole number >= 1, got ${idleTicks}`);
    this.periodMs = options.periodMs;
    this.idleTicks = idleTicks;
    this.now = options.now ?? Date.now;
  }

  subscribe(tick: () => void, idle?: () => boolean): () => void {
    this.subscribers.set(tick, idle);
    if (this.timer === null) {
      this.lastFireMs = this.now();
      this.arm(false);
    } else {
      this.busy();
    }
    return () => {
      this.subscribers.delete(tick);
      if (this.subscribers.size === 0 && this.timer !== null) {
        clearTimeout(this.timer);
        this.timer = null;
      }
    };
  }

  busy(): void {
    if (!this.paced || this.timer === null) return;
    clearTimeout(this.timer);
    this.arm(false);
  }

  /** Whether the ticker is waking once per `idleTicks` periods (everyone idle). */
  get isPaced(): boolean {
    return this.paced && this.timer !== null;
  }

  private arm(paced: boolean): void {
    this.paced = paced;
    let delay = this.periodMs;
    if (paced) {
      const span = this.periodMs * this.idleTicks;
      delay = span - (this.now() % span);
      // At least one whole period, so that a wake-up never delivers more ticks than periods have passed.
      if (delay < this.periodMs) delay += span;
    }
    this.timer = setTimeout(this.fire, delay);
  }

  private readonly fire = (): void => {
    this.timer = null;
    const now = this.now();
    // A paced wake-up delivers the whole periods that passed, never more (fewer ticks only make timeouts later).
    const ticks = this.paced
      ? Math.min(this.idleTicks, Math.max(1, Math.floor((now - this.lastFireMs) / this.periodMs)))
      : 1;
    this.lastFireMs = now;
    for (let i = 0; i < ticks; i++) for (const tick of this.subscribers.keys()) tick();
    if (this.subscribers.size === 0 || this.timer !== null) return;
    this.arm(this.idleTicks > 1 && this.everyoneIdle());
  };

  private everyoneIdle(): boolean {
    for (const idle of this.subscribers.values()) if (idle === undefined || !idle()) return false;
    return true;
  }
}
