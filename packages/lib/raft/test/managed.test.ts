/**
 * ManagedHost over real TCP and LevelDB (several hosts in this process, each with its own listener and database):
 * groups created and dropped at runtime through the meta group appear and disappear on their member hosts (a
 * dropped group's data leaves the database); a host added later receives replicas, each arriving as a learner
 * and then promoted; a retired host gives them all up; every group keeps its committed data throughout; leaders
 * are spread by leadership transfer; a host restarted on its directory runs its groups again from disk.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Level } from 'level';
import t from 'tap';
import { ManagedHost } from '../src/groups/managed.js';
import { META_GROUP } from '../src/groups/meta.js';
import type { Configuration, StateMachine } from '../src/types.js';
import { freePorts } from '@raftkit/testkit';
import { until as waitUntil } from './helpers/transport-member.js';

t.setTimeout(280_000);

/** Appends strings; the whole list is its state. */
class Ledger implements StateMachine<string, number> {
  items: string[] = [];
  apply(item: string): number {
    return this.items.push(item);
  }
  snapshot(): Uint8Array {
    return Buffer.from(JSON.stringify(this.items));
  }
  restore(data: Uint8Array): void {
    this.items = JSON.parse(Buffer.from(data).toString()) as string[];
  }
}

/** Waits with this file's default patience (the shared loop, in helpers/transport-member.ts). */
const until = (what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 60_000): Promise<void> =>
  waitUntil(what, condition, timeoutMs);

