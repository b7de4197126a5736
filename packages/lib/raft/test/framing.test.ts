/** Length-prefixed frames: splitting, batching, limits, garbage. */
import fc from 'fast-check';
import t from 'tap';
import { MAX_CACHED_ENTRY_BYTES, encodeEntries, entryBytes } from '../src/codec/entry-bytes.js';
import { encodeValue } from '../src/codec/msgpack.js';
import {
  FRAME_HEADER_BYTES,
  FrameDecoder,
  FrameError,
  batchFrames,
  encodeFrame,
  encodeMessageFrame,
} from '../src/transport/framing.js';
import { parseWireFrame } from '../src/transport/wire.js';
import type { Entry, Message } from '../src/types.js';

/** A decoder that collects what it decodes. */
function collector(maxFrameBytes?: number): { decoder: FrameDecoder; frames: unknown[] } {
  const frames: unknown[] = [];
  const decoder = new FrameDecoder((frame) => frames.push(frame), maxFrameBytes === undefined ? {} : { maxFrameBytes });
  return { decoder, frames };
}

/** Equal as MessagePack: a Buffer and a Uint8Array with the same bytes both encode as `bin`. */
function sameEncoding(a: unknown, b: unknown): boolean {
  return Buffer.compare(encodeValue(a), encodeValue(b)) === 0;
}

const values = [
  { kind: 'msg', n: 1 },
  { kind: 'hello', from: 'n1', data: Uint8Array.of(1, 2, 3) },
  'a string',
  [1, 2, { nested: true }],
  { big: new Uint8Array(70_000).fill(9) },
];

t.test('a frame is a 4-byte big-endian length then the payload', async (t) => {
  const frame = encodeFrame({ a: 1 });
  t.equal(frame.readUInt32BE(0), frame.byteLength - FRAME_HEADER_BYTES);
});

t.test('frames split at every byte boundary are reassembled', async (t) => {
  const stream = Buffer.concat(values.slice(0, 4).map((value) => encodeFrame(value)));
  for (let cut = 1; cut < stream.byteLength; cut++) {
    const { decoder, frames } = collector();
    decoder.push(stream.subarray(0, cut));
    decoder.push(stream.subarray(cut));
    if (frames.length !== 4) t.fail(`cut at ${cut}: ${frames.length} frames`);
  }
  const { decoder, frames } = collector();
  for (const byte of stream) decoder.push(Uint8Array.of(byte));
  t.same(frames, values.slice(0, 4), 'one byte at a time');
  t.equal(decoder.bufferedBytes, 0);
});

t.test('many frames in one chunk are all delivered, in order', async (t) => {
  const { decoder, frames } = collector();
  const many = Array.from({ length: 500 }, (_, i) => ({ i }));
  decoder.push(Buffer.concat(many.map((value) => encodeFrame(value))));
  t.same(frames, many);
});

t.test('random chunking never changes what is decoded', async (t) => {
  const stream = Buffer.concat(values.map((value) => encodeFrame(value)));
  fc.assert(
    fc.property(fc.array(fc.integer({ min: 0, max: stream.byteLength }), { maxLength: 12 }), (cuts) => {
      const { decoder, frames } = collector();
      const points = [0, ...[...cuts].sort((a, b) => a - b), stream.byteLength];
      for (let i = 1; i < points.length; i++) decoder.push(stream.subarray(points[i - 1], points[i]));
      return frames.length === values.length && sameEncoding(frames, values);
    }),
    { numRuns: 200 },
  );
  t.pass('200 random chunkings');
});

t.test('an oversized length is refused as soon as the header arrives', async (t) => {
  const { decoder, frames } = collector(1024);
  const ok = encodeFrame({ fine: true });
  const header = Buffer.alloc(FRAME_HEADER_BYTES);
  header.writeUInt32BE(1025);
  // The valid frame before it is still delivered; the oversized one is refused without its payload.
  t.throws(() => decoder.push(Buffer.concat([ok, header])), FrameError);
  t.same(frames, [{ fine: true }]);
  t.throws(() => decoder.push(Buffer.alloc(10)), FrameError, 'a failed decoder refuses further input');

  const huge = collector();
  t.throws(() => huge.decoder.push(Buffer.from([0xff, 0xff, 0xff, 0xff])), FrameError, '4 GiB length');
  const empty = collector();
  t.throws(() => empty.decoder.push(Buffer.from([0, 0, 0, 0])), FrameError, 'zero length');
});

