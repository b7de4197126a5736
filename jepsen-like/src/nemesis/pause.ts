/** pause: SIGSTOP the targets; stopping the fault sends SIGCONT. */
import type { Fault } from './faults.js';
import { describeFault } from './faults.js';
import { resolveTarget, type ActiveFault, type NemesisContext, type NemesisHandler } from './context.js';

export const pauseNemesis: NemesisHandler = {
  async start(id: number, fault: Fault, ctx: NemesisContext): Promise<ActiveFault> {
    if (fault.nemesis !== 'pause') throw new Error('not a pause fault');
    const candidates = ctx.cluster.ids.filter((m) => ctx.cluster.running(m) && !ctx.cluster.paused(m));
    const targets = await resolveTarget(fault.target, candidates, ctx);
    const paused = targets.filter((m) => ctx.cluster.pause(m));
    return {
      id,
      fault,
      targets: paused,
      detail: {},
      description: `${describeFault(fault)}: ${paused.join(' ') || 'nobody running'}`,
    };
  },
  async stop(active: ActiveFault, ctx: NemesisContext) {
    const resumed = active.targets.filter((m) => ctx.cluster.resume(m));
    return { resumed };
  },
};
