/**
 * Regression: a member's Raft port used to accept any connection that named a member id in its hello, and the
 * leader appended the proposals sent on it, so anyone who could reach the port wrote the replicated state
 * without a token. On a real 3-member kv cluster, this plays the attacks on the leader's Raft port (the old
 * unauthenticated hello naming a stranger or a real member, the new hello without a valid MAC, a null command)
 * and checks that no attack key ever appears while the cluster keeps serving writes.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import t from 'tap';
import { encodeRequest } from '@raftkit/raft';
import { Packr } from 'msgpackr';
import { call, startCluster, until, type TestCluster } from '@raftkit/testkit';

t.setTimeout(240_000);

interface MemberRecord {
  id: string;
  raftAddress: string;
}

/** A length-prefixed MessagePack frame, as the Raft transport reads them. */
function frame(value: unknown): Buffer {
  // The Raft transport's msgpack settings (packages/lib/raft/src/codec/msgpack.ts), so the frames decode as a member's would.
  const payload = new Packr({ useRecords: false, mapsAsObjects: true }).pack(value);
  const header = Buffer.alloc(4);
  header.writeUInt32BE(payload.byteLength);
  return Buffer.concat([header, payload]);
}

/** A forwarded proposal whose command would PUT `key` (a raw session request: applied with no client session). */
function putProposal(from: string, to: string, key: string): Buffer {
  const command = encodeRequest({ t: 'raw', command: { op: 'put', key, value: 'written through the raft port' } });
  return frame({ kind: 'msg', message: { type: 'propose', from, to, term: 0, commands: [command] } });
}

/** The hello of protocol version 1: no proof of anything. */
function oldHello(from: string, to: string): Buffer {
  return frame({ kind: 'hello', version: 1, from, to });
}

/** A hello of the authenticated protocol (version 4 since batch frames) with a made-up nonce and MAC. */
function forgedHello(from: string, to: string): Buffer {
  return frame({ kind: 'hello', version: 4, from, to, nonce: randomBytes(32), mac: randomBytes(32) });
}

/** Connects to `address`, writes `bytes`, and gives the member a moment to act on them; then hangs up. */
async function sendRaw(address: string, bytes: Buffer): Promise<void> {
  const colon = address.lastIndexOf(':');
  const socket = connect({ host: address.slice(0, colon), port: Number(address.slice(colon + 1)) });
  socket.on('error', () => {});
  socket.on('data', () => {});
  await new Promise<void>((resolve) => {
    socket.once('connect', () => socket.write(bytes));
    const timer = setTimeout(resolve, 1500);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  socket.destroy();
}

let cluster: TestCluster;
try {
  cluster = await startCluster('kv', { nodes: 3 });
} catch (error) {
  t.fail(`cluster did not start: ${String(error)}`);
  process.exit(1);
}
t.teardown(() => cluster.down());

const members = (JSON.parse(readFileSync(join(cluster.dataDir, 'cluster.json'), 'utf8')) as { members: MemberRecord[] })
  .members;

/** The leader's id, HTTP base URL and Raft address. */
async function leader(): Promise<{ id: string; url: string; raftAddress: string }> {
  return until(
    'a leader',
    async () => {
      for (const url of cluster.members) {
        const answer = await call(url, 'GET', '/v1/cluster/status', { token: cluster.token, timeoutMs: 2000 }).catch(
          () => null,
        );
        const body = answer?.body as { id?: string; role?: string } | undefined;
        if (answer?.status === 200 && body?.role === 'leader' && typeof body.id === 'string') {
          const record = members.find((m) => m.id === body.id);
          if (record !== undefined) return { id: body.id, url, raftAddress: record.raftAddress };
        }
      }
      return null;
    },
    60_000,
  );
}

t.test('proposals sent to the Raft port without the cluster secret never reach the log', async (t) => {
  const lead = await leader();
  const follower = members.find((m) => m.id !== lead.id)!.id;
  const attacks: Array<[string, Buffer]> = [
    [
      'old hello as a stranger',
      Buffer.concat([oldHello('evil', lead.id), putProposal('evil', lead.id, 'attack-old-stranger')]),
    ],
    [
      'old hello as a member',
      Buffer.concat([oldHello(follower, lead.id), putProposal(follower, lead.id, 'attack-old-member')]),
    ],
    [
      'forged hello as a stranger',
      Buffer.concat([forgedHello('evil', lead.id), putProposal('evil', lead.id, 'attack-forged-stranger')]),
    ],
    [
      'forged hello as a member',
      Buffer.concat([forgedHello(follower, lead.id), putProposal(follower, lead.id, 'attack-forged-member')]),
    ],
    [
      'a null command',
      Buffer.concat([
        oldHello('evil', lead.id),
        frame({ kind: 'msg', message: { type: 'propose', from: 'evil', to: lead.id, term: 0, commands: [null] } }),
      ]),
    ],
  ];
  for (const [, bytes] of attacks) await sendRaw(lead.raftAddress, bytes);

  // A write through the API after the attacks: once it is applied, anything the attacks appended before it is too.
  const put = await until(
    'an authorised write',
    async () => {
      const answer = await call(lead.url, 'PUT', '/v1/kv/after-attack', {
        token: cluster.token,
        raw: 'fine',
        headers: { 'content-type': 'text/plain' },
      });
      return answer.status === 200 ? answer : null;
    },
    60_000,
  );
  t.equal(put.status, 200, 'the cluster still serves writes');
  const got = await call(lead.url, 'GET', '/v1/kv/after-attack', { token: cluster.token });
  t.equal(got.body.value, 'fine');

  for (const key of ['attack-old-stranger', 'attack-old-member', 'attack-forged-stranger', 'attack-forged-member']) {
    for (const url of cluster.members) {
      const answer = await call(url, 'GET', `/v1/kv/${key}`, { token: cluster.token });
      t.equal(answer.status, 404, `${key} is absent on ${url}`);
    }
  }
  // Every member is still up.
  for (const url of cluster.members) {
    const status = await call(url, 'GET', '/v1/cluster/status', { token: cluster.token });
    t.equal(status.status, 200, `${url} answers`);
  }
});