t.test('a frame at exactly the limit is accepted; encodeFrame refuses anything larger', async (t) => {
  const payloadFor = (bytes: Uint8Array) => encodeFrame(bytes).byteLength - FRAME_HEADER_BYTES;
  const limit = payloadFor(new Uint8Array(1000));
  const { decoder, frames } = collector(limit);
  decoder.push(encodeFrame(new Uint8Array(1000), limit));
  t.equal(frames.length, 1);
  t.throws(() => encodeFrame(new Uint8Array(1001), limit), FrameError);
});

t.test('undecodable payloads and trailing bytes are FrameErrors, not crashes', async (t) => {
  const garbage = Buffer.from([0, 0, 0, 3, 0xc1, 0xc1, 0xc1]); // 0xc1 is never used in MessagePack
  t.throws(() => collector().decoder.push(garbage), FrameError);
  const truncated = Buffer.from([0, 0, 0, 1, 0x92]); // an array of two, with no elements
  t.throws(() => collector().decoder.push(truncated), FrameError);
  const trailing = Buffer.from([0, 0, 0, 2, 0x01, 0x02]); // two values in one frame
  t.throws(() => collector().decoder.push(trailing), FrameError);
});

t.test('random bytes never throw anything but FrameError', async (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 1, maxLength: 200 }), (bytes) => {
      const { decoder } = collector(256);
      try {
        decoder.push(bytes);
      } catch (error) {
        return error instanceof FrameError;
      }
      return true;
    }),
    { numRuns: 500 },
  );
  t.pass('500 random inputs');
});

t.test('binary values decode to bytes with the same content', async (t) => {
  const { decoder, frames } = collector();
  decoder.push(encodeFrame({ data: Uint8Array.of(5, 6, 7) }));
  const { data } = frames[0] as { data: Uint8Array };
  t.ok(data instanceof Uint8Array);
  t.same([...data], [5, 6, 7]);
});

// ---------------------------------------------------------------------------------------------------------
// Append frames assembled from cached entry encodings (encodeMessageFrame, codec/entry-bytes.ts)

function entryOf(index: number, dataBytes: number): Entry {
  if (index % 4 === 0) return { index, term: 2, time: 1000 + index, kind: 'noop' };
  if (index % 9 === 0) {
    return {
      index,
      term: 2,
      time: index,
      kind: 'config',
      change: { type: 'addVoter', node: 'n4', address: 'h:1' },
      config: { voters: ['n1', 'n4'], learners: [] },
    };
  }
  return { index, term: 2, time: 1000.5 + index, kind: 'command', data: new Uint8Array(dataBytes).fill(index % 256) };
}

/** Decodes one frame the way a receiving connection does: FrameDecoder, then the strict validator. */
function receive(frame: Buffer): unknown {
  const { decoder, frames } = collector();
  decoder.push(frame);
  if (frames.length !== 1) throw new Error(`${frames.length} frames`);
  return parseWireFrame(frames[0]);
}

t.test(
  'an append frame built from cached entry bytes decodes to the message the ordinary encoding gives',
  async (t) => {
    // 0, 1, 15, 16 and 65,536 entries cross each MessagePack array header size.
    for (const count of [0, 1, 3, 15, 16, 200, 65_536]) {
      const entries = Array.from({ length: count }, (_, i) => entryOf(101 + i, count > 1000 ? 1 : 300));
      const message: Message = {
        type: 'append',
        from: 'n1',
        to: 'n2',
        term: 2,
        prevIndex: 100,
        prevTerm: 1,
        entries,
        commit: 99,
      };
      for (const group of [undefined, 'g7']) {
        const ordinary = receive(
          encodeFrame(
            group === undefined ? { kind: 'msg', message } : { kind: 'msg', message, group },
            64 * 1024 * 1024,
          ),
        );
        const cached = receive(encodeMessageFrame(message, group, 64 * 1024 * 1024));
        t.ok(sameEncoding(cached, ordinary), `${count} entries, group ${String(group)}`);
        // Twice: the second time every entry's bytes come from the cache.
        t.ok(
          sameEncoding(receive(encodeMessageFrame(message, group, 64 * 1024 * 1024)), ordinary),
          `${count} entries again`,
        );
      }
    }
  },
);

