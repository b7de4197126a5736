import { mix32, type LinearizedSet } from './linearized-set.js';

/**
 * Lowe's memoisation: the configurations (set of linearized operations,
 * model state) already explored. Reaching one again means the search below
 * it has already been done (and failed, or we would have stopped), so it can
 * be skipped.
 *
 * Layout, chosen because this is the hot path and the biggest memory user:
 * state keys are interned to small integers; each entry's bitset is copied
 * into one growing word arena; entries with the same 53-bit hash of
 * (bitset hash, state id) are chained through `nextInChain`. The exact bitset
 * and state id are compared, so a hash collision never prunes a
 * configuration wrongly. Heads are spread over several Maps because one V8
 * Map holds at most 2^24 entries.
 */
export class VisitedCache {
  private readonly stateIds = new Map<string, number>();
  private readonly heads: Map<number, number>[] = Array.from({ length: SHARDS }, () => new Map<number, number>());
  private arena: Uint32Array;
  private stateIdOf: Int32Array;
  private nextInChain: Int32Array;
  private count = 0;

  constructor(private readonly words: number) {
    this.arena = new Uint32Array(INITIAL_CAPACITY * words);
    this.stateIdOf = new Int32Array(INITIAL_CAPACITY);
    this.nextInChain = new Int32Array(INITIAL_CAPACITY);
  }

  /** Records the configuration; returns false if it was already there. */
  add(linearized: LinearizedSet, stateKey: string): boolean {
    const stateId = this.intern(stateKey);
    const low = (linearized.hashLow ^ mix32(2 * stateId + STATE_SALT)) >>> 0;
    const high = (linearized.hashHigh ^ mix32(2 * stateId + 1 + STATE_SALT)) & 0x1fffff;
    const hash = high * 0x100000000 + low;
    const shard = this.heads[low & (SHARDS - 1)]!;
    const head = shard.get(hash) ?? -1;
    for (let entry = head; entry >= 0; entry = this.nextInChain[entry]!) {
      if (this.stateIdOf[entry] === stateId && linearized.equalsAt(this.arena, entry * this.words)) return false;
    }
    const entry = this.count++;
    if (entry === this.stateIdOf.length) this.grow();
    linearized.copyTo(this.arena, entry * this.words);
    this.stateIdOf[entry] = stateId;
    this.nextInChain[entry] = head;
    shard.set(hash, entry);
    return true;
  }

  get size(): number {
    return this.count;
  }

  private intern(stateKey: string): number {
    let id = this.stateIds.get(stateKey);
    if (id === undefined) {
      id = this.stateIds.size;
      this.stateIds.set(stateKey, id);
    }
    return id;
  }

  private grow(): void {
    const capacity = this.stateIdOf.length * 2;
    const arena = new Uint32Array(capacity * this.words);
    arena.set(this.arena);
    this.arena = arena;
    const stateIdOf = new Int32Array(capacity);
    stateIdOf.set(this.stateIdOf);
    this.stateIdOf = stateIdOf;
    const nextInChain = new Int32Array(capacity);
    nextInChain.set(this.nextInChain);
    this.nextInChain = nextInChain;
  }
}

const SHARDS = 16;
const INITIAL_CAPACITY = 1024;
/** Keeps state-id mixes apart from the per-operation mixes of {@link LinearizedSet}. */
const STATE_SALT = 0x40000000;
