/**
 * Many groups in one process (GroupHost), on real sockets and LevelDB: 200 groups on 3 hosts share one
 * connection per pair of processes, one database and one timer per process; each group keeps its own state; the
 * groups' fsyncs are merged; a host going away leaves every group writable; restarted on its directory it finds
 * its groups on disk, starts them again and catches up.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { GroupHost } from '../src/groups/host.js';
import type { StateMachine } from '../src/types.js';
import { freePorts } from './helpers/ports.js';

class Register implements StateMachine<string, string> {
  value = '';
  apply(value: string): string {
    return (this.value = value);
  }
  snapshot(): Uint8Array {
    return Buffer.from(this.value);
  }
  restore(data: Uint8Array): void {
    this.value = Buffer.from(data).toString();
  }
}

const GROUPS = 200;
const names = Array.from({ length: GROUPS }, (_, i) => `g${i}`);
const dir = mkdtempSync(join(tmpdir(), 'groups-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

t.test('200 groups on 3 hosts: shared connections, storage and timer; a host lost and restarted', async (t) => {
  const ports = await freePorts(3);
  const ids = ['h1', 'h2', 'h3'];
  const hostAddresses = Object.fromEntries(ids.map((id, i) => [id, `127.0.0.1:${ports[i]}`]));
  const secret = randomBytes(32);
  const open = (id: string) =>
    GroupHost.open({ id, listen: { host: '127.0.0.1', port: ports[ids.indexOf(id)]! }, secret, dataDir: join(dir, id), hosts: hostAddresses, tickMs: 20 });
  const hosts = new Map(await Promise.all(ids.map(async (id) => [id, await open(id)] as const)));
  t.teardown(() => Promise.all([...hosts.values()].map((h) => h.close())));
  const start = (host: GroupHost, name: string) => host.createGroup<string, string, Register>(name, { members: ids, stateMachine: new Register(), requestTimeoutMs: 15_000 });
  await Promise.all([...hosts.values()].flatMap((host) => names.map((name) => start(host, name))));

  // Every group commits a value of its own, proposed on a host that changes from group to group.
  await Promise.all(names.map((name, i) => hosts.get(ids[i % 3]!)!.group<string, string, Register>(name)!.propose(`${name}:first`)));
  const h1 = hosts.get('h1')!;
  const values = await Promise.all(names.map((name) => h1.group<string, string, Register>(name)!.read((m) => m.value)));
  t.same(values, names.map((name) => `${name}:first`), 'each group holds its own value: no message reached another group');
  const stats = h1.commitStats;
  t.ok(stats.written * 4 < stats.requested, `h1 merged ${stats.requested} synced writes of its groups into ${stats.written} fsyncs`);

  // h3 goes away (its process dies): every group still has a majority and takes writes.
  await hosts.get('h3')!.close();
  hosts.delete('h3');
  await Promise.all(names.map((name, i) => hosts.get(ids[i % 2]!)!.group<string, string, Register>(name)!.propose(`${name}:second`)));

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
  t.same(caughtUp, names.map((name) => `${name}:second`), 'every group caught up on the restarted host');
  const leaders = new Map<string, number>();
  for (const name of names) {
    const leader = h1.group(name)!.leaderId ?? 'none';
    leaders.set(leader, (leaders.get(leader) ?? 0) + 1);
  }
  t.notOk(leaders.has('none'), `every group has a leader: ${JSON.stringify(Object.fromEntries(leaders))}`);

  // Leaders piled up where elections were won (h3 was away); one call spreads them over the three hosts.
  const moved = await h1.balanceLeaders();
  await new Promise((resolve) => setTimeout(resolve, 200));
  const after = h1.leaderCounts();
  t.ok(moved > 0, `${moved} leaderships transferred`);
  const share = Math.ceil(GROUPS / 3);
  for (const id of ids) t.ok((after[id] ?? 0) >= share - 5 && (after[id] ?? 0) <= share + 3, `${id} leads ${after[id] ?? 0} of ${GROUPS} groups (share ${share})`);
});
