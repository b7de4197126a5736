import { decodeOps, DOC_MAGIC, OpLog, UPDATE_MAGIC } from './encoding.js';
import { checkOp, InvalidOpError } from './validate.js';
import { ChunkList, type Chunk, type Entry } from './list.js';
import {
  opLength,
  type AttrValue,
  type Attrs,
  type DeleteOp,
  type FormatOp,
  type Id,
  type InsertOp,
  type Op,
  type Span,
  type StateVector,
} from './types.js';

/** An attribute value with the (Lamport, client) stamp of the op that set it: the greater stamp wins per key. */
interface Stamp {
  readonly v: AttrValue;
  readonly l: number;
  readonly c: string;
}
type StampedAttrs = Readonly<Record<string, Stamp>>;

/**
 * A run of characters typed by one client with consecutive counters and Lamport stamps. Only the first
 * character's origins are stored: every later character's left origin is the character before it in the run and
 * its right origin is the run's. Splitting a run (insert or delete inside it) keeps that meaning exactly.
 */
class Item implements Entry {
  chunk: Chunk | null = null;
  /** The next piece split off this run (higher counters), so only whole inserted runs need indexing. */
  next: Item | null = null;
  /**
   * Anchors as plain fields rather than [client, counter] arrays (an array costs about 64 bytes a run).
   * leftClient undefined: a split tail, whose left anchor is its own previous counter; null: the document start.
   */
  private readonly leftClient: string | null | undefined;
  private readonly leftSeq: number;
  readonly rightClient: string | null;
  readonly rightSeq: number;
  vis(): number {
    return this.deleted ? 0 : this.text.length;
  }
  constructor(
    readonly client: string,
    readonly seq: number,
    readonly lamport: number,
    left: Id | null | undefined,
    right: Id | null,
    public text: string,
    public deleted: boolean,
    /** Shared between the pieces of a split run, so never mutated: formatting replaces it. */
    public attrs: StampedAttrs | null,
  ) {
    this.leftClient = left === undefined ? undefined : left === null ? null : left[0];
    this.leftSeq = left ? left[1] : 0;
    this.rightClient = right === null ? null : right[0];
    this.rightSeq = right === null ? 0 : right[1];
  }
  get left(): Id | null {
    return this.leftClient === undefined
      ? [this.client, this.seq - 1]
      : this.leftClient === null
        ? null
        : [this.leftClient, this.leftSeq];
  }
  get right(): Id | null {
    return this.rightClient === null ? null : [this.rightClient, this.rightSeq];
  }
  rightIs(id: Id | null): boolean {
    return id === null ? this.rightClient === null : this.rightClient === id[0] && this.rightSeq === id[1];
  }
}

const idEq = (a: Id | null, b: Id | null): boolean =>
  a === null ? b === null : b !== null && a[0] === b[0] && a[1] === b[1];
const newer = (l: number, c: string, s: Stamp): boolean => l > s.l || (l === s.l && c > s.c);

function mergeAttrs(base: StampedAttrs | null, add: Attrs, l: number, c: string): StampedAttrs | null {
  let out: Record<string, Stamp> | null = null;
  for (const key of Object.keys(add)) {
    const cur = base?.[key];
    if (cur === undefined || newer(l, c, cur)) {
      out ??= { ...base };
      out[key] = { v: add[key] as AttrValue, l, c };
    }
  }
  return out ?? base;
}

const byLamport = (a: Op, b: Op): number => a.lamport - b.lamport;

/** Same attributes with the same stamps: characters that may share one run. */
function sameAttrs(a: StampedAttrs | null, b: StampedAttrs | null): boolean {
  if (a === b) return true;
  const ka = a ? Object.keys(a) : [];
  const kb = b ? Object.keys(b) : [];
  if (ka.length !== kb.length) return false;
  for (const k of ka) {
    const x = a![k]!;
    const y = b?.[k];
    if (y === undefined || x.v !== y.v || x.l !== y.l || x.c !== y.c) return false;
  }
  return true;
}

