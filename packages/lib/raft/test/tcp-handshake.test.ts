/**
 * The TCP transport's authentication on real sockets: only a dialer that holds the cluster secret and speaks as
 * a known member gets in; the dialer talks only to an acceptor that proves the secret too; unauthenticated and
 * stalled connections cannot hold memory or connection slots for long.
 */
import { createServer, type Socket } from 'node:net';
import t from 'tap';
import { encodeFrame } from '../src/transport/framing.js';
import { HANDSHAKE_MAX_FRAME_BYTES } from '../src/transport/handshake.js';
import { TcpTransport } from '../src/transport/tcp.js';
import { PROTOCOL_VERSION } from '../src/transport/wire.js';
import { RawPeer } from './helpers/raw-peer.js';
import { HOST, SECRET, heartbeat, settle, startMember, until } from './helpers/transport-member.js';

t.test('an empty secret is refused at construction', async (t) => {
  for (const secret of ['', new Uint8Array(0)]) {
    t.throws(() => new TcpTransport({ id: 'a', listen: { host: HOST, port: 0 }, secret }), TypeError);
  }
});

t.test('members with the same secret talk; the transport speaks first with a fresh challenge', async (t) => {
  const a = await startMember(t, 'a');
  const b = await startMember(t, 'b');
  a.transport.addPeer('b', b.address);
  b.transport.addPeer('a', a.address);
  a.transport.send(heartbeat('a', 'b', 1));
  await until('the heartbeat', () => b.received.length === 1);
  t.same(b.received, [heartbeat('a', 'b', 1)]);

  const [first, second] = [await RawPeer.open(b.address), await RawPeer.open(b.address)];
  t.teardown(() => (first.destroy(), second.destroy()));
  const [c1, c2] = [await first.frame(0), await second.frame(0)];
  t.ok(c1?.kind === 'challenge' && c2?.kind === 'challenge', 'a challenge on every connection');
  if (c1?.kind === 'challenge' && c2?.kind === 'challenge') {
    t.equal(c1.version, PROTOCOL_VERSION);
    t.ok(c1.nonce.byteLength >= 16, `${c1.nonce.byteLength}-byte nonce`);
    t.not(Buffer.compare(c1.nonce, c2.nonce), 0, 'nonces differ per connection');
  }
});

t.test('a wrong secret is refused in both directions', async (t) => {
  const a = await startMember(t, 'a', { secret: 'another secret' });
  const b = await startMember(t, 'b');
  a.transport.addPeer('b', b.address);
  b.transport.addPeer('a', a.address);
  a.transport.send(heartbeat('a', 'b', 1));
  b.transport.send(heartbeat('b', 'a', 1));
  await until(
    'both sides to refuse a hello',
    () => a.warnings.some((w) => /MAC/.test(w)) && b.warnings.some((w) => /MAC/.test(w)),
  );
  await settle();
  t.same(a.received, [], 'a got nothing from b');
  t.same(b.received, [], 'b got nothing from a');

  const raw = await RawPeer.open(b.address);
  t.teardown(() => raw.destroy());
  const { welcomed } = await raw.handshake('guess', 'a', 'b');
  t.notOk(welcomed, 'no welcome for a wrong MAC');
  t.ok(await raw.closesWithin(5000), 'connection closed');
});

t.test('a member id the transport was not told of is refused, even with the secret', async (t) => {
  const b = await startMember(t, 'b');
  const c = await startMember(t, 'c');
  c.transport.addPeer('b', b.address); // b never adds c.
  c.transport.send(heartbeat('c', 'b', 1));
  await until('b to refuse c', () => b.warnings.some((w) => /not a known member/.test(w)));

  const raw = await RawPeer.open(b.address);
  t.teardown(() => raw.destroy());
  const { welcomed } = await raw.handshake(SECRET, 'evil', 'b');
  t.notOk(welcomed);
  t.ok(await raw.closesWithin(5000), 'connection closed');
  raw.writeFrame({ kind: 'msg', message: heartbeat('evil', 'b', 2) });
  await settle();
  t.same(b.received, []);
});

