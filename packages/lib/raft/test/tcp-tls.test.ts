/**
 * Mutual TLS on the Raft port, on real sockets with certificates made by the openssl binary: members whose
 * certificates come from the cluster's CA and name their member ids talk; a certificate from another CA, a
 * certificate naming another member, an acceptor that is not the member dialed, and a plaintext dialer are all
 * refused, even when they know the shared secret; and the bytes on the wire are not readable.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { TransportTls } from '../src/transport/tcp.js';
import { HOST, heartbeat, settle, startMember, until, type Member, type Teardown } from './helpers/transport-member.js';

const dir = mkdtempSync(join(tmpdir(), 'raft-tls-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
}

function makeCa(name: string): void {
  openssl(
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.pem`,
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
  );
}

/** A certificate whose Common Name is `cn`, signed by `ca`. */
function issue(ca: string, cn: string, file: string): TransportTls {
  openssl(
    'req',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    `${file}.key`,
    '-out',
    `${file}.csr`,
    '-subj',
    `/CN=${cn}`,
  );
  openssl(
    'x509',
    '-req',
    '-in',
    `${file}.csr`,
    '-CA',
    `${ca}.pem`,
    '-CAkey',
    `${ca}.key`,
    '-CAcreateserial',
    '-out',
    `${file}.pem`,
    '-days',
    '2',
  );
  return {
    cert: readFileSync(join(dir, `${file}.pem`)),
    key: readFileSync(join(dir, `${file}.key`)),
    ca: readFileSync(join(dir, `${ca}.pem`)),
  };
}

makeCa('cluster-ca');
makeCa('other-ca');

/** Sends heartbeats from `from` to `to` for a while; how many arrived. */
async function tryToReach(from: Member, to: Member, rounds = 10): Promise<number> {
  for (let round = 1; round <= rounds; round++) {
    from.transport.send(heartbeat(from.id, to.id, round));
    await settle(50);
  }
  await settle(300);
  return to.received.filter((m) => m.from === from.id).length;
}

const tlsA = issue('cluster-ca', 'member-alpha', 'alpha');
const tlsB = issue('cluster-ca', 'member-bravo', 'bravo');

t.test('members with certificates from the cluster CA naming their ids exchange messages both ways', async (t) => {
  const a = await startMember(t, 'member-alpha', { tls: tlsA });
  const b = await startMember(t, 'member-bravo', { tls: tlsB });
  a.transport.addPeer(b.id, b.address);
  b.transport.addPeer(a.id, a.address);
  a.transport.send(heartbeat(a.id, b.id, 1));
  b.transport.send(heartbeat(b.id, a.id, 2));
  await until('both heartbeats', () => a.received.length === 1 && b.received.length === 1);
  t.same(b.received[0], heartbeat(a.id, b.id, 1));
  t.same(a.received[0], heartbeat(b.id, a.id, 2));
  t.same([...a.warnings, ...b.warnings], [], 'no refusals');
});

t.test('a certificate from another CA is refused, even with the right secret and a known member id', async (t) => {
  const a = await startMember(t, 'member-alpha', { tls: tlsA });
  // The stranger trusts the cluster's CA (so it does not hang up first); its own certificate is from another CA.
  const strangerTls = issue('other-ca', 'member-bravo', 'mallory');
  const mallory = await startMember(t, 'member-bravo', {
    tls: { ...strangerTls, ca: Buffer.concat([tlsA.ca as Buffer, strangerTls.ca as Buffer]) },
  });
  a.transport.addPeer('member-bravo', mallory.address);
  mallory.transport.addPeer(a.id, a.address);
  t.equal(await tryToReach(mallory, a), 0, 'nothing from the stranger was delivered');
  t.ok(
    a.warnings.some((w) => w.includes('refused a TLS connection')),
    `the acceptor says why: ${a.warnings[0]}`,
  );
});

