/**
 * Admission of long-lived upgraded sockets (WebSocket watchers) on a capped listener (connections.ts). Such a
 * socket is held: the cap never evicts it as idle, so without a bound of their own 16,000 unauthenticated watcher
 * sockets filled an auction gateway's cap and every later connection (bids, GETs, /healthz) was refused.
 *
 * Two bounds, checked before the upgrade is accepted:
 *   - per remote address: at most `perAddress` held sockets from one address (an IPv6 /64 counts as one);
 *   - in all: the listener's cap minus a reserve that held sockets can never take, so the listener always has room
 *     for plain requests (which can in turn evict idle keep-alive connections to get a place). The reserve is a
 *     tenth of the cap, at least 100 (at most half the cap).
 */

/**
 * The key a remote address is counted under: an IPv4 address as it is (also when IPv4-mapped, `::ffff:a.b.c.d`),
 * an IPv6 address by its /64 prefix, since one host is commonly given a whole /64 and could otherwise take a new
 * address per socket.
 */
export function addressKey(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped !== null) return mapped[1]!;
  if (!address.includes(':')) return address;
  const zoneless = address.split('%')[0]!.toLowerCase();
  const [head, tail] = zoneless.split('::') as [string, string | undefined];
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups =
    tail === undefined
      ? left
      : [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}

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

  /** Held sockets from `remote`'s address (its /64 for IPv6) now. */
  from(remote: string): number {
    return this.byAddress.get(addressKey(remote)) ?? 0;
  }

  /**
   * Takes a place for a socket from `address`: a release function to call once when the socket closes, or why it
   * is refused.
   */
  take(remote: string): (() => void) | HeldRefusal {
    const address = addressKey(remote);
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
