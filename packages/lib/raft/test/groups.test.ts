/**
 * Many groups in one process (GroupHost), on real sockets and LevelDB: 200 groups on 3 hosts share one
 * connection per pair of processes, one database and one timer per process; each group keeps its own state; the
 * groups' fsyncs are merged; a host going away leaves every group writable; restarted on its directory it finds
 * its groups on disk, starts them again and catches up. Leaders are balanced; idle groups quiesce, and the groups a
 * dead host led elect new leaders from the silence of its pings alone.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { GroupHost } from '../src/groups/host.js';
import { Register } from './helpers/machines.js';
import { freePorts } from '@raftkit/testkit';

const GROUPS = 200;

async function until(what: string, condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
const names = Array.from({ length: GROUPS }, (_, i) => `g${i}`);
const dir = mkdtempSync(join(tmpdir(), 'groups-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

t.test('200 groups on 3 hosts: shared connections, storage and timer; a host lost and restarted', async (t) => {
  const ports = await freePorts(3);
  const ids = ['h1', 'h2', 'h3'];
  const hostAddresses = Object.fromEntries(ids.map((id, i) => [id, `127.0.0.1:${ports[i]}`]));
  const secret = randomBytes(32);
  const open = (id: string) =>
    GroupHost.open({
      id,
      listen: { host: '127.0.0.1', port: ports[ids.indexOf(id)]! },
      secret,
      dataDir: join(dir, id),
      hosts: hostAddresses,
      tickMs: 50,
    });
  const hosts = new Map(await Promise.all(ids.map(async (id) => [id, await open(id)] as const)));
  t.teardown(() => Promise.all([...hosts.values()].map((h) => h.close())));
  const start = (host: GroupHost, name: string) =>
    host.createGroup<string, string, Register>(name, {
      members: ids,
      stateMachine: new Register(),
      requestTimeoutMs: 60_000,
    });
  await Promise.all([...hosts.values()].flatMap((host) => names.map((name) => start(host, name))));

  // Every group commits a value of its own, proposed on a host that changes from group to group.
  await Promise.all(
    names.map((name, i) =>
      hosts
        .get(ids[i % 3]!)!
        .group<string, string, Register>(name)!
        .propose(`${name}:first`),
    ),
  );
  const h1 = hosts.get('h1')!;
  const values = await Promise.all(names.map((name) => h1.group<string, string, Register>(name)!.read((m) => m.value)));
  t.same(
    values,
    names.map((name) => `${name}:first`),
    'each group holds its own value: no message reached another group',
  );
  const stats = h1.commitStats;
  t.ok(
    stats.written * 4 < stats.requested,
    `h1 merged ${stats.requested} synced writes of its groups into ${stats.written} fsyncs`,
  );

  // Leaders pile up where elections happen to be won; one call spreads them over the three hosts.
  const before = h1.leaderCounts();
  const moved = await h1.balanceLeaders();
  await until(
    'the transfers to be seen',
    () => Object.values(h1.leaderCounts()).every((n) => n <= Math.ceil(GROUPS / 3) + 3),
    30_000,
  );
  const after = h1.leaderCounts();
  const share = Math.ceil(GROUPS / 3);
  t.ok(moved >= 0, `leaders ${JSON.stringify(before)} -> ${JSON.stringify(after)} (${moved} transfers)`);
  for (const id of ids)
    t.ok(
      (after[id] ?? 0) >= share - 5 && (after[id] ?? 0) <= share + 3,
      `${id} leads ${after[id] ?? 0} of ${GROUPS} groups (share ${share})`,
    );

  // Idle groups quiesce: no ticks, no heartbeats; only one ping per pair of processes per tick remains.
  const quiesced = () =>
    [...hosts.values()].reduce((n, host) => n + names.filter((name) => host.group(name)!.quiesced).length, 0);
  await until('every group to quiesce on every host', () => quiesced() === GROUPS * 3, 40_000);
  t.equal(quiesced(), GROUPS * 3, 'all 600 group members quiesced');

  // h3 dies while its groups are quiesced. Nothing is proposed: only the pings' silence can tell h1 and h2,
  // and every group h3 led must elect a new leader by itself.
  const ledByH3 = names.filter((name) => h1.group(name)!.leaderId === 'h3');
  t.ok(ledByH3.length > 20, `h3 leads ${ledByH3.length} groups when it dies`);
  await hosts.get('h3')!.close();
  hosts.delete('h3');
  await until(
    'a new leader in every group h3 led, with no traffic but pings',
    () =>
      ledByH3.every((name) => {
        const leader = h1.group(name)!.leaderId;
        return leader === 'h1' || leader === 'h2';
      }),
    40_000,
  );
  t.pass(`the ${ledByH3.length} groups h3 led elected new leaders on their own`);
  await Promise.all(
    names.map((name, i) =>
      hosts
        .get(ids[i % 2]!)!
        .group<string, string, Register>(name)!
        .propose(`${name}:second`),
    ),
  );

  // h3 comes back on its directory: it finds its groups, starts them, and each catches up.
  const h3 = await open('h3');
  hosts.set('h3', h3);
  const stored = await h3.storedGroups();
  t.equal(stored.length, GROUPS, 'the restarted host knows every group it held');
  await Promise.all(stored.map(({ name }) => start(h3, name)));
  const caughtUp = await Promise.all(
    names.map(async (name) => {
      const group = h3.group<string, string, Register>(name)!;
      await group.readBarrier();
      return group.readLocal((m) => m.value);
    }),
  );
  t.same(
    caughtUp,
    names.map((name) => `${name}:second`),
    'every group caught up on the restarted host',
  );
});