t.test("a member's certificate cannot speak as another member", async (t) => {
  const a = await startMember(t, 'member-alpha', { tls: tlsA });
  // charlie is a member with a good certificate, but it names charlie, and this process claims to be bravo.
  const impostor = await startMember(t, 'member-bravo', { tls: issue('cluster-ca', 'member-charlie', 'charlie') });
  a.transport.addPeer('member-bravo', impostor.address);
  impostor.transport.addPeer(a.id, a.address);
  t.equal(await tryToReach(impostor, a), 0, 'nothing delivered');
  t.ok(
    a.warnings.some((w) => w.includes('certificate issued to "member-charlie"')),
    `refused: ${a.warnings[0]}`,
  );
});

t.test('a dialer refuses an acceptor whose certificate is not the member it meant to reach', async (t) => {
  const b = await startMember(t, 'member-bravo', { tls: tlsB });
  // alpha's address points at a listener holding charlie's (valid) certificate.
  const charlie = await startMember(t, 'member-charlie', { tls: issue('cluster-ca', 'member-charlie', 'charlie2') });
  charlie.transport.addPeer('member-bravo', b.address);
  b.transport.addPeer('member-alpha', charlie.address);
  for (let round = 1; round <= 10; round++) {
    b.transport.send(heartbeat('member-bravo', 'member-alpha', round));
    await settle(50);
  }
  await settle(300);
  t.same(charlie.received, [], 'bravo sent alpha nothing through charlie');
  t.ok(
    b.lines.some((l) => l.includes('is issued to "member-charlie", not member-alpha')),
    'the dialer refused the certificate itself',
  );
});

t.test('a plaintext dialer gets nothing through a TLS listener', async (t) => {
  const a = await startMember(t, 'member-alpha', { tls: tlsA });
  const plain = await startMember(t, 'member-bravo', {});
  a.transport.addPeer('member-bravo', plain.address);
  plain.transport.addPeer(a.id, a.address);
  t.equal(await tryToReach(plain, a), 0);
});

/** A TCP relay that records every byte from the dialer to the acceptor. */
async function recordingRelay(t: Teardown, target: string): Promise<{ address: string; bytes: () => Buffer }> {
  const chunks: Buffer[] = [];
  const [host, port] = target.split(':') as [string, string];
  const sockets: Socket[] = [];
  const relay = createServer((inbound) => {
    const outbound = connect(Number(port), host);
    sockets.push(inbound, outbound);
    inbound.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      outbound.write(chunk);
    });
    outbound.on('data', (chunk: Buffer) => inbound.write(chunk));
    for (const [s, other] of [
      [inbound, outbound],
      [outbound, inbound],
    ] as const) {
      s.on('error', () => other.destroy());
      s.on('close', () => other.destroy());
    }
  });
  await new Promise<void>((resolve) => relay.listen(0, HOST, () => resolve()));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    relay.close();
  });
  return { address: `${HOST}:${(relay.address() as { port: number }).port}`, bytes: () => Buffer.concat(chunks) };
}

t.test('on the wire: member ids readable in plaintext, not with TLS', async (t) => {
  for (const useTls of [false, true]) {
    const a = await startMember(t, 'member-alpha', useTls ? { tls: tlsA } : {});
    const b = await startMember(t, 'member-bravo', useTls ? { tls: tlsB } : {});
    const relay = await recordingRelay(t, a.address);
    b.transport.addPeer(a.id, relay.address);
    a.transport.addPeer(b.id, b.address);
    b.transport.send(heartbeat(b.id, a.id, 1));
    await until('the heartbeat through the relay', () => a.received.length === 1);
    const visible = relay.bytes().includes(Buffer.from('member-bravo'));
    t.equal(
      visible,
      !useTls,
      useTls
        ? 'TLS: the sender id is not in the captured bytes'
        : 'plaintext: the sender id is in the captured bytes (the check can see it)',
    );
    a.transport.close();
    b.transport.close();
  }
});