/** Positions of characters in the list (item index, offset) compared lexicographically. */
const cmpPos = (ai: number, ao: number, bi: number, bo: number): number => (ai !== bi ? ai - bi : ao - bo);

/**
 * Deleted text is never read again (the log keeps what was typed), so a tombstone keeps only its length: a slice
 * of one shared filler string instead of the characters (Yjs does the same when it collects deleted content).
 */
let filler = '\u0000'.repeat(1024);
function tomb(n: number): string {
  while (filler.length < n) filler += filler;
  return filler.slice(0, n);
}

type Outcome = 'applied' | 'duplicate' | 'waiting' | 'invalid';

/**
 * A replicated rich-text sequence. Local edits return the ops to send; `apply` takes remote ops in any order,
 * any number of times. Deterministic: no clocks, no randomness.
 */
export class Doc {
  readonly clientId: string;
  /** Every run, tombstones included, in document order. */
  private items: ChunkList<Item>;
  /** client -> the runs as inserted (split pieces hang off them by `next`), sorted by counter, to find the run holding an id. */
  private byClient = new Map<string, Item[]>();
  private sv = new Map<string, number>();
  private maxLamport = -1;
  /**
   * Every applied op in application order (a causal order), encoded: the source of opsSince and encode. The last
   * op stays an object until the next one, so consecutive typing merges into it.
   */
  private log = new OpLog();
  private lastOp: Op | null = null;
  private pending: Op[] = [];
  private formats: FormatOp[] = [];
  private visible = 0;
  /** Cursor cache for local edits: visible characters before chunk cacheChunk. Reset by remote ops and chunk splits. */
  private cacheChunk = 0;
  private cacheBefore = 0;
  private cacheSplits = 0;

  /** options.chunkSize: runs per chunk of the run list (default 128); only tests need to change it. */
  constructor(clientId: string, options: { chunkSize?: number } = {}) {
    if (typeof clientId !== 'string' || clientId.length === 0)
      throw new TypeError('clientId must be a non-empty string');
    this.clientId = clientId;
    this.items = new ChunkList<Item>(options.chunkSize);
  }

  /** Visible length in UTF-16 code units. */
  get length(): number {
    return this.visible;
  }

  /** Ops received whose dependencies have not arrived yet. */
  get pendingCount(): number {
    return this.pending.length;
  }

  text(): string {
    let s = '';
    for (const it of this.items) if (!it.deleted) s += it.text;
    return s;
  }

  /** Visible text split where attributes change; adjacent runs with equal attributes are merged (canonical). */
  spans(): Span[] {
    const out: { text: string; attrs: Attrs; key: string }[] = [];
    for (const it of this.items) {
      if (it.deleted || it.text.length === 0) continue;
      const attrs: Record<string, AttrValue> = {};
      if (it.attrs)
        for (const k of Object.keys(it.attrs).sort()) if (it.attrs[k]!.v !== null) attrs[k] = it.attrs[k]!.v;
      const key = JSON.stringify(attrs);
      const last = out[out.length - 1];
      if (last && last.key === key) last.text += it.text;
      else out.push({ text: it.text, attrs, key });
    }
    return out.map(({ text, attrs }) => ({ text, attrs }));
  }

  stateVector(): StateVector {
    return Object.fromEntries(this.sv);
  }

  /** The last counter applied of `client` (-1 when none): one entry of the state vector, without copying it. */
  lastCounter(client: string): number {
    return this.sv.get(client) ?? -1;
  }

  /** Number of runs held (tombstones included): what memory grows with. */
  get runCount(): number {
    return this.items.size;
  }

  // ---------------------------------------------------------------- local edits

