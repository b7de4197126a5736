/**
 * A connection's calls awaiting replies, by id. Ids are handed out in sequence, so a call's slot is its id modulo
 * a power-of-two capacity, and the table only grows (when a new id's slot is still held by an older call).
 *
 * Why not a Map: a Map whose size swings between zero and a few dozen, as a pipelined client's does every turn,
 * rehashes into a new backing table again and again, and each obsolete table keeps a link to its successor. The
 * obsolete tables that were already promoted to the old generation then keep the newer ones, and through them the
 * calls, their promises and their answers, alive through the next scavenges: promoted bytes, longer scavenges and
 * old-space garbage for the full collections, pauses in the caller's every latency (bench/RESULTS.md, kv findings). Here
 * the two arrays live as long as the connection, and a settled call's slot is simply emptied.
 */
export class CallTable<T> {
  /** The id held by each slot, 0 when free (ids start at 1). */
  private ids: Int32Array;
  private calls: (T | undefined)[];
  private mask: number;
  private count = 0;

  constructor(capacity = 64) {
    let size = 1;
    while (size < capacity) size *= 2;
    this.ids = new Int32Array(size);
    this.calls = new Array<T | undefined>(size).fill(undefined);
    this.mask = size - 1;
  }

  get size(): number {
    return this.count;
  }

  get(id: number): T | undefined {
    const i = id & this.mask;
    return this.ids[i] === id ? this.calls[i] : undefined;
  }

  has(id: number): boolean {
    return this.ids[id & this.mask] === id;
  }

  /** Adds a call under `id` (an integer from 1 to 2^31 - 1, not already in the table). */
  set(id: number, call: T): void {
    while (this.ids[id & this.mask] !== 0) this.grow();
    const i = id & this.mask;
    this.ids[i] = id;
    this.calls[i] = call;
    this.count++;
  }

  /** Removes and returns the call under `id`, if it is there. */
  take(id: number): T | undefined {
    const i = id & this.mask;
    if (this.ids[i] !== id) return undefined;
    const call = this.calls[i];
    this.ids[i] = 0;
    this.calls[i] = undefined;
    this.count--;
    return call;
  }

  /** Every call with its id, in slot order (a snapshot: the callback may take calls). */
  entries(): Array<[number, T]> {
    const out: Array<[number, T]> = [];
    if (this.count === 0) return out;
    for (let i = 0; i < this.ids.length; i++) if (this.ids[i] !== 0) out.push([this.ids[i]!, this.calls[i] as T]);
    return out;
  }

  /** Removes and returns every call. */
  clear(): T[] {
    const out = this.entries().map(([, call]) => call);
    this.ids.fill(0);
    this.calls.fill(undefined);
    this.count = 0;
    return out;
  }

  private grow(): void {
    const entries = this.entries();
    const size = this.ids.length * 2;
    this.ids = new Int32Array(size);
    this.calls = new Array<T | undefined>(size).fill(undefined);
    this.mask = size - 1;
    // set() grows again while two of these ids still share a slot.
    this.count = 0;
    for (const [id, call] of entries) this.set(id, call);
  }
}
