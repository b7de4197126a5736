/** pause: SIGSTOP the targets; stopping the fault sends SIGCONT. */
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

export const pauseNemesis: NemesisHandler = {
  async start(id: number, fault: Fault, ctx: NemesisContext): Promise<ActiveFault> {
    if (fault.nemesis !== 'pause') throw new Error('not a pause fault');
    const candidates = ctx.cluster.ids.filter((m) => ctx.cluster.running(m) && !ctx.cluster.paused(m));
    const targets = await resolveTarget(fault.target, candidates, ctx);
    const workers = pickWorker(
      ctx.cluster.faultWorkerIds().filter((w) => ctx.cluster.workerRunning(w)),
      ctx,
    );
    const paused = [
      ...targets.filter((m) => ctx.cluster.pause(m)),
      ...workers.filter((w) => ctx.cluster.pauseWorker(w)),
    ];
    return {
      id,
      fault,
      targets: paused,
      detail: {},
      description: `${describeFault(fault)}: ${paused.join(' ') || 'nobody running'}`,
    };
  },
  async stop(active: ActiveFault, ctx: NemesisContext) {
    const resumed = [
      ...memberTargets(active.targets, ctx).filter((m) => ctx.cluster.resume(m)),
      ...workerTargets(active.targets, ctx).filter((w) => ctx.cluster.resumeWorker(w)),
    ];
    return { resumed };
  },
};
