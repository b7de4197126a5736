/** kill: SIGKILL the targets; stopping the fault restarts them on their data. */
import type { Fault } from './faults.js';
import { describeFault } from './faults.js';
import { resolveTarget, type ActiveFault, type NemesisContext, type NemesisHandler } from './context.js';

export const killNemesis: NemesisHandler = {
  async start(id: number, fault: Fault, ctx: NemesisContext): Promise<ActiveFault> {
    if (fault.nemesis !== 'kill') throw new Error('not a kill fault');
    const running = ctx.cluster.ids.filter((m) => ctx.cluster.running(m));
    const targets = await resolveTarget(fault.target, running, ctx);
    await Promise.all(targets.map((m) => ctx.cluster.kill(m)));
    return {
      id,
      fault,
      targets,
      detail: {},
      description: `${describeFault(fault)}: ${targets.join(' ') || 'nobody running'}`,
    };
  },
  async stop(active: ActiveFault, ctx: NemesisContext, others: readonly ActiveFault[]) {
    // A member also killed by another active kill stays down until that one stops.
    const stillKilled = new Set(others.filter((o) => o.fault.nemesis === 'kill').flatMap((o) => o.targets));
    const restarted = active.targets.filter((m) => !stillKilled.has(m) && !ctx.cluster.running(m));
    for (const m of restarted) ctx.cluster.start(m);
    return { restarted };
  },
};