  localInsert(index: number, text: string, attrs?: Attrs): InsertOp[] {
    this.checkRange(index, 0);
    if (text.length === 0) return [];
    const seq = this.nextSeq();
    const lamport = this.maxLamport + 1;
    let left: Id | null = null;
    let prev: Item | null = null;
    if (index > 0) {
      const [it, before] = this.seek(index);
      prev = it;
      const k = index - 1 - before;
      if (k < it.text.length - 1) this.split(it, k + 1);
      left = [it.client, it.seq + k];
    } else {
      this.resetCache();
    }
    const next = prev ? this.items.next(prev) : this.items.first();
    const right: Id | null = next ? [next.client, next.seq] : null;
    const hasAttrs = attrs !== undefined && Object.keys(attrs).length > 0;
    const op: InsertOp = hasAttrs
      ? { type: 'insert', id: [this.clientId, seq], lamport, left, right, text, attrs }
      : { type: 'insert', id: [this.clientId, seq], lamport, left, right, text };
    this.place(op, prev);
    this.finish(op);
    return [op];
  }

  localDelete(index: number, length: number): DeleteOp[] {
    this.checkRange(index, length);
    if (length === 0) return [];
    const [first, before] = this.seek(index + 1);
    const k = index - before;
    let it: Item | null = k > 0 ? this.split(first, k) : first;
    const ops: DeleteOp[] = [];
    let remaining = length;
    const from = this.items.prev(it) ?? it;
    let lastDeleted = it;
    while (remaining > 0 && it !== null) {
      if (!it.deleted) {
        if (it.text.length > remaining) this.split(it, remaining);
        it.deleted = true;
        this.items.changed(it, -it.text.length);
        this.visible -= it.text.length;
        remaining -= it.text.length;
        it.text = tomb(it.text.length);
        const op: DeleteOp = {
          type: 'delete',
          id: [this.clientId, this.nextSeq()],
          lamport: this.maxLamport + 1,
          target: [it.client, it.seq],
          length: it.text.length,
        };
        this.finish(op);
        ops.push(op);
        lastDeleted = it;
      }
      it = this.items.next(it);
    }
    this.mergeTombstones(from, lastDeleted);
    return ops;
  }

  localFormat(index: number, length: number, attrs: Attrs): FormatOp[] {
    this.checkRange(index, length);
    if (length === 0 || Object.keys(attrs).length === 0) return [];
    const start = this.idAt(index);
    const end = this.idAt(index + length - 1);
    const op: FormatOp = {
      type: 'format',
      id: [this.clientId, this.nextSeq()],
      lamport: this.maxLamport + 1,
      start,
      end,
      attrs,
    };
    this.applyFormat(op);
    this.finish(op);
    this.resetCache();
    return [op];
  }

  // ---------------------------------------------------------------- lookups (undo, comments, cursors)

  /** The id of the visible character at `index` (0 <= index < length). */
  charId(index: number): Id {
    this.checkRange(index, 1);
    return this.idAt(index);
  }

  /**
   * Where character `id` is: its visible index and whether it is visible; a deleted character reports the index the
   * next visible character has (where text re-inserted in its place goes). Null for an id this replica does not
   * hold as an inserted character. Ids survive concurrent edits, so undo and comments anchor on them, not indexes.
   */
  indexOf(id: Id): { index: number; visible: boolean } | null {
    if (!this.has(id) || !this.chars(id, 1)) return null;
    const it = this.findRun(id);
    let before = 0;
    for (const c of this.items.chunks) {
      if (c === it.chunk) break;
      before += c.vis;
    }
    for (const e of it.chunk!.entries) {
      if (e === it) break;
      before += e.vis();
    }
    return it.deleted ? { index: before, visible: false } : { index: before + id[1] - it.seq, visible: true };
  }

