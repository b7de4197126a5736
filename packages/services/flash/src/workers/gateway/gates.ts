/**
 * The gateway-side cores of the flash-deal gates: the alive-shards bitmap, the routing rule (a user's home shard by
 * hash, exactly one re-route to a random alive shard, sold out locally when the bitmap is empty) and the
 * admission-token pool arithmetic. Pure: no clock, no I/O; randomness is passed in as a number in [0, 1), so a test
 * (or a replay) decides identically. Rate limits use the project's token bucket (`take` of @raftkit/http).
 */

/** Tokens per unit of inventory (the spec's "about 3 times the inventory"). */
export const TOKENS_PER_UNIT = 3;
/** Tokens stop being honoured this long after the deal's end (the spec's "about 5 minutes"); none are refunded. */
export const TOKEN_GRACE_MS = 5 * 60_000;

/**
 * The alive-shards bitmap: one bit per shard, set while the shard may hold stock. The inventory clears a bit when a
 * shard answers empty; an expiry that returns a unit sets it again. A gateway's copy is a hint refreshed about every
 * second: a stale set bit costs one inventory call answered lost, a stale clear bit is corrected by the next refresh.
 */
export class AliveShards {
  private readonly bits: Uint8Array;
  private alive = 0;

  constructor(
    readonly shardCount: number,
    alive: Iterable<number> = [],
  ) {
    if (!Number.isSafeInteger(shardCount) || shardCount < 1)
      throw new RangeError(`shardCount must be a positive integer, got ${shardCount}`);
    this.bits = new Uint8Array(Math.ceil(shardCount / 8));
    for (const shard of alive) this.set(shard, true);
  }

  /** Every shard alive (a freshly filled deal). */
  static all(shardCount: number): AliveShards {
    return new AliveShards(
      shardCount,
      Array.from({ length: shardCount }, (_, i) => i),
    );
  }

  /** From the bytes `toBytes` gave (the form gateways fetch). */
  static fromBytes(shardCount: number, bytes: Uint8Array): AliveShards {
    const out = new AliveShards(shardCount);
    for (let i = 0; i < shardCount; i++) if (((bytes[i >> 3] ?? 0) >> (i & 7)) & 1) out.set(i, true);
    return out;
  }

  has(shard: number): boolean {
    return this.inRange(shard) && ((this.bits[shard >> 3]! >> (shard & 7)) & 1) === 1;
  }

  set(shard: number, alive: boolean): void {
    if (!this.inRange(shard)) throw new RangeError(`shard ${shard} is not in 0..${this.shardCount - 1}`);
    if (this.has(shard) === alive) return;
    if (alive) this.bits[shard >> 3]! |= 1 << (shard & 7);
    else this.bits[shard >> 3]! &= ~(1 << (shard & 7));
    this.alive += alive ? 1 : -1;
  }

  /** Shards alive. */
  get count(): number {
    return this.alive;
  }

  /** Alive shards in index order. */
  list(): number[] {
    const out: number[] = [];
    for (let i = 0; i < this.shardCount; i++) if (this.has(i)) out.push(i);
    return out;
  }

  toBytes(): Uint8Array {
    return this.bits.slice();
  }

  private inRange(shard: number): boolean {
    return Number.isSafeInteger(shard) && shard >= 0 && shard < this.shardCount;
  }
}

/** FNV-1a (32 bits) of the UTF-8 bytes: a stable spread with no modulo bias worth noting for up to 1,024 shards. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(text, 'utf8')) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/** The user's home shard for a deal (the deal id is mixed in so one user is not on shard 0 of every deal). */
export function homeShard(dealId: string, userId: string, shardCount: number): number {
  return fnv1a(`${dealId}\u0000${userId}`) % shardCount;
}

/** Where the gateway sends an attempt next, or its local answer. */
export type RouteDecision =
  | { kind: 'shard'; shard: number; rerouted: boolean }
  /** The bitmap is empty: answer sold out without touching inventory. */
  | { kind: 'sold_out' }
  /** The one re-route was spent and the bitmap still has stock elsewhere: the attempt lost. */
  | { kind: 'lost' };

function checkRandom(random: number): void {
  if (!(random >= 0 && random < 1)) throw new RangeError(`random must be in [0, 1), got ${random}`);
}

/** A random alive shard other than `exclude`, or null. */
function pick(alive: AliveShards, random: number, exclude: number): number | null {
  const candidates = alive.list().filter((s) => s !== exclude);
  if (candidates.length === 0) return null;
  return candidates[Math.floor(random * candidates.length)]!;
}

