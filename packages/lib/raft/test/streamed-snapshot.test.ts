/**
 * A state machine that streams its snapshot (an async generator of chunks) and restores from chunks: a state of
 * about 17 MB, over three times the TCP transport's 4 MiB frame, is snapshotted, shipped to a member that fell behind,
 * and restored there and on a restart, over real TCP and LevelDB; the one-buffer methods are never called.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { RaftNode } from '../src/node.js';
import { LevelStorage } from '../src/storage/leveldb.js';
import { TcpTransport } from '../src/transport/tcp.js';
import type { StateMachine } from '../src/types.js';
import { freePorts } from '@raftkit/testkit';

const PIECE_BYTES = 300_000;
const FRAME_BYTES = 4 * 1024 * 1024;

/** Keeps every piece it is given; its snapshot is the pieces one after another, 64 KiB a chunk. */
class Pieces implements StateMachine<Uint8Array, number> {
  pieces: Buffer[] = [];
  bufferCalls = 0;
  chunksRestored = 0;
  apply(piece: Uint8Array): number {
    this.pieces.push(Buffer.from(piece));
    return this.pieces.length;
  }
  async *snapshot(): AsyncGenerator<Uint8Array> {
    for (const piece of this.pieces) {
      for (let at = 0; at < piece.length; at += 65_536) yield piece.subarray(at, at + 65_536);
      await new Promise((resolve) => setImmediate(resolve)); // a real machine would read its own files here
    }
  }
  restore(): void {
    this.bufferCalls++;
    throw new Error('this machine restores from chunks');
  }
  async restoreChunks(chunks: AsyncIterable<Uint8Array>): Promise<void> {
    const pieces: Buffer[] = [];
    let partial: Buffer = Buffer.alloc(0);
    for await (const chunk of chunks) {
      this.chunksRestored++;
      partial = Buffer.concat([partial, chunk]);
      while (partial.length >= PIECE_BYTES) {
        pieces.push(partial.subarray(0, PIECE_BYTES));
        partial = partial.subarray(PIECE_BYTES);
      }
    }
    if (partial.length !== 0) throw new Error(`a snapshot of whole pieces left ${partial.length} bytes over`);
    this.pieces = pieces;
  }
  digest(): string {
    const hash = createHash('sha256');
    for (const piece of this.pieces) hash.update(piece);
    return `${this.pieces.length}:${hash.digest('hex')}`;
  }
}

const dir = mkdtempSync(join(tmpdir(), 'streamed-snapshot-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

t.test('a streamed snapshot three frames large reaches a lagging member and a restarted one', async (t) => {
  const ports = await freePorts(3);
  const ids = ['s1', 's2', 's3'];
  const addresses = Object.fromEntries(ids.map((id, i) => [id, `127.0.0.1:${ports[i]}`]));
  const secret = randomBytes(32);
  const machines = new Map<string, Pieces>();
  const snapshots: Array<{ id: string; bytes: number }> = [];
  const start = (id: string) => {
    const machine = new Pieces();
    machines.set(id, machine);
    return RaftNode.start<Uint8Array, number, Pieces>({
      id,
      bootstrap: addresses,
      tickMs: 20,
      snapshotEvery: 20,
      stateMachine: machine,
      storage: new LevelStorage(join(dir, id)),
      transport: new TcpTransport({ id, listen: { host: '127.0.0.1', port: ports[ids.indexOf(id)]! }, secret }),
      observer: { snapshotSaved: (bytes) => snapshots.push({ id, bytes }) },
      requestTimeoutMs: 20_000,
    });
  };
  const nodes = new Map(await Promise.all(ids.map(async (id) => [id, await start(id)] as const)));
  await nodes.get('s1')!.propose(randomBytes(PIECE_BYTES));
  await nodes.get('s3')!.stop(); // s3 falls behind
  for (let i = 1; i < 61; i++) await nodes.get('s1')!.propose(randomBytes(PIECE_BYTES));
  const leaderDigest = await nodes.get('s1')!.read((m) => m.digest());
  t.ok(
    snapshots.some((s) => s.bytes > 3 * FRAME_BYTES),
    `snapshots taken: ${snapshots.map((s) => `${s.id} ${s.bytes} B`).join(', ')}`,
  );

  nodes.set('s3', await start('s3'));
  const s3 = nodes.get('s3')!;
  const deadline = Date.now() + 30_000;
  while (s3.readLocal((m) => m.pieces.length) < 61 && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 50));
  await s3.readBarrier();
  t.equal(
    s3.readLocal((m) => m.digest()),
    leaderDigest,
    'the lagging member has the same state',
  );
  t.ok(machines.get('s3')!.chunksRestored > 10, `restored from ${machines.get('s3')!.chunksRestored} chunks`);
  t.ok(
    snapshots.some((s) => s.id === 's3' && s.bytes > 3 * FRAME_BYTES),
    'it got there by a snapshot larger than three frames',
  );

  // A restart restores from its own stored snapshot, through restoreChunks too.
  await nodes.get('s2')!.stop();
  nodes.set('s2', await start('s2'));
  await nodes.get('s2')!.readBarrier();
  t.equal(
    nodes.get('s2')!.readLocal((m) => m.digest()),
    leaderDigest,
    'a restarted member has the same state',
  );
  t.ok(machines.get('s2')!.chunksRestored > 0, 'restored from its stored snapshot by chunks');
  t.equal(
    [...machines.values()].reduce((n, m) => n + m.bufferCalls, 0),
    0,
    'restore(bytes) was never called',
  );
  await Promise.all([...nodes.values()].map((n) => n.stop()));
});
