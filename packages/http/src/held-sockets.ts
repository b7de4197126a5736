/**
 * Admission of long-lived upgraded sockets (WebSocket watchers) on a capped listener (connections.ts). Such a
 * socket is held: the cap never evicts it as idle, so without a bound of their own 16,000 unauthenticated watcher
 * sockets filled an auction gateway's cap and every later connection (bids, GETs, /healthz) was refused.
 *
 * Two bounds, checked before the upgrade is accepted:
 *   - per remote address: at most `perAddress` held sockets from one address;
 *   - in all: the listener's cap minus a reserve that held sockets can never take, so the listener always has room
 *     for plain requests (which can in turn evict idle keep-alive connections to get a place). The reserve is a
 *     tenth of the cap, at least 100 (at most half the cap).
 */

/** The listener's current cap (connections.ts's ConnectionLimit has this shape). */
export interface CapSource {
  readonly max: number;
}

export interface HeldSocketOptions {
  perAddress: number;
}

export type HeldRefusal = 'per_address' | 'full';

/** The connections of a listener of `max` that held sockets must leave free. */
export function heldReserve(max: number): number {
  return Math.min(Math.floor(max / 2), Math.max(100, Math.ceil(max / 10)));
}

export class HeldSockets {
  private readonly byAddress = new Map<string, number>();
  private held = 0;
  readonly refused = { per_address: 0, full: 0 };

  constructor(
    private readonly cap: CapSource,
    private readonly options: HeldSocketOptions,
  ) {}

  /** Held sockets this listener admits in all now (its cap minus the reserve). */
  get max(): number {
    return Math.max(0, this.cap.max - heldReserve(this.cap.max));
  }

  get size(): number {
    return this.held;
  }

  /** Held sockets from `address` now. */
  from(address: string): number {
    return this.byAddress.get(address) ?? 0;
  }

  /**
   * Takes a place for a socket from `address`: a release function to call once when the socket closes, or why it
   * is refused.
   */
  take(address: string): (() => void) | HeldRefusal {
    const n = this.byAddress.get(address) ?? 0;
    if (n >= this.options.perAddress) {
      this.refused.per_address++;
      return 'per_address';
    }
    if (this.held >= this.max) {
      this.refused.full++;
      return 'full';
    }
    this.byAddress.set(address, n + 1);
    this.held++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.held--;
      const left = (this.byAddress.get(address) ?? 1) - 1;
      if (left <= 0) this.byAddress.delete(address);
      else this.byAddress.set(address, left);
    };
  }
}
