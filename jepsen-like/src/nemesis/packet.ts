/** packet: latency, loss or reordering on every link into and out of the targets. */
import type { LinkRule } from '../net/network.js';
import type { PacketRule } from '../net/proxy.js';
import type { Fault } from './faults.js';
import { describeFault } from './faults.js';
import { resolveTarget, type ActiveFault, type NemesisContext, type NemesisHandler } from './context.js';

function packetRule(fault: Extract<Fault, { nemesis: 'packet' }>): PacketRule {
  switch (fault.kind) {
    case 'latency':
      return { delayMs: fault.delayMs, jitterMs: fault.jitterMs, loss: 0, reorder: 0, reorderDelayMs: 0 };
    case 'loss':
      return { delayMs: 0, jitterMs: 0, loss: fault.probability, reorder: 0, reorderDelayMs: 0 };
    case 'reorder':
      return { delayMs: 0, jitterMs: 0, loss: 0, reorder: fault.probability, reorderDelayMs: fault.delayMs };
  }
}

export const packetNemesis: NemesisHandler = {
  async start(id: number, fault: Fault, ctx: NemesisContext): Promise<ActiveFault> {
    if (fault.nemesis !== 'packet') throw new Error('not a packet fault');
    if (ctx.network.packetFaults === 'none') throw new Error('packet faults were not prepared for this run');
    const targets = await resolveTarget(fault.target, ctx.cluster.ids, ctx);
    const rule = packetRule(fault);
    const rules: LinkRule[] = [];
    for (const a of ctx.cluster.ids) {
      for (const b of ctx.cluster.ids) {
        if (a !== b && (targets.includes(a) || targets.includes(b))) rules.push({ from: a, to: b, rule });
      }
    }
    await ctx.network.setPacketRules(rules);
    return {
      id,
      fault,
      targets,
      detail: { via: ctx.network.packetFaults },
      description: `${describeFault(fault)}: ${targets.join(' ')} (via ${ctx.network.packetFaults})`,
    };
  },
  async stop(_active: ActiveFault, ctx: NemesisContext) {
    await ctx.network.setPacketRules([]);
    return {};
  },
};
