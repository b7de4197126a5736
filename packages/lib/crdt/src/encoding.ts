import type { Attrs, Id, Op } from './types.js';

/**
 * Binary layout (all integers unsigned LEB128 varints):
 *   magic byte ('U' 0x55 for an update, 'D' 0x44 for a whole document), version byte 1,
 *   client count, then each client id as (utf-8 length, bytes),
 *   op count, then each op:
 *     flags byte: bits 0-1 type (0 insert, 1 delete, 2 format), bit 2 has attrs,
 *                 bit 3 left is the op's own previous counter, bit 4 has left, bit 5 has right,
 *                 bit 6 same client as the previous op, bit 7 counter follows the previous op's (seq = previous end)
 *     [client index] unless bit 6, [seq] unless bit 7, lamport - seq (never negative: both advance together),
 *     insert: [left as (client index, seq)] if bit 4 and not bit 3, [right] if bit 5, text (utf-8 length, bytes)
 *     delete: target (client index, seq), length
 *     format: start (client index, seq), end (client index, seq)
 *     attrs (bit 2): JSON text as (utf-8 length, bytes)
 */
export const UPDATE_MAGIC = 0x55;
export const DOC_MAGIC = 0x44;
const VERSION = 1;
const SEAL_BYTES = 64 * 1024;

const enc = new TextEncoder();
const dec = new TextDecoder('utf-8', { fatal: true });

class Writer {
  private buf = new Uint8Array(1024);
  private n = 0;
  private ensure(k: number): void {
    if (this.n + k <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.n + k) size *= 2;
    const b = new Uint8Array(size);
    b.set(this.buf.subarray(0, this.n));
    this.buf = b;
  }
  byte(b: number): void {
    this.ensure(1);
    this.buf[this.n++] = b;
  }
  uint(v: number): void {
    if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`cannot encode ${v} as a varint`);
    this.ensure(8);
    while (v >= 0x80) {
      this.buf[this.n++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.buf[this.n++] = v;
  }
  str(s: string): void {
    const bytes = enc.encode(s);
    this.uint(bytes.length);
    this.ensure(bytes.length);
    this.buf.set(bytes, this.n);
    this.n += bytes.length;
  }
  done(): Uint8Array {
    return this.buf.slice(0, this.n);
  }
  get length(): number {
    return this.n;
  }
  view(): Uint8Array {
    return this.buf.subarray(0, this.n);
  }
  truncate(n: number): void {
    this.n = n;
  }
  bytes(b: Uint8Array): void {
    this.ensure(b.length);
    this.buf.set(b, this.n);
    this.n += b.length;
  }
}

class Reader {
  private p = 0;
  constructor(private readonly buf: Uint8Array) {}
  byte(): number {
    if (this.p >= this.buf.length) throw new RangeError('truncated update');
    return this.buf[this.p++]!;
  }
  uint(): number {
    let v = 0;
    let mul = 1;
    for (;;) {
      const b = this.byte();
      v += (b & 0x7f) * mul;
      if (b < 0x80) break;
      mul *= 0x80;
      if (mul > 2 ** 53) throw new RangeError('varint too long');
    }
    return v;
  }
  str(): string {
    const len = this.uint();
    if (this.p + len > this.buf.length) throw new RangeError('truncated update');
    const s = dec.decode(this.buf.subarray(this.p, this.p + len));
    this.p += len;
    return s;
  }
  get atEnd(): boolean {
    return this.p === this.buf.length;
  }
}

const TYPES = ['insert', 'delete', 'format'] as const;

/**
 * Ops encoded as they are appended, so a document's history costs its encoded size (about 8 bytes an op plus its
 * text) instead of an object per op. Client indexes are assigned on first appearance, exactly as encodeOps does.
 */
export class OpLog {
  private clients = new Map<string, number>();
  /** Sealed parts of the body, each copied to its exact size, so a long log wastes no doubling slack. */
  private sealed: Uint8Array[] = [];
  private sealedBytes = 0;
  private body = new Writer();
  private inTail = false;
  private count = 0;
  private prevClient = '';
  private prevEnd = -1;

  get length(): number {
    return this.count;
  }

  get byteLength(): number {
    return this.sealedBytes + this.body.length;
  }

  private client(c: string): number {
    let i = this.clients.get(c);
    if (i === undefined) this.clients.set(c, (i = this.clients.size));
    return i;
  }