t.test('a hello addressed to another member is refused', async (t) => {
  const b = await startMember(t, 'b');
  b.transport.addPeer('x', `${HOST}:1`);
  const raw = await RawPeer.open(b.address);
  t.teardown(() => raw.destroy());
  t.notOk((await raw.handshake(SECRET, 'x', 'not-b')).welcomed);
  t.ok(await raw.closesWithin(5000));
});

t.test('a hello replayed on a new connection is refused (the challenge differs)', async (t) => {
  const b = await startMember(t, 'b');
  b.transport.addPeer('x', `${HOST}:1`);
  const honest = await RawPeer.open(b.address);
  t.teardown(() => honest.destroy());
  const { hello, welcomed } = await honest.handshake(SECRET, 'x', 'b');
  t.ok(welcomed, 'the original hello is welcomed');
  honest.writeFrame({ kind: 'msg', message: heartbeat('x', 'b', 1) });
  await until('the honest heartbeat', () => b.received.length === 1);

  const replayer = await RawPeer.open(b.address);
  t.teardown(() => replayer.destroy());
  t.equal((await replayer.frame(0))?.kind, 'challenge');
  replayer.write(Buffer.concat([encodeFrame(hello), encodeFrame({ kind: 'msg', message: heartbeat('x', 'b', 2) })]));
  t.ok(await replayer.closesWithin(5000), 'replay closed');
  t.equal(replayer.frames.length, 1, 'no welcome for the replay');
  await settle();
  t.same(
    b.received.map((m) => (m.type === 'heartbeat' ? m.round : -1)),
    [1],
    'the replayed message was not delivered',
  );
});

t.test('before the handshake only small frames are accepted; after it, full-size ones', async (t) => {
  const b = await startMember(t, 'b');
  const header = Buffer.alloc(4);
  header.writeUInt32BE(HANDSHAKE_MAX_FRAME_BYTES + 1);
  const raw = await RawPeer.open(b.address);
  t.teardown(() => raw.destroy());
  raw.write(header);
  t.ok(await raw.closesWithin(5000), 'an oversized pre-auth frame closes the connection');
  t.ok(
    b.warnings.some((w) => /frame length/.test(w)),
    'and is logged',
  );

  // An authenticated peer still sends frames near the 4 MiB limit over a healthy link.
  const a = await startMember(t, 'a');
  a.transport.addPeer('b', b.address);
  b.transport.addPeer('a', a.address);
  const command = new Uint8Array(4 * 1024 * 1024 - 1024).fill(7);
  a.transport.send({ type: 'propose', from: 'a', to: 'b', term: 0, commands: [command] });
  await until('the large proposal', () => b.received.length === 1, 20_000);
  const got = b.received[0]!;
  t.ok(got.type === 'propose' && got.commands[0]!.byteLength === command.byteLength, 'large frame delivered');
});

t.test('a half-sent frame is closed after frameTimeoutMs; a silent stranger after handshakeTimeoutMs', async (t) => {
  const b = await startMember(t, 'b', { frameTimeoutMs: 300, handshakeTimeoutMs: 300 });
  b.transport.addPeer('x', `${HOST}:1`);
  const stalled = await RawPeer.open(b.address);
  t.teardown(() => stalled.destroy());
  t.ok((await stalled.handshake(SECRET, 'x', 'b')).welcomed);
  const header = Buffer.alloc(4);
  header.writeUInt32BE(1024 * 1024);
  stalled.write(Buffer.concat([header, Buffer.alloc(64 * 1024)]));
  t.ok(await stalled.closesWithin(10_000), 'the connection holding a partial frame was closed');
  t.ok(
    b.warnings.some((w) => /frame incomplete/.test(w)),
    'and the reason logged',
  );

  // A stranger trickling a frame a byte at a time does not keep its connection past the handshake deadline.
  const c = await startMember(t, 'c', { frameTimeoutMs: 60_000, handshakeTimeoutMs: 300 });
  const trickler = await RawPeer.open(c.address);
  t.teardown(() => trickler.destroy());
  const frame = Buffer.concat([Buffer.of(0, 0, 1, 0), Buffer.alloc(256)]);
  let sent = 0;
  const trickle = setInterval(() => trickler.write(frame.subarray(sent, ++sent)), 50);
  t.teardown(() => clearInterval(trickle));
  t.ok(await trickler.closesWithin(10_000), 'the trickling stranger was closed');
  clearInterval(trickle);
  t.ok(
    c.warnings.some((w) => /no handshake in time/.test(w)),
    'for taking too long over its handshake',
  );
});