  /** The visible text from `index`, `length` code units, as spans with their attributes (null values left out). */
  slice(index: number, length: number): Span[] {
    this.checkRange(index, length);
    const out: Span[] = [];
    let pos = 0;
    for (const span of this.spans()) {
      const from = Math.max(index, pos);
      const to = Math.min(index + length, pos + span.text.length);
      if (from < to) out.push({ text: span.text.slice(from - pos, to - pos), attrs: span.attrs });
      pos += span.text.length;
      if (pos >= index + length) break;
    }
    return out;
  }

  // ---------------------------------------------------------------- remote ops

  /** Applies ops from any replica in any order, any number of times; ops whose dependencies are missing wait. */
  apply(ops: readonly Op[]): void {
    // Shapes first, for the whole batch: a malformed op fails the call before anything is applied.
    for (const op of ops) checkOp(op);
    const invalid: Op[] = [];
    let progress = false;
    // An op's Lamport stamp exceeds those of everything it depends on (its author had seen them), so in Lamport
    // order every op of the batch whose dependencies are here applies in one pass, whatever order it came in.
    for (const op of [...ops].sort(byLamport)) {
      const r = this.tryApply(op);
      if (r === 'waiting') this.pending.push(op);
      else if (r === 'applied') progress = true;
      else if (r === 'invalid') invalid.push(op);
    }
    while (progress && this.pending.length > 0) {
      progress = false;
      const waiting = this.pending.sort(byLamport);
      this.pending = [];
      for (const op of waiting) {
        const r = this.tryApply(op);
        if (r === 'waiting') this.pending.push(op);
        else if (r === 'applied') progress = true;
        else if (r === 'invalid') invalid.push(op);
      }
    }
    // An op whose anchors turn out not to be inserted characters is dropped (nothing of it applied); the valid
    // ops of the batch stay applied.
    if (invalid.length > 0)
      throw new InvalidOpError(
        `${invalid.length} op(s) anchored on counters that are not inserted characters, dropped`,
        invalid,
      );
  }

  /** Every applied op the holder of `sv` lacks, in a causal order (runs partly known are trimmed). */
  opsSince(sv: StateVector = {}): Op[] {
    const out: Op[] = [];
    for (const op of decodeOps(this.log.encode(UPDATE_MAGIC, this.lastOp))) {
      const [c, s] = op.id;
      const have = sv[c] ?? -1;
      if (s + opLength(op) - 1 <= have) continue;
      out.push(s > have ? op : trimInsert(op as InsertOp, have + 1 - s));
    }
    return out;
  }

  encode(): Uint8Array {
    return this.log.encode(DOC_MAGIC, this.lastOp);
  }

  static decode(bytes: Uint8Array, clientId: string): Doc {
    const doc = new Doc(clientId);
    doc.apply(decodeOps(bytes, DOC_MAGIC));
    if (doc.pending.length > 0)
      throw new Error(`corrupt document: ${doc.pending.length} ops with missing dependencies`);
    return doc;
  }

  // ---------------------------------------------------------------- internals

  private nextSeq(): number {
    return (this.sv.get(this.clientId) ?? -1) + 1;
  }

  /** Whether counters id .. id+n-1 are all inserted characters (not delete or format ops). */
  private chars(id: Id | null, n: number): boolean {
    if (id === null) return true;
    const runs = this.byClient.get(id[0]);
    if (!runs) return false;
    for (let cur = id[1]; cur < id[1] + n; ) {
      const it = this.findRun([id[0], cur]);
      if (cur < it.seq || cur >= it.seq + it.text.length) return false;
      cur = it.seq + it.text.length;
    }
    return true;
  }

  private has(id: Id | null): boolean {
    return id === null || (this.sv.get(id[0]) ?? -1) >= id[1];
  }

  private checkRange(index: number, length: number): void {
    if (
      !Number.isInteger(index) ||
      !Number.isInteger(length) ||
      index < 0 ||
      length < 0 ||
      index + length > this.visible
    ) {
      throw new RangeError(`range ${index}+${length} outside a document of length ${this.visible}`);
    }
  }

