/**
 * Preferred leaders on ManagedHost over real TCP and LevelDB (three hosts in this process): every group ends up led
 * by the first of its members, which placement rotates over the hosts, so leaders spread evenly by themselves;
 * when a host stops, its groups elect elsewhere, and when it comes back on its directory, leadership returns to it.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ManagedHost } from '../src/groups/managed.js';
import { Counter } from './helpers/machines.js';
import { freePorts } from '@raftkit/testkit';
import { until as waitUntil } from './helpers/transport-member.js';

t.setTimeout(240_000);

/** Waits with this file's default patience (the shared loop, in helpers/transport-member.ts). */
const until = (what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 90_000): Promise<void> =>
  waitUntil(what, condition, timeoutMs);

const dir = mkdtempSync(join(tmpdir(), 'preferred-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const secret = randomBytes(32);
const ids = ['h1', 'h2', 'h3'];
const ports = await freePorts(ids.length);
const address = (id: string): string => `127.0.0.1:${ports[ids.indexOf(id)]}`;
const hosts = new Map<string, ManagedHost>();
t.teardown(async () => {
  await Promise.all([...hosts.values()].map((h) => h.close()));
});

const open = async (id: string): Promise<ManagedHost> => {
  const host = await ManagedHost.open({
    id,
    listen: address(id),
    secret,
    dataDir: join(dir, id),
    hosts: Object.fromEntries(ids.filter((h) => h !== id).map((h) => [h, address(h)])),
    tickMs: 50,
    metaMembers: ids,
    reconcileMs: 300,
    preferredLeaderDelayMs: 1_000,
    groupOptions: (name) => (name.startsWith('g') ? { stateMachine: new Counter(), requestTimeoutMs: 20_000 } : null),
  });
  hosts.set(id, host);
  return host;
};
await Promise.all(ids.map(open));
const h1 = hosts.get('h1')!;
await until('every host registered', () => h1.catalog().hosts().length === ids.length);

const GROUPS = 12;
const created = await h1.proposeMeta({
  t: 'create',
  groups: Array.from({ length: GROUPS }, (_, i) => ({ name: `g${i}`, replicas: 3, data: {} })),
});
if (!created.ok) throw new Error(created.message);
const preferred = new Map(created.groups.map((g) => [g.name, g.members[0]!]));

/** Leaders of the groups as the running hosts see them, when each group's members agree on one. */
function leaders(): Map<string, string | null> {
  const out = new Map<string, string | null>();
  for (const [name] of preferred) {
    const seen = new Set([...hosts.values()].map((h) => h.group(name)?.leaderId).filter((l) => l !== undefined));
    out.set(name, seen.size === 1 ? [...seen][0]! : null);
  }
  return out;
}
const onPreferred = (): boolean => [...leaders()].every(([name, leader]) => leader === preferred.get(name));

t.test('placement rotates the preferred leader over the hosts, and every group ends up led by it', async (t) => {
  const firsts = [...preferred.values()];
  for (const id of ids)
    t.equal(
      firsts.filter((p) => p === id).length,
      GROUPS / ids.length,
      `${id} is preferred for ${GROUPS / ids.length} groups`,
    );
  await until('every group led by its preferred leader', onPreferred);
  for (const name of preferred.keys())
    t.ok(await hosts.get(preferred.get(name)!)!.group(name)!.propose(1), `${name} commits on its leader`);
});

t.test('a stopped host loses its groups to the others; back on its directory, it leads them again', async (t) => {
  const mine = [...preferred].filter(([, p]) => p === 'h3').map(([name]) => name);
  await hosts.get('h3')!.close();
  hosts.delete('h3');
  await until("h3's groups led by the others", () =>
    mine.every((name) => {
      const leader = hosts.get('h1')!.group(name)?.leaderId ?? hosts.get('h2')!.group(name)?.leaderId ?? null;
      return leader === 'h1' || leader === 'h2';
    }),
  );
  t.pass(`${mine.length} groups moved away`);
  await open('h3');
  await until('leadership back on the preferred leaders', onPreferred);
  const counts = ids.map((id) => [...leaders().values()].filter((l) => l === id).length);
  t.same(counts, [4, 4, 4], 'four groups each');
  const h3 = hosts.get('h3')!;
  for (const name of mine) t.ok(h3.group(name)!.isLeader, `${name} led by h3 again`);
});
