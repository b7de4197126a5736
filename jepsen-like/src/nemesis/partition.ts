/** partition: cut directed links in the real network (namespace mode) or in the proxies (proxy mode). */
import type { Fault } from './faults.js';
import { describeFault } from './faults.js';
import { makeGrudge } from './grudge.js';
import type { ActiveFault, NemesisContext, NemesisHandler } from './context.js';

export const partitionNemesis: NemesisHandler = {
  async start(id: number, fault: Fault, ctx: NemesisContext): Promise<ActiveFault> {
    if (fault.nemesis !== 'partition') throw new Error('not a partition fault');
    const leader = fault.shape === 'isolate-leader' || fault.shape === 'one-way' ? await ctx.cluster.leader() : null;
    const grudge = makeGrudge(fault.shape, ctx.cluster.ids, leader, ctx.rng);
    await ctx.network.setCuts(grudge.links);
    const targets = [...new Set(grudge.links.flatMap((l) => l.split('>')))].sort();
    return {
      id,
      fault,
      targets,
      detail: { links: grudge.links, grudge: grudge.description },
      description: `${describeFault(fault)}: ${grudge.description}`,
    };
  },
  async stop() {
    return {};
  },
};

/** Partitions do not stack: stopping one heals the network (the schedule never runs two at once). */
export async function healNetwork(ctx: NemesisContext): Promise<void> {
  await ctx.network.setCuts([]);
}
