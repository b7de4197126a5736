/**
 * The frame reader shared by the Raft transport and @raftkit/rpc: any split of a stream of frames into chunks decodes to the same payloads; a frame
 * announcing more than the limit is refused before it is buffered; a raised limit applies from the next frame.
 */
import fc from 'fast-check';
import t from 'tap';
import { FrameReader, FrameTooLargeError, lengthPrefixed } from '../src/transport/frame-reader.js';

t.test('any chunking of a stream of frames decodes to the same payloads', async (t) => {
  const property = fc.property(
    fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 20 }),
    fc.array(fc.integer({ min: 1, max: 50 }), { minLength: 1, maxLength: 40 }),
    (payloads, cuts) => {
      const stream = Buffer.concat(payloads.map((p) => lengthPrefixed(p)));
      const decoder = new FrameReader(1 << 20);
      const out: Buffer[] = [];
      for (let at = 0, i = 0; at < stream.length; i++) {
        const size = cuts[i % cuts.length]!;
        decoder.push(stream.subarray(at, at + size));
        out.push(...decoder.drain());
        at += size;
      }
      return (
        out.length === payloads.length &&
        out.every((frame, i) => Buffer.from(payloads[i]!).equals(frame)) &&
        decoder.bufferedBytes === 0
      );
    },
  );
  t.same(fc.check(property, { numRuns: 500, seed: 7 }).counterexample, null, 'property holds');
});

t.test('an oversized frame is refused from its length alone; a raised limit applies to the next frame', async (t) => {
  const decoder = new FrameReader(4096);
  decoder.push(lengthPrefixed(Buffer.alloc(100, 1)));
  const head = Buffer.alloc(4);
  head.writeUInt32BE(60_000_000);
  decoder.push(head);
  t.equal(decoder.next()?.length, 100, 'the small frame first');
  t.throws(
    () => decoder.next(),
    FrameTooLargeError,
    'then the 60 MB announcement is refused with nothing of it buffered',
  );
  const raised = new FrameReader(4096);
  raised.push(Buffer.concat([lengthPrefixed(Buffer.from('hello')), lengthPrefixed(Buffer.alloc(10_000, 2))]));
  t.equal(raised.next()?.toString(), 'hello');
  raised.maxFrameBytes = 1 << 20;
  t.equal(raised.next()?.length, 10_000, 'the frame after the raise passes');
});
