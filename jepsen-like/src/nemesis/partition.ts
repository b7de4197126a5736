/** partition: cut directed links in the real network (namespace mode) or in the proxies (proxy mode). */
import type { Fault } from './faults.js';
import { describeFault } from './faults.js';
import { type Link, makeGrudge } from './grudge.js';
import type { ActiveFault, NemesisContext, NemesisHandler } from './context.js';

export const partitionNemesis: NemesisHandler = {
  async start(id: number, fault: Fault, ctx: NemesisContext): Promise<ActiveFault> {
    if (fault.nemesis !== 'partition') throw new Error('not a partition fault');
    const leader = fault.shape === 'isolate-leader' || fault.shape === 'one-way' ? await ctx.cluster.leader() : null;
    const grudge = makeGrudge(fault.shape, ctx.cluster.ids, leader, ctx.rng);
    await ctx.network.setCuts(grudge.links);
    const workerCut = cutWorkers(ctx);
    if (workerCut !== null) await ctx.network.setWorkerCuts(workerCut.links);
    const links = [...grudge.links, ...(workerCut?.links ?? [])];
    const targets = [...new Set(links.flatMap((l) => l.split('>')))].sort();
    const description = grudge.description + (workerCut === null ? '' : `; ${workerCut.description}`);
    return {
      id,
      fault,
      targets,
      detail: { links, grudge: description },
      description: `${describeFault(fault)}: ${description}`,
    };
  },
  async stop() {
    return {};
  },
};

/**
 * The worker links this partition also cuts (Workload.partitionWorkers): one server process (a counter store) loses
 * its links from one to all of the client processes (check instances), so some clients still reach it while others
 * cannot. Null when the workload asks for none or its workers could not be isolated.
 */
function cutWorkers(ctx: NemesisContext): { links: Link[]; description: string } | null {
  const workers = ctx.cluster.workerPartition();
  if (workers === null || workers.clients.length === 0 || workers.servers.length === 0) return null;
  const server = ctx.rng.pick(workers.servers);
  const cut = ctx.rng
    .shuffle([...workers.clients])
    .slice(0, ctx.rng.int(1, workers.clients.length))
    .sort();
  return {
    links: cut.map((client): Link => `${client}>${server}`),
    description: `${cut.join(',')} cut from ${server}`,
  };
}

/** Partitions do not stack: stopping one heals the network (the schedule never runs two at once). */
export async function healNetwork(ctx: NemesisContext): Promise<void> {
  await ctx.network.setCuts([]);
  await ctx.network.setWorkerCuts([]);
}