  private resetCache(): void {
    this.cacheChunk = 0;
    this.cacheBefore = 0;
  }

  /** Finds the visible run holding character p-1 (p >= 1): [run, visible characters before it]. */
  private seek(p: number): [Item, number] {
    const chunks = this.items.chunks;
    let ci = this.cacheChunk;
    let before = this.cacheBefore;
    if (this.cacheSplits !== this.items.splits || ci >= chunks.length) {
      ci = 0;
      before = 0;
      this.cacheSplits = this.items.splits;
    }
    while (ci > 0 && before >= p) before -= chunks[--ci]!.vis;
    while (before + chunks[ci]!.vis < p) before += chunks[ci++]!.vis;
    this.cacheChunk = ci;
    this.cacheBefore = before;
    for (const e of chunks[ci]!.entries) {
      const it = e as Item;
      const vis = it.deleted ? 0 : it.text.length;
      if (before + vis >= p) return [it, before];
      before += vis;
    }
    throw new Error('internal: chunk visible length out of date');
  }

  private idAt(index: number): Id {
    const [it, before] = this.seek(index + 1);
    return [it.client, it.seq + index - before];
  }

  /** Splits a run after k characters; the tail follows it and keeps the run's meaning. */
  private split(it: Item, k: number): Item {
    const tail = new Item(
      it.client,
      it.seq + k,
      it.lamport + k,
      undefined,
      it.right,
      it.text.slice(k),
      it.deleted,
      it.attrs,
    );
    const vis = it.vis();
    it.text = it.text.slice(0, k);
    this.items.changed(it, it.vis() - vis);
    tail.next = it.next;
    it.next = tail;
    this.items.insertAfter(it, tail);
    return tail;
  }