t.test('other messages go through encodeMessageFrame unchanged', async (t) => {
  const message: Message = { type: 'heartbeat', from: 'n1', to: 'n2', term: 3, commit: 7, round: 2 };
  t.same(encodeMessageFrame(message, 'g'), encodeFrame({ kind: 'msg', message, group: 'g' }));
  t.same(encodeMessageFrame(message, undefined), encodeFrame({ kind: 'msg', message }));
});

t.test('encodeMessageFrame refuses an append frame over the limit', async (t) => {
  const entries = [entryOf(1, 5000), entryOf(2, 5000)];
  const message: Message = {
    type: 'append',
    from: 'n1',
    to: 'n2',
    term: 2,
    prevIndex: 0,
    prevTerm: 0,
    entries,
    commit: 0,
  };
  const size = encodeMessageFrame(message, undefined).byteLength - FRAME_HEADER_BYTES;
  t.equal(encodeMessageFrame(message, undefined, size).byteLength, size + FRAME_HEADER_BYTES, 'exactly at the limit');
  t.throws(() => encodeMessageFrame(message, undefined, size - 1), FrameError);
});

t.test('a block of entries from cached bytes is exactly their ordinary encoding', async (t) => {
  for (const count of [1, 15, 16, 70_000]) {
    const entries = Array.from({ length: count }, (_, i) => entryOf(1 + i, 3));
    t.equal(Buffer.compare(encodeEntries(entries), encodeValue(entries)), 0, `${count} entries, none kept yet`);
    for (const entry of entries) entryBytes(entry);
    t.equal(Buffer.compare(encodeEntries(entries), encodeValue(entries)), 0, `${count} entries, all kept`);
  }
});

t.test('an entry is encoded once; large ones are not kept', async (t) => {
  const small = entryOf(1, 100);
  t.equal(entryBytes(small), entryBytes(small), 'the same bytes the second time');
  t.same(entryBytes(small), encodeValue(small));
  const large = entryOf(2, MAX_CACHED_ENTRY_BYTES + 1);
  t.not(entryBytes(large), entryBytes(large), 'encoded again each time');
  t.same(entryBytes(large), encodeValue(large));
});

t.test('a batch frame carries its message frames in order, whatever their groups and count', async (t) => {
  for (const n of [2, 15, 16, 300, 70_000]) {
    const sent = Array.from({ length: n }, (_, i) => ({
      group: `g${i % 7}`,
      message: {
        type: 'appendResp',
        from: 'p1',
        to: 'p2',
        term: 3,
        index: i,
        reject: false,
        hintIndex: 0,
        hintTerm: 0,
      } satisfies Message as Message,
    }));
    const frames = sent.map((s) => encodeMessageFrame(s.message, s.group));
    const { decoder, frames: got } = collector(64 * 1024 * 1024);
    decoder.push(batchFrames(frames));
    t.equal(got.length, 1, `${n}: one frame`);
    const parsed = parseWireFrame(got[0]);
    if (parsed.kind !== 'batch') throw new Error(`${n}: a ${parsed.kind} frame`);
    t.same(
      parsed.frames.map((f) => [f.group, (f.message as { index: number }).index]),
      sent.map((s, i) => [s.group, i]),
      `${n}: every message, in order, with its group`,
    );
  }
});

t.test('a batch holds msg frames only, and at least one', async (t) => {
  t.throws(() => parseWireFrame([]), /empty batch/);
  t.throws(() => parseWireFrame([{ kind: 'ping' }]), /item of kind ping/);
});
