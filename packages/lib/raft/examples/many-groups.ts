import { join } from 'node:path';
import { ManagedHost, type StateMachine } from '@raftkit/raft';

// Your own state machine, one copy per group: here the stock of one warehouse (deterministic, no I/O).
type Move = { sku: string; delta: number };
class Stock implements StateMachine<Move, number> {
  private counts = new Map<string, number>();
  apply({ sku, delta }: Move): number {
    const next = (this.counts.get(sku) ?? 0) + delta;
    if (next < 0) throw new Error(`not enough ${sku}`); // refused alike on every member; the group goes on
    this.counts.set(sku, next);
    return next;
  }
  count(sku: string): number {
    return this.counts.get(sku) ?? 0;
  }
  snapshot(): Uint8Array {
    return Buffer.from(JSON.stringify([...this.counts]));
  }
  restore(data: Uint8Array): void {
    this.counts = new Map(JSON.parse(Buffer.from(data).toString()) as Array<[string, number]>);
  }
}

const until = async (ready: () => boolean): Promise<void> => {
  while (!ready()) await new Promise((resolve) => setTimeout(resolve, 50));
};

/** Four processes' hosts (here in one process: each with its own port and LevelDB), twelve warehouse groups. */
export async function runManyGroupsExample(options: { ports: number[]; dataDir: string }) {
  const ids = ['p1', 'p2', 'p3', 'p4'];
  const address = (id: string) => `127.0.0.1:${options.ports[ids.indexOf(id)]}`;
  // 1. Every process opens a ManagedHost: one listener, one LevelDB, one timer for all its groups. The first three
  //    found the meta group (the catalogue of hosts and groups); all four are founders here.
  const hosts = await Promise.all(
    ids.map((id) =>
      ManagedHost.open({
        id,
        listen: address(id),
        secret: 'the cluster secret: 32+ random bytes in real life',
        dataDir: join(options.dataDir, id),
        hosts: Object.fromEntries(ids.filter((h) => h !== id).map((h) => [h, address(h)])),
        metaMembers: ids,
        // Which state machine a group of that name runs (null: not one of ours).
        groupOptions: (name) => (name.startsWith('warehouse-') ? { stateMachine: new Stock() } : null),
      }),
    ),
  );
  await until(() => hosts.every((h) => h.catalog().hosts().length === ids.length)); // each registered itself

  // 2. Create groups at runtime, from any process: the meta group places 3 replicas of each on the hosts holding
  //    fewest, and each member host starts its replica by itself.
  const names = Array.from({ length: 12 }, (_, i) => `warehouse-${i}`);
  const created = await hosts[0]!.proposeMeta({ t: 'create', groups: names.map((name) => ({ name, replicas: 3, data: { city: name } })) });
  if (!created.ok) throw new Error(created.message);
  const holders = (name: string) => hosts.filter((h) => h.group(name) !== undefined);
  await until(() => names.every((name) => holders(name).length === 3 && holders(name)[0]!.group(name)!.leaderId !== null));

  // 3. Each group is a RaftNode like any other: propose on any host holding it (forwarded to its leader), read
  //    linearizably.
  for (const name of names) await holders(name)[0]!.group<Move, number>(name)!.propose({ sku: 'bolt', delta: 10 });
  const left = await holders('warehouse-3')[1]!.group<Move, number>('warehouse-3')!.propose({ sku: 'bolt', delta: -4 });
  const read = await holders('warehouse-3')[2]!.group<Move, number, Stock>('warehouse-3')!.read((stock) => stock.count('bolt'));

  // 4. Spread leaders by leadership transfer: each process hands groups to voters that lead fewer, knowing every
  //    process's own count.
  const counts = () => Object.fromEntries(hosts.map((h) => [h.id, h.groupCounts().leaders]));
  for (const h of hosts) await h.balanceLeaders({ leaders: counts() });

  // 5. Drop a group: every host holding it stops it and deletes its data once the meta group confirms.
  await hosts[1]!.proposeMeta({ t: 'drop', names: ['warehouse-11'] });
  await until(() => holders('warehouse-11').length === 0);

  const result = { left, read, replicas: hosts.map((h) => h.groupCounts().groups), leaders: counts() };
  await Promise.all(hosts.map((h) => h.close()));
  return result;
}