  /** Index in `runs` of the run holding counter seq. */
  private runIndex(runs: Item[], seq: number): number {
    let lo = 0;
    let hi = runs.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (runs[mid]!.seq <= seq) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  private findRun(id: Id): Item {
    const runs = this.byClient.get(id[0]);
    if (!runs) throw new Error(`unknown id ${id[0]}:${id[1]}`);
    let it = runs[this.runIndex(runs, id[1])]!;
    while (it.next !== null && it.seq + it.text.length <= id[1]) it = it.next;
    return it;
  }

  /** The run that ends with character id (splitting after it). */
  private splitAfter(id: Id): Item {
    const it = this.findRun(id);
    const k = id[1] - it.seq + 1;
    if (k < it.text.length) this.split(it, k);
    return it;
  }

  /** The run that starts with character id (splitting before it). */
  private splitBefore(id: Id): Item {
    const it = this.findRun(id);
    const k = id[1] - it.seq;
    return k > 0 ? this.split(it, k) : it;
  }

  /** [order key of the run holding id, offset in it]. */
  private posOf(id: Id): [number, number] {
    const it = this.findRun(id);
    return [this.items.key(it), id[1] - it.seq];
  }

  private tryApply(op: Op): Outcome {
    const [c, s] = op.id;
    const have = this.sv.get(c) ?? -1;
    const len = opLength(op);
    if (len === 0 || s + len - 1 <= have) return 'duplicate';
    if (s > have + 1) return 'waiting';
    const o = s <= have ? trimInsert(op as InsertOp, have + 1 - s) : op;
    switch (o.type) {
      case 'insert':
        if (!this.has(o.left) || !this.has(o.right)) return 'waiting';
        if (!this.chars(o.left, 1) || !this.chars(o.right, 1)) return 'invalid';
        this.integrate(o);
        break;
      case 'delete':
        if (!this.has([o.target[0], o.target[1] + o.length - 1])) return 'waiting';
        if (!this.chars(o.target, o.length)) return 'invalid';
        this.applyDelete(o);
        break;
      case 'format': {
        if (!this.has(o.start) || !this.has(o.end)) return 'waiting';
        if (!this.chars(o.start, 1) || !this.chars(o.end, 1)) return 'invalid';
        const [sk, so] = this.posOf(o.start);
        const [ek, eo] = this.posOf(o.end);
        if (cmpPos(sk, so, ek, eo) > 0) return 'invalid';
        this.applyFormat(o);
        break;
      }
    }
    this.finish(o);
    this.resetCache();
    return 'applied';
  }

  /**
   * Places a remote insert. The characters between its origins are scanned as in Fugue (FugueMax, which equals
   * the "YjsMod" list algorithm): a concurrent run with the same left origin whose right origin lies before ours
   * may be our sibling's subtree, so we keep scanning without moving; one with the same origins is ordered by
   * (Lamport, client); one whose left origin lies further right belongs to a subtree we skip whole. So two runs
   * typed concurrently at one place end up one after the other, never interleaved.
   */
  private integrate(op: InsertOp): void {
    const items = this.items;
    const leftItem = op.left ? this.splitAfter(op.left) : null;
    const rightItem = op.right ? this.splitBefore(op.right) : null;
    // Keys are read after both splits; nothing is inserted until the scan ends.
    const leftKey = leftItem ? items.key(leftItem) : -1;
    const leftOff = leftItem ? leftItem.text.length - 1 : 0;
    const rightKey = rightItem ? items.key(rightItem) : Infinity;
    const client = op.id[0];
    let dest = leftItem;
    let scanning = false;
    let before = leftItem;
    for (let other = leftItem ? items.next(leftItem) : items.first(); ; before = other, other = items.next(other)) {
      if (!scanning) dest = before;
      if (other === null || other === rightItem) break;
      const [olk, olo] = other.left ? this.posOf(other.left) : [-1, 0];
      const cl = cmpPos(olk, olo, leftKey, leftOff);
      if (cl < 0) break;
      if (cl > 0) continue;
      const [ork, oro] = other.right ? this.posOf(other.right) : [Infinity, 0];
      const cr = ork === Infinity && rightKey === Infinity ? 0 : cmpPos(ork, oro, rightKey, 0);
      if (cr < 0) {
        scanning = true;
      } else if (cr === 0) {
        if (op.lamport < other.lamport || (op.lamport === other.lamport && client < other.client)) break;
        scanning = false;
      } else {
        scanning = false;
      }
    }
    this.place(op, dest);
  }

  /** Puts the run after `prev` (null: first), extending `prev` instead when it is the same client's run continued. */
  private place(op: InsertOp, prev: Item | null): void {
    const [client, seq] = op.id;
    const len = op.text.length;
    this.visible += len;
    // The run's attributes: its own, then every format whose anchors enclose its place (Peritext: text inserted
    // concurrently inside a range is covered). It goes right after prev's last character, so a format covers it
    // when the format starts at or before that character and ends after it.
    let attrs = op.attrs ? mergeAttrs(null, op.attrs, op.lamport, client) : null;
    if (prev !== null && this.formats.length > 0) {
      const pk = this.items.key(prev);
      const po = prev.text.length - 1;
      for (const f of this.formats) {
        const [si, so] = this.posOf(f.start);
        if (cmpPos(si, so, pk, po) > 0) continue;
        const [ei, eo] = this.posOf(f.end);
        if (cmpPos(ei, eo, pk, po) > 0) attrs = mergeAttrs(attrs, f.attrs, f.lamport, f.id[0]);
      }
    }
    if (
      prev !== null &&
      !prev.deleted &&
      prev.client === client &&
      prev.seq + prev.text.length === seq &&
      prev.lamport + prev.text.length === op.lamport &&
      op.left !== null &&
      op.left[0] === client &&
      op.left[1] === seq - 1 &&
      prev.rightIs(op.right) &&
      sameAttrs(prev.attrs, attrs)
    ) {
      prev.text += op.text;
      this.items.changed(prev, len);
      return;
    }
    const it = new Item(client, seq, op.lamport, op.left, op.right, op.text, false, attrs);
    this.items.insertAfter(prev, it);
    let runs = this.byClient.get(client);
    if (!runs) this.byClient.set(client, (runs = []));
    if (runs.length === 0 || runs[runs.length - 1]!.seq < seq) runs.push(it);
    else runs.splice(this.runIndex(runs, seq) + 1, 0, it);
  }

  private applyDelete(op: DeleteOp): void {
    const [c, s] = op.target;
    const end = s + op.length;
    let cur = s;
    let first: Item | null = null;
    let last: Item | null = null;
    while (cur < end) {
      let it = this.findRun([c, cur]);
      if (!it.deleted) {
        if (cur > it.seq) it = this.split(it, cur - it.seq);
        if (it.seq + it.text.length > end) this.split(it, end - it.seq);
        it.deleted = true;
        this.items.changed(it, -it.text.length);
        this.visible -= it.text.length;
        it.text = tomb(it.text.length);
        first ??= it;
        last = it;
      }
      cur = it.seq + it.text.length;
    }
    // The deleted pieces of one run sit together in the list unless something was typed between them.
    if (first !== null && last !== null) {
      const a = this.items.prev(first) ?? first;
      const b = this.items.key(first) <= this.items.key(last) ? last : first;
      this.mergeTombstones(a, b);
    }
  }

  /**
   * Joins neighbouring tombstones that are consecutive pieces of one run (a.next === b: counters, Lamport stamps
   * and anchors continue), from `from` up to the run after `to`: a run split key by key by backspacing becomes one
   * run again, so tombstones cost one run per deleted stretch rather than one per keystroke.
   */
  private mergeTombstones(from: Item, to: Item): void {
    let a: Item | null = from;
    const stop = this.items.next(to);
    while (a !== null) {
      let b = this.items.next(a);
      while (b !== null && a.deleted && b.deleted && a.next === b && a.attrs === b.attrs) {
        a.text = tomb(a.text.length + b.text.length);
        a.next = b.next;
        if (b === stop) {
          this.items.remove(b);
          return;
        }
        this.items.remove(b);
        b = this.items.next(a);
      }
      if (a === to || a === stop) return;
      a = b;
    }
  }

  private applyFormat(op: FormatOp): void {
    const first = this.splitBefore(op.start);
    const last = this.splitAfter(op.end);
    const client = op.id[0];
    for (let it: Item | null = first; it !== null; it = this.items.next(it)) {
      it.attrs = mergeAttrs(it.attrs, op.attrs, op.lamport, client);
      if (it === last) break;
    }
    this.formats.push(op);
  }

  /** Records an applied op: state vector, Lamport clock, log (consecutive typing merged into one insert). */
  private finish(op: Op): void {
    const len = opLength(op);
    this.sv.set(op.id[0], op.id[1] + len - 1);
    this.maxLamport = Math.max(this.maxLamport, op.lamport + len - 1);
    const last = this.lastOp;
    if (
      op.type === 'insert' &&
      last?.type === 'insert' &&
      op.attrs === undefined &&
      last.attrs === undefined &&
      last.id[0] === op.id[0] &&
      last.id[1] + last.text.length === op.id[1] &&
      last.lamport + last.text.length === op.lamport &&
      op.left !== null &&
      op.left[0] === op.id[0] &&
      op.left[1] === op.id[1] - 1 &&
      idEq(last.right, op.right)
    ) {
      this.lastOp = { ...last, text: last.text + op.text };
    } else {
      if (last !== null) this.log.append(last);
      this.lastOp = op;
    }
  }
}

/** The part of an insert after its first k characters (a run known in part). */
function trimInsert(op: InsertOp, k: number): InsertOp {
  const [c, s] = op.id;
  return { ...op, id: [c, s + k], lamport: op.lamport + k, left: [c, s + k - 1], text: op.text.slice(k) };
}
