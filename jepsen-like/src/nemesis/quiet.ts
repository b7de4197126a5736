/**
 * quiet: no client operation for longer than the cluster's client-session timeout, then traffic again. The members'
 * own sessions lapse in the log while nobody writes; the first operations after the spell must be answered like
 * any other (a member renews its session instead of answering 410 unknown_session). The runner starts the members
 * with RAFTKIT_SESSION_TIMEOUT_MS = QUIET_SESSION_TIMEOUT_MS when this nemesis is chosen, and a spell lasts at
 * least QUIET_MIN_MS whatever the schedule says. A workload's own keep-alives (lock session heartbeats) go on, as a
 * real client's would.
 */
import { describeFault, type Fault } from './faults.js';
import type { ActiveFault, NemesisContext, NemesisHandler } from './context.js';

/** The members' client-session timeout in runs with the quiet nemesis. */
export const QUIET_SESSION_TIMEOUT_MS = 2_000;
/** The shortest spell: longer than the session timeout by half. */
export const QUIET_MIN_MS = 3_000;
/** Operations under way when a spell starts are waited for this long at most. */
const DRAIN_MS = 15_000;

export const quietNemesis: NemesisHandler = {
  async start(id: number, fault: Fault, ctx: NemesisContext): Promise<ActiveFault> {
    if (fault.nemesis !== 'quiet') throw new Error('not a quiet fault');
    await ctx.traffic.hold(DRAIN_MS);
    return {
      id,
      fault,
      targets: [],
      detail: { since: Date.now() },
      description: `${describeFault(fault)}: no client operations`,
    };
  },
  async stop(active: ActiveFault, ctx: NemesisContext) {
    const since = active.detail.since as number;
    const left = since + QUIET_MIN_MS - Date.now();
    if (left > 0) await new Promise((r) => setTimeout(r, left));
    ctx.traffic.release();
    return { quietMs: Date.now() - since };
  },
};
