/** clock: shift the targets' wall clocks (needs --clock-skew, which loads the preload into the members). */
import type { Fault } from './faults.js';
import { describeFault } from './faults.js';
import { resolveTarget, type ActiveFault, type NemesisContext, type NemesisHandler } from './context.js';

export const clockNemesis: NemesisHandler = {
  async start(id: number, fault: Fault, ctx: NemesisContext): Promise<ActiveFault> {
    if (fault.nemesis !== 'clock') throw new Error('not a clock fault');
    const targets = await resolveTarget(fault.target, ctx.cluster.ids, ctx);
    for (const m of targets) ctx.cluster.setClockOffset(m, fault.offsetMs);
    return {
      id,
      fault,
      targets,
      detail: { offsetMs: fault.offsetMs },
      description: `${describeFault(fault)}: ${targets.join(' ')}`,
    };
  },
  async stop(active: ActiveFault, ctx: NemesisContext) {
    for (const m of active.targets) ctx.cluster.setClockOffset(m, 0);
    return {};
  },
};
