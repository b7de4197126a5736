/** The bound on what a client may send before its join completes (src/workers/editor/early-frames.ts). */
import t from 'tap';
import { EarlyFrames, frameBytes, MAX_EARLY_BYTES } from '../src/workers/editor/early-frames.js';
import { MAX_FRAME_BYTES } from '../src/protocol.js';

t.test('frames are kept in order up to the bound, then refused and dropped', (t) => {
  const early = new EarlyFrames(10);
  t.ok(early.push(Buffer.from('abcd')), 'first frame kept');
  t.ok(early.push(Buffer.from('efghij')), 'second frame kept: exactly at the bound');
  t.same(
    early.frames.map((f) => String(f)),
    ['abcd', 'efghij'],
    'in order',
  );
  t.notOk(early.push(Buffer.from('k')), 'one byte more is refused');
  t.equal(early.frames.length, 0, 'the backlog is dropped (the socket closes)');
  t.end();
});

t.test('the default bound holds two full frames and no more', (t) => {
  t.equal(MAX_EARLY_BYTES, 2 * MAX_FRAME_BYTES);
  const early = new EarlyFrames();
  const full = Buffer.alloc(MAX_FRAME_BYTES);
  t.ok(early.push(full));
  t.ok(early.push(full));
  t.notOk(early.push(Buffer.alloc(1)), 'a third frame of any size is refused');
  t.end();
});

t.test('frame sizes of every kind ws delivers', (t) => {
  t.equal(frameBytes(Buffer.alloc(7)), 7, 'Buffer');
  t.equal(frameBytes(new ArrayBuffer(5)), 5, 'ArrayBuffer');
  t.equal(frameBytes([Buffer.alloc(2), Buffer.alloc(3)]), 5, 'fragments');
  t.end();
});
