/** kill: SIGKILL the targets; stopping the fault restarts them on their data. */
import type { Fault } from './faults.js';
import { describeFault } from './faults.js';
import {
  memberTargets,
  pickWorker,
  resolveTarget,
  workerTargets,
  type ActiveFault,
  type NemesisContext,
  type NemesisHandler,
} from './context.js';

export const killNemesis: NemesisHandler = {
  async start(id: number, fault: Fault, ctx: NemesisContext): Promise<ActiveFault> {
    if (fault.nemesis !== 'kill') throw new Error('not a kill fault');
    const running = ctx.cluster.ids.filter((m) => ctx.cluster.running(m));
    const workers = pickWorker(
      ctx.cluster.faultWorkerIds().filter((w) => ctx.cluster.workerRunning(w)),
      ctx,
    );
    const targets = [...(await resolveTarget(fault.target, running, ctx)), ...workers];
    await Promise.all(memberTargets(targets, ctx).map((m) => ctx.cluster.kill(m)));
    await Promise.all(workers.map((w) => ctx.cluster.killWorker(w)));
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
    const restarted = memberTargets(active.targets, ctx).filter((m) => !stillKilled.has(m) && !ctx.cluster.running(m));
    for (const m of restarted) ctx.cluster.start(m);
    for (const w of workerTargets(active.targets, ctx)) {
      ctx.cluster.restartWorker(w);
      restarted.push(w);
    }
    return { restarted };
  },
};