t.test('inbound connections are capped; handshaking ones count; slots free up when they close', async (t) => {
  const b = await startMember(t, 'b', { maxInboundConnections: 3 });
  const a = await startMember(t, 'a');
  b.transport.addPeer('a', a.address);
  a.transport.addPeer('b', b.address);
  const strangers = [await RawPeer.open(b.address), await RawPeer.open(b.address), await RawPeer.open(b.address)];
  t.teardown(() => strangers.forEach((s) => s.destroy()));
  for (const stranger of strangers) t.equal((await stranger.frame(0))?.kind, 'challenge', 'accepted');

  const extra = await RawPeer.open(b.address);
  t.teardown(() => extra.destroy());
  t.ok(await extra.closesWithin(5000), 'the fourth connection is closed');
  t.equal(extra.frames.length, 0, 'without a challenge');
  t.ok(
    b.warnings.some((w) => /refusing inbound connections/.test(w)),
    'logged',
  );

  a.transport.send(heartbeat('a', 'b', 1));
  await settle();
  t.same(b.received, [], 'even a member is refused while the slots are taken');
  for (const stranger of strangers) stranger.destroy();
  await until('the member to get through once slots free up', () => b.received.length > 0);
  t.same(b.received, [heartbeat('a', 'b', 1)]);
});

t.test('the dialer sends nothing to an acceptor that cannot prove the secret', async (t) => {
  let received = Buffer.alloc(0);
  let connections = 0;
  const sockets = new Set<Socket>();
  const impostor = createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('data', (chunk: Buffer) => (received = Buffer.concat([received, chunk])));
    socket.write(encodeFrame({ kind: 'challenge', version: PROTOCOL_VERSION, nonce: new Uint8Array(32).fill(1) }));
    // Welcomes whatever comes, without knowing the key.
    socket.once('data', () => socket.write(encodeFrame({ kind: 'welcome', mac: new Uint8Array(32) })));
  });
  await new Promise<void>((resolve) => impostor.listen(0, HOST, resolve));
  t.teardown(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => impostor.close(resolve));
  });
  const a = await startMember(t, 'a');
  a.transport.addPeer('b', `${HOST}:${(impostor.address() as { port: number }).port}`);
  a.transport.send(heartbeat('a', 'b', 1));
  await until('a to reject the welcome', () => a.warnings.some((w) => /welcome from b has a wrong MAC/.test(w)));
  await settle();
  t.ok(connections >= 1);
  t.notOk(received.includes(Buffer.from('heartbeat')), 'no message written to the impostor');
});

t.test("removePeer closes that peer's inbound connections, and it cannot come back", async (t) => {
  const a = await startMember(t, 'a');
  const b = await startMember(t, 'b');
  a.transport.addPeer('b', b.address);
  b.transport.addPeer('a', a.address);
  a.transport.send(heartbeat('a', 'b', 1));
  await until('the first heartbeat', () => b.received.length === 1);
  b.transport.removePeer('a');
  // a notices the closed connection only when it writes, and reconnects only with something to send: keep sending.
  let round = 1;
  const sending = setInterval(() => a.transport.send(heartbeat('a', 'b', ++round)), 50);
  t.teardown(() => clearInterval(sending));
  await until('b to refuse a again', () => b.warnings.some((w) => /not a known member/.test(w)));
  await settle();
  clearInterval(sending);
  t.same(b.received, [heartbeat('a', 'b', 1)], 'nothing after removePeer');
});