const dir = mkdtempSync(join(tmpdir(), 'managed-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const secret = randomBytes(32);
const ids = ['h1', 'h2', 'h3', 'h4'];
const ports = await freePorts(ids.length);
const address = (id: string): string => `127.0.0.1:${ports[ids.indexOf(id)]}`;
const founders = ['h1', 'h2', 'h3'];
const hosts = new Map<string, ManagedHost>();
const errors: string[] = [];
/** Every configuration each host's members of each group went through, in order: "host group" -> configs. */
const configs = new Map<string, Configuration[]>();

async function open(id: string): Promise<ManagedHost> {
  const host = await ManagedHost.open({
    id,
    listen: address(id),
    secret,
    dataDir: join(dir, id),
    hosts: Object.fromEntries(founders.filter((h) => h !== id).map((h) => [h, address(h)])),
    tickMs: 50,
    metaMembers: founders,
    http: `http://${id}.example:80`,
    reconcileMs: 300,
    // The count-based balancing is tested here; preferred leaders have test/preferred-leaders.test.ts.
    preferredLeaders: false,
    groupOptions: (name) =>
      name.startsWith('g')
        ? {
            stateMachine: new Ledger(),
            requestTimeoutMs: 20_000,
            observer: {
              membershipChanged: (c) =>
                configs.set(`${id} ${name}`, [...(configs.get(`${id} ${name}`) ?? []), structuredClone(c)]),
            },
          }
        : null,
    onError: (what, e) => errors.push(`${id} ${what}: ${(e as Error).message}`),
  });
  hosts.set(id, host);
  return host;
}
t.teardown(async () => {
  await Promise.all([...hosts.values()].map((h) => h.close()));
});

const live = (): ManagedHost[] => [...hosts.values()];
const running = (h: ManagedHost): string[] =>
  h.host
    .groupNames()
    .filter((n) => n !== META_GROUP)
    .sort();
const anyHost = (): ManagedHost => live()[0]!;

/** The group's items, read linearizably through a host that holds it. */
async function items(name: string): Promise<string[]> {
  for (const h of live()) {
    const node = h.group<string, number, Ledger>(name);
    if (node !== undefined) return node.read((m) => [...m.items]);
  }
  throw new Error(`no host runs ${name}`);
}

/** Every group's voters are the members the meta group records, with no learner left, and the move reported. */
async function settled(): Promise<boolean> {
  const catalog = anyHost().catalog();
  for (const record of catalog.groups()) {
    if (!record.settled) return false;
    for (const id of record.members) {
      const node = hosts.get(id)?.group(record.name);
      if (node === undefined) return false;
      const config = node.status().config;
      if (config.learners.length > 0 || [...config.voters].sort().join() !== [...record.members].sort().join())
        return false;
    }
    // And nobody else runs it any more.
    for (const h of live()) if (!record.members.includes(h.id) && h.group(record.name) !== undefined) return false;
  }
  return true;
}

const names = Array.from({ length: 12 }, (_, i) => `g${i}`);

t.test('three founding hosts: the meta group elects, each host registers', async (t) => {
  await Promise.all(founders.map(open));
  await until('every host registered', () => live().every((h) => h.catalog().hosts().length === 3));
  t.same(
    anyHost()
      .catalog()
      .hosts()
      .map((h) => [h.id, h.raft, h.http]),
    founders.map((id) => [id, address(id), `http://${id}.example:80`]),
    'addresses recorded',
  );
  t.ok(live().every((h) => h.isRegistered));
});

t.test('groups created at runtime start on their members; dropped ones stop and lose their data', async (t) => {
  const created = await hosts.get('h2')!.proposeMeta({
    t: 'create',
    groups: names.map((name) => ({ name, replicas: 3, data: { n: Number(name.slice(1)) } })),
  });
  t.ok(created.ok, 'created through a follower or the leader of the meta group');
  await until('every group running on its members with a leader', () =>
    names.every((name) => founders.every((id) => hosts.get(id)!.group(name)?.leaderId != null)),
  );
  for (const [i, name] of names.entries())
    await hosts
      .get(founders[i % 3]!)!
      .group<string, number>(name)!
      .propose(`${name}:a`);
  t.same(await items('g5'), ['g5:a']);

  const dropped = ['g10', 'g11'];
  t.ok((await hosts.get('h3')!.proposeMeta({ t: 'drop', names: dropped })).ok);
  await until('the dropped groups to stop everywhere', () =>
    live().every((h) => dropped.every((n) => h.group(n) === undefined)),
  );
  for (const h of live()) {
    // removeGroup stops the group before it deletes its data: wait for the deletion.
    await until(
      `${h.id} to delete them`,
      async () => !(await h.host.storedGroups()).some((g) => dropped.includes(g.name)),
      10_000,
    );
    t.pass(`${h.id} no longer lists ${dropped.join(', ')} on disk`);
    t.same(running(h), names.slice(0, 10).sort(), `${h.id} runs the other 10`);
  }
  const again = await anyHost().proposeMeta({ t: 'drop', names: ['g10'] });
  t.match(again, { ok: false, code: 'not_found' }, 'dropping it twice is refused');
});

t.test('a group dropped and created again under its name starts empty everywhere', async (t) => {
  const h1 = hosts.get('h1')!;
  t.ok((await h1.proposeMeta({ t: 'drop', names: ['g9'] })).ok);
  // At once, before the hosts had time to delete their copies: refused while any former member still holds one.
  let attempts = 0;
  for (;;) {
    attempts++;
    const r = await h1.proposeMeta({ t: 'create', groups: [{ name: 'g9', replicas: 3, data: { n: 9 } }] });
    if (r.ok) break;
    t.equal(r.code, 'exists', 'refused as existing while its old copies are being deleted');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  await until('g9 running again with a leader', () =>
    founders.every((id) => hosts.get(id)!.group('g9')?.leaderId != null),
  );
  await hosts.get('h2')!.group<string, number>('g9')!.propose('g9:a');
  t.same(
    await items('g9'),
    ['g9:a'],
    `the new g9 holds only what was written to it (created after ${attempts} attempts)`,
  );
  for (const id of founders) {
    await until(
      `g9 on ${id} to apply`,
      () =>
        hosts
          .get(id)!
          .group<string, number, Ledger>('g9')!
          .readLocal((m) => m.items.length) === 1,
    );
    t.same(
      hosts
        .get(id)!
        .group<string, number, Ledger>('g9')!
        .readLocal((m) => [...m.items]),
      ['g9:a'],
      `and so does ${id}'s copy`,
    );
  }
});

t.test('a fourth host joins: replicas move onto it through learners then voters, data intact', async (t) => {
  const h4 = await open('h4');
  await anyHost().admit('h4', address('h4'));
  await until('h4 registered', () => anyHost().catalog().host('h4') !== undefined);
  // Four registered hosts and room for five meta voters: the meta group's leader promotes the learner h4.
  await until('h4 a voter of the meta group', () => anyHost().meta.status().config.voters.includes('h4'), 30_000);
  t.same(
    [...anyHost().meta.status().config.voters].sort(),
    ['h1', 'h2', 'h3', 'h4'],
    'meta voters: the founders and h4',
  );
  // Nobody asks for it: the meta group's leader sees 10/10/10/0 and proposes `spread` by itself.
  await until('replicas to move onto h4', () => (anyHost().catalog().replicaCounts().get('h4') ?? 0) > 0, 30_000);
  await until(
    'every move settled, and nothing left to spread',
    async () => {
      const counts = [...anyHost().catalog().replicaCounts().values()];
      return (await settled()) && Math.max(...counts) - Math.min(...counts) <= 1;
    },
    120_000,
  );
  const counts = anyHost().catalog().replicaCounts();
  t.ok(
    [...counts.values()].every((n) => n >= 7 && n <= 8),
    `30 replicas over 4 hosts: ${JSON.stringify(Object.fromEntries(counts))}`,
  );
  t.equal(running(h4).length, counts.get('h4'), 'h4 runs what the meta group gives it');
  for (const name of running(h4)) {
    // h4 started with no configuration; the first one naming it must make it a learner, the next a voter.
    const seen = (configs.get(`h4 ${name}`) ?? []).filter((c) => c.voters.includes('h4') || c.learners.includes('h4'));
    t.ok(
      seen.length >= 2 && seen[0]!.learners.includes('h4') && seen.at(-1)!.voters.includes('h4'),
      `${name}: h4 was a learner, then a voter`,
    );
    const local = await h4.group<string, number, Ledger>(name)!.read((m) => [...m.items]);
    t.same(local, [`${name}:a`], `${name} on h4 holds what was committed before the move`);
  }
  // Single-server changes: each configuration a member saw differs from the one before by one host at most
  // (a learner added, a learner promoted, or a member removed), and no group ever had more than 4 voters.
  let changes = 0;
  for (const [key, seen] of configs) {
    for (let i = 1; i < seen.length; i++) {
      const a = new Set([...seen[i - 1]!.voters, ...seen[i - 1]!.learners]);
      const b = new Set([...seen[i]!.voters, ...seen[i]!.learners]);
      const diff = [...a].filter((x) => !b.has(x)).length + [...b].filter((x) => !a.has(x)).length;
      if (diff > 1 || seen[i]!.voters.length > 4)
        t.fail(`${key}: ${JSON.stringify(seen[i - 1])} -> ${JSON.stringify(seen[i])}`);
      changes++;
    }
  }
  t.ok(changes >= 7 * 3, `${changes} configuration changes seen, each of one server`);
  for (const name of names.slice(0, 10)) t.same(await items(name), [`${name}:a`], `${name} kept its committed data`);
});

t.test('leaders are spread by leadership transfer', async (t) => {
  const leaders = (): Record<string, number> => Object.fromEntries(live().map((h) => [h.id, h.groupCounts().leaders]));
  await until('every group has a leader', () => Object.values(leaders()).reduce((a, b) => a + b, 0) === 10);
  const before = leaders();
  const moves: string[] = [];
  for (let round = 0; round < 4; round++) {
    for (const h of [...live()].sort((a, b) => leaders()[b.id]! - leaders()[a.id]!)) {
      for (const m of await h.balanceLeaders({ leaders: leaders() })) moves.push(`${m.group}:${m.from}->${m.to}`);
    }
  }
  await until('transfers seen', () => Object.values(leaders()).reduce((a, b) => a + b, 0) === 10);
  const after = leaders();
  t.ok(
    Math.max(...Object.values(after)) - Math.min(...Object.values(after)) <= 1,
    `leaders ${JSON.stringify(before)} -> ${JSON.stringify(after)} (${moves.join(' ')})`,
  );
  const spread = await hosts.get('h1')!.balanceLeaders({ leaders: after });
  t.same(spread, [], 'a balanced cluster moves nothing');
});

t.test('a retired host gives up every replica; the others keep the data', async (t) => {
  const h1 = hosts.get('h1')!;
  const retired = await hosts.get('h3')!.proposeMeta({ t: 'retire', id: 'h1', retiring: true });
  t.ok(retired.ok);
  await until('h1 holds no group', () => running(h1).length === 0, 120_000);
  await until(
    'every move settled, replicas even again',
    async () => {
      const counts = anyHost().catalog().replicaCounts();
      const others = ['h2', 'h3', 'h4'].map((id) => counts.get(id) ?? 0);
      return (await settled()) && Math.max(...others) - Math.min(...others) <= 1;
    },
    120_000,
  );
  t.equal(anyHost().catalog().replicaCounts().get('h1'), 0);
  for (const name of names.slice(0, 10)) t.same(await items(name), [`${name}:a`], `${name} kept its committed data`);
  for (const [i, name] of names.slice(0, 10).entries())
    await hosts
      .get(['h2', 'h3', 'h4'][i % 3]!)!
      .group<string, number>(name)!
      .propose(`${name}:b`);
  const created = await h1.proposeMeta({ t: 'create', groups: [{ name: 'g20', replicas: 3, data: {} }] });
  t.ok(created.ok && !created.groups[0]!.members.includes('h1'), 'a new group avoids the retired host');
});

t.test('a host restarted on its directory runs its groups again from disk', async (t) => {
  const h2 = hosts.get('h2')!;
  await until('g20 running', () => ['h2', 'h3', 'h4'].every((id) => hosts.get(id)!.group('g20') !== undefined));
  const before = running(h2);
  await h2.close();
  hosts.delete('h2');
  // Writes while it is down: it must catch up on them.
  const survivors = before.filter((n) => n !== 'g20');
  for (const name of survivors) {
    const other = live().find((h) => h.group(name) !== undefined)!;
    await other.group<string, number>(name)!.propose(`${name}:c`);
  }
  const again = await open('h2');
  t.same(running(again), before, `h2 starts ${before.length} groups from disk before any reconciliation`);
  for (const name of survivors) {
    await until(
      `${name} caught up on h2`,
      () => again.group<string, number, Ledger>(name)!.readLocal((m) => m.items.length) === 3,
    );
    t.same(
      again.group<string, number, Ledger>(name)!.readLocal((m) => [...m.items]),
      [`${name}:a`, `${name}:b`, `${name}:c`],
      `${name} on h2`,
    );
  }
  // A closed host's database: the dropped groups left no key behind.
  const h1 = hosts.get('h1')!;
  await h1.close();
  hosts.delete('h1');
  const db = new Level<string, string>(join(dir, 'h1'));
  const keys: string[] = [];
  for await (const key of db.keys()) keys.push(key);
  await db.close();
  t.notOk(
    keys.some((k) => /^(g\.g\d+!|groups!g)/.test(k)),
    `h1's database keeps no group's keys after retiring (${keys.length} keys, all meta)`,
  );
  t.ok(
    keys.some((k) => k.startsWith('g.meta!')),
    'but keeps the meta group',
  );
  t.comment(`errors reported and retried: ${errors.length}\n${errors.join('\n')}`);
  t.notOk(
    errors.some((e) => /already runs here/.test(e)),
    'no group was started twice',
  );
});