  append(op: Op): void {
    const w = this.body;
    const [c, s] = op.id;
    // Register clients in the order encodeOps does: the op's, then its anchors'.
    const ci = this.client(c);
    const id = (x: Id): void => {
      w.uint(this.client(x[0]));
      w.uint(x[1]);
    };
    if (op.type === 'insert') {
      if (op.left) this.client(op.left[0]);
      if (op.right) this.client(op.right[0]);
    } else if (op.type === 'delete') this.client(op.target[0]);
    else {
      this.client(op.start[0]);
      this.client(op.end[0]);
    }
    const attrs: Attrs | undefined = op.type === 'delete' ? undefined : op.attrs;
    let flags = TYPES.indexOf(op.type);
    if (attrs !== undefined) flags |= 4;
    if (op.type === 'insert') {
      if (op.left && op.left[0] === c && op.left[1] === s - 1) flags |= 8;
      if (op.left) flags |= 16;
      if (op.right) flags |= 32;
    }
    if (c === this.prevClient) flags |= 64;
    if (c === this.prevClient && s === this.prevEnd) flags |= 128;
    w.byte(flags);
    if (!(flags & 64)) w.uint(ci);
    if (!(flags & 128)) w.uint(s);
    w.uint(op.lamport - s);
    if (op.type === 'insert') {
      if (op.left && !(flags & 8)) id(op.left);
      if (op.right) id(op.right);
      w.str(op.text);
    } else if (op.type === 'delete') {
      id(op.target);
      w.uint(op.length);
    } else {
      id(op.start);
      id(op.end);
    }
    if (attrs !== undefined) w.str(JSON.stringify(attrs));
    this.prevClient = c;
    this.prevEnd = s + (op.type === 'insert' ? op.text.length : 1);
    this.count++;
    if (!this.inTail && this.body.length >= SEAL_BYTES) {
      const part = this.body.done();
      this.sealed.push(part);
      this.sealedBytes += part.length;
      this.body = new Writer();
    }
  }

  /** The log, plus `tail` when given (without keeping it), as an update or a document. */
  encode(magic: number, tail: Op | null = null): Uint8Array {
    if (tail !== null) {
      const saved = {
        n: this.body.length,
        count: this.count,
        prevClient: this.prevClient,
        prevEnd: this.prevEnd,
        clients: this.clients.size,
      };
      this.inTail = true;
      this.append(tail);
      this.inTail = false;
      const out = this.encode(magic);
      this.body.truncate(saved.n);
      this.count = saved.count;
      this.prevClient = saved.prevClient;
      this.prevEnd = saved.prevEnd;
      for (const [c, i] of this.clients) if (i >= saved.clients) this.clients.delete(c);
      return out;
    }
    const head = new Writer();
    head.byte(magic);
    head.byte(VERSION);
    head.uint(this.clients.size);
    for (const c of this.clients.keys()) head.str(c);
    head.uint(this.count);
    for (const part of this.sealed) head.bytes(part);
    head.bytes(this.body.view());
    return head.done();
  }
}

export function encodeOps(ops: readonly Op[], magic: number = UPDATE_MAGIC): Uint8Array {
  const log = new OpLog();
  for (const op of ops) log.append(op);
  return log.encode(magic);
}

export function decodeOps(bytes: Uint8Array, magic: number = UPDATE_MAGIC): Op[] {
  const r = new Reader(bytes);
  if (r.byte() !== magic) throw new Error(magic === DOC_MAGIC ? 'not an encoded document' : 'not an encoded update');
  const version = r.byte();
  if (version !== VERSION) throw new Error(`unsupported encoding version ${version}`);
  const nClients = r.uint();
  const clients: string[] = [];
  for (let i = 0; i < nClients; i++) clients.push(r.str());
  const client = (): string => {
    const i = r.uint();
    const c = clients[i];
    if (c === undefined) throw new RangeError(`client index ${i} out of range`);
    return c;
  };
  const id = (): Id => [client(), r.uint()];
  const n = r.uint();
  const ops: Op[] = [];
  let prevClient = '';
  let prevEnd = -1;
  for (let i = 0; i < n; i++) {
    const flags = r.byte();
    const type = TYPES[flags & 3];
    if (type === undefined) throw new RangeError(`bad op type ${flags & 3}`);
    if (flags & 64 && i === 0) throw new RangeError('first op cannot repeat a client');
    const c = flags & 64 ? prevClient : client();
    const s = flags & 128 ? prevEnd : r.uint();
    const lamport = s + r.uint();
    let op: Op;
    if (type === 'insert') {
      const left = flags & 16 ? (flags & 8 ? ([c, s - 1] as Id) : id()) : null;
      const right = flags & 32 ? id() : null;
      const text = r.str();
      op = { type, id: [c, s], lamport, left, right, text };
    } else if (type === 'delete') {
      const target = id();
      op = { type, id: [c, s], lamport, target, length: r.uint() };
    } else {
      const start = id();
      const end = id();
      op = { type, id: [c, s], lamport, start, end, attrs: {} };
    }
    if (flags & 4) {
      if (op.type === 'delete') throw new RangeError('a delete has no attributes');
      const attrs = JSON.parse(r.str()) as unknown;
      if (attrs === null || typeof attrs !== 'object' || Array.isArray(attrs))
        throw new RangeError('attributes must be an object');
      op = { ...op, attrs: attrs as Attrs };
    }
    ops.push(op);
    prevClient = c;
    prevEnd = s + (op.type === 'insert' ? op.text.length : 1);
  }
  if (!r.atEnd) throw new RangeError('trailing bytes after the last op');
  return ops;
}
