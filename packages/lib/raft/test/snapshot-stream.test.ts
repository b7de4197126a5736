/** Cutting snapshots into chunk frames and putting them back together. */
import t from 'tap';
import { SnapshotAssembler, SnapshotSender } from '../src/transport/snapshot-stream.js';
import type { SnapshotChunkFrame } from '../src/transport/wire.js';
import type { SnapshotRequest } from '../src/types.js';

function request(bytes: number, index = 10): SnapshotRequest {
  const data = new Uint8Array(bytes).map((_, i) => i % 256);
  const meta = { index, term: 2, time: 0, config: { voters: ['a', 'b'], learners: [] } };
  return { type: 'snapshot', from: 'a', to: 'b', term: 3, snapshot: { meta, data } };
}

function allChunks(sender: SnapshotSender): SnapshotChunkFrame[] {
  const chunks: SnapshotChunkFrame[] = [];
  for (let chunk = sender.nextChunk(); chunk !== null; chunk = sender.nextChunk()) chunks.push(chunk);
  return chunks;
}

t.test('a snapshot is cut into chunks of at most chunkBytes and reassembled', async (t) => {
  const message = request(1000);
  const chunks = allChunks(new SnapshotSender(message, 1, 300));
  t.same(
    chunks.map((c) => [c.offset, c.data.byteLength, c.total]),
    [
      [0, 300, 1000],
      [300, 300, 1000],
      [600, 300, 1000],
      [900, 100, 1000],
    ],
  );
  const assembler = new SnapshotAssembler(1 << 20);
  const results = chunks.map((chunk) => assembler.accept(chunk));
  t.same(results.slice(0, 3), [null, null, null]);
  t.same(results[3], message);
  t.equal(Object.getPrototypeOf(results[3]!.snapshot.data), Uint8Array.prototype);
  t.equal(assembler.bufferedBytes, 0);
});

t.test('an empty snapshot is one empty chunk', async (t) => {
  const chunks = allChunks(new SnapshotSender(request(0), 1, 300));
  t.equal(chunks.length, 1);
  t.same(new SnapshotAssembler(10).accept(chunks[0]!), request(0));
});

t.test('restart produces the stream again from the first chunk', async (t) => {
  const sender = new SnapshotSender(request(500), 4, 200);
  sender.nextChunk();
  sender.restart();
  t.same(
    allChunks(sender).map((c) => c.offset),
    [0, 200, 400],
  );
  t.ok(sender.done);
});

t.test('broken streams are discarded, never delivered', async (t) => {
  const reasons: string[] = [];
  const chunks = allChunks(new SnapshotSender(request(1000), 1, 300));
  const assembler = new SnapshotAssembler(1 << 20, (reason) => reasons.push(reason));

  // A missing chunk.
  assembler.accept(chunks[0]!);
  t.equal(assembler.accept(chunks[2]!), null);
  t.equal(assembler.accept(chunks[3]!), null, 'the rest of a discarded stream is ignored');
  t.equal(assembler.bufferedBytes, 0);

  // A connection closing mid-stream.
  assembler.accept(chunks[0]!);
  assembler.reset();
  t.equal(assembler.accept(chunks[1]!), null);

  // A new stream replacing an unfinished one, then completing.
  const other = allChunks(new SnapshotSender(request(400, 11), 2, 300));
  assembler.accept(chunks[0]!);
  assembler.accept(other[0]!);
  t.same(assembler.accept(other[1]!), request(400, 11));

  // Chunks that disagree with the stream's first chunk.
  assembler.accept(chunks[0]!);
  t.equal(assembler.accept({ ...chunks[1]!, total: 999 }), null);
  assembler.accept(chunks[0]!);
  t.equal(assembler.accept({ ...chunks[1]!, meta: { ...chunks[1]!.meta, term: 9 } }), null);

  // Too large to accept at all.
  t.equal(new SnapshotAssembler(999, (reason) => reasons.push(reason)).accept(chunks[0]!), null);
  t.equal(reasons.length, 6);
});