/**
 * The first hop: the home shard, or sold out when the bitmap is empty. Always the home shard, even when its bit is
 * clear: the home shard holds the user's pin (see `rerouteCandidate`), and a gateway that skipped it could send the
 * same user to a third shard on another attempt.
 */
export function firstRoute(alive: AliveShards, home: number): RouteDecision {
  if (alive.count === 0) return { kind: 'sold_out' };
  return { kind: 'shard', shard: home, rerouted: false };
}

/**
 * The re-route drawn before the first hop, sent with it (`reroute` of the reserve command): a random alive shard
 * other than the home shard, or null. The home shard pins the user to it if it answers empty, and answers the pin
 * (the first one drawn) on every later attempt, so one user reaches at most two shards of a deal.
 */
export function rerouteCandidate(alive: AliveShards, home: number, random: number): number | null {
  checkRandom(random);
  return pick(alive, random, home);
}

/**
 * After `previous` answered lost (the caller has cleared its bit in `alive` if the shard said it is empty) with
 * `reroute`, the shard the inventory pinned the user to (or null): exactly one re-route, to that shard, never a
 * second. The pin is followed even where this gateway's bitmap says the shard is empty: the user may hold their win
 * there (a win can take a shard's last unit), and a retry through a gateway that skipped it answered a winner lost.
 * Sold out only when the bitmap is empty and no pin is left to follow.
 */
export function nextRoute(
  previous: Extract<RouteDecision, { kind: 'shard' }>,
  alive: AliveShards,
  reroute: number | null,
): RouteDecision {
  if (
    !previous.rerouted &&
    reroute !== null &&
    reroute !== previous.shard &&
    reroute >= 0 &&
    reroute < alive.shardCount
  )
    return { kind: 'shard', shard: reroute, rerouted: true };
  return alive.count === 0 ? { kind: 'sold_out' } : { kind: 'lost' };
}

/** The admission-token pool for a deal: about 3 tokens per unit. */
export function poolSize(totalInventory: number, tokensPerUnit = TOKENS_PER_UNIT): number {
  if (!Number.isSafeInteger(totalInventory) || totalInventory < 0)
    throw new RangeError(`totalInventory must be a non-negative integer, got ${totalInventory}`);
  if (!(tokensPerUnit >= 1)) throw new RangeError(`tokensPerUnit must be at least 1, got ${tokensPerUnit}`);
  return Math.ceil(totalInventory * tokensPerUnit);
}

/** The pool split over `gateways` processes: even shares, the remainder one each to the first; the sum is the pool. */
export function distributeTokens(pool: number, gateways: number): number[] {
  if (!Number.isSafeInteger(pool) || pool < 0) throw new RangeError(`pool must be a non-negative integer, got ${pool}`);
  if (!Number.isSafeInteger(gateways) || gateways < 1)
    throw new RangeError(`gateways must be a positive integer, got ${gateways}`);
  const share = Math.floor(pool / gateways);
  const extra = pool % gateways;
  return Array.from({ length: gateways }, (_, i) => share + (i < extra ? 1 : 0));
}

/** Whether an admission token is still honoured at `now` (until end_at + the grace). */
export function tokensValid(endAt: number, now: number): boolean {
  return now < endAt + TOKEN_GRACE_MS;
}

/**
 * One gateway's share of the pool, in local memory: taking is a decrement while positive, no call to anything.
 * An empty pool answers sold out locally. Tokens are not refunded (a lost or expired attempt keeps its token spent:
 * the 3x margin absorbs expiry and shard skew).
 */
export class TokenPool {
  private left: number;
  private toppedUpFor: number | null = null;

  constructor(share: number) {
    if (!Number.isSafeInteger(share) || share < 0)
      throw new RangeError(`share must be a non-negative integer, got ${share}`);
    this.left = share;
  }

  get remaining(): number {
    return this.left;
  }

  /** 'admitted' (a token taken) or 'sold_out' (the share is spent). */
  take(): 'admitted' | 'sold_out' {
    if (this.left <= 0) return 'sold_out';
    this.left--;
    return 'admitted';
  }

  /**
   * A spent share re-issued while units are still unreserved (the gateway's copy of the counts says so): at most
   * once per `generation` (the gateway passes its last refresh's time), so the inventory sees at most about 3 x
   * what remains per refresh, never a flood. False when this generation already topped up or the share is not spent.
   */
  topUp(tokens: number, generation: number): boolean {
    if (!Number.isSafeInteger(tokens) || tokens < 0)
      throw new RangeError(`tokens must be a non-negative integer, got ${tokens}`);
    if (this.left > 0 || generation === this.toppedUpFor || tokens === 0) return false;
    this.toppedUpFor = generation;
    this.left = tokens;
    return true;
  }
}
