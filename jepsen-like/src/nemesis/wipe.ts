/**
 * wipe: kill -9 the targets and delete their data (log, hard state, snapshots); stopping the fault brings each back
 * empty, the one safe way Raft allows: the member is removed from the configuration, started with --join (so it
 * founds nothing and waits to be added) and added again under its own id and address; the leader then catches it
 * up by snapshot and log.
 *
 * Why not simply restart it empty with its old --peers: a member that forgets its log and its vote is no longer
 * the voter the others counted. An entry committed on {n1, n2, n3} is lost if n3 is wiped and then votes with n4
 * and n5 (which never had it) for n4, and a wiped member may vote a second time in a term it already voted in.
 * Removing it first makes the remaining members the whole configuration, so every quorum after the wipe holds
 * every committed entry.
 *
 * At most a minority is wiped (WIPE_TARGETS): a wiped majority has lost acknowledged writes by definition.
 */
import { describeFault, type Fault } from './faults.js';
import {
  memberTargets,
  pickWorker,
  resolveTarget,
  workerTargets,
  type ActiveFault,
  type NemesisContext,
  type NemesisHandler,
} from './context.js';

/** How long a membership change may take at the final heal (a leader must be elected; the learner must catch up). */
const CHANGE_MS = 30_000;
/**
 * How long a removal may wait while the run goes on: other faults may hold the quorum away, and the schedule must not
 * stall behind it. A member not removed in time stays down and is brought back at the final heal.
 */
const RUN_REMOVE_MS = 5_000;
/** How long the harness watches a re-added member catch up (a figure for the log; the run goes on regardless). */
const CATCH_UP_MS = 5_000;

/** Wiped members still held down, per run, for the final heal. */
const pending = new WeakMap<NemesisContext, Set<string>>();
/** Wiped members not back yet (their wipe still active, or held down for the final heal), per run. */
const wipedOut = new WeakMap<NemesisContext, Set<string>>();

function wipedOutOf(ctx: NemesisContext): Set<string> {
  let set = wipedOut.get(ctx);
  if (set === undefined) {
    set = new Set();
    wipedOut.set(ctx, set);
  }
  return set;
}

async function rejoin(
  m: string,
  ctx: NemesisContext,
  removeMs: number,
): Promise<{ rejoined: boolean; refused?: string }> {
  const removed = await ctx.cluster.changeMembership('remove', m, Date.now() + removeMs);
  if (!removed.done) return { rejoined: false, refused: `remove: ${removed.last}` };
  ctx.cluster.release(m);
  ctx.cluster.start(m);
  const added = await ctx.cluster.changeMembership('add', m, Date.now() + CHANGE_MS);
  if (!added.done) return { rejoined: false, refused: `add: ${added.last}` };
  // The leader's commit index when it added the member: the empty member must apply up to it (by snapshot and log).
  let leaderCommit = 0;
  try {
    leaderCommit = Number((JSON.parse(added.last) as { commit_index?: number }).commit_index ?? 0);
  } catch {
    // not JSON: no figure
  }
  const deadline = Date.now() + CATCH_UP_MS;
  let applied = 0;
  let snapshot = 0;
  while (Date.now() < deadline) {
    const status = await ctx.cluster.status(m);
    applied = Number(status?.applied_index ?? 0);
    snapshot = Number(status?.snapshot_index ?? 0);
    if (applied >= leaderCommit) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  const caughtUp = applied >= leaderCommit;
  ctx.say(
    `nemesis: wipe: ${m} back empty, applied ${applied} of the leader's ${leaderCommit} at its addition (snapshot index ${snapshot})${caughtUp ? '' : ', not caught up yet'}`,
  );
  return { rejoined: true };
}

export const wipeNemesis: NemesisHandler = {
  async start(id: number, fault: Fault, ctx: NemesisContext): Promise<ActiveFault> {
    if (fault.nemesis !== 'wipe') throw new Error('not a wipe fault');
    const running = ctx.cluster.ids.filter((m) => ctx.cluster.running(m));
    const chosen = ctx.cluster.wipesMembers() ? await resolveTarget(fault.target, running, ctx) : [];
    // Members held down by an earlier wipe (not removed yet: no leader could) count against the minority: a new
    // wipe on top of them would take a majority's data, and the group would never have a quorum again.
    const held = pending.get(ctx)?.size ?? 0;
    const budget = Math.max(0, Math.floor((ctx.cluster.ids.length - 1) / 2) - held);
    const members = chosen.slice(0, budget);
    if (members.length < chosen.length)
      ctx.say(
        `nemesis: wipe: ${held} member(s) still held down by an earlier wipe; ${chosen.length - members.length} spared`,
      );
    // A worker's state is in its memory (a counter store's counters: killing it is wiping it) or in its data folder
    // (a feed or video store), deleted here so that it restarts empty.
    const workers = pickWorker(
      ctx.cluster.faultWorkerIds().filter((w) => ctx.cluster.workerRunning(w)),
      ctx,
    );
    const targets = [...members, ...workers];
    await Promise.all(members.map((m) => ctx.cluster.kill(m)));
    await Promise.all(workers.map((w) => ctx.cluster.killWorker(w)));
    for (const m of members) ctx.cluster.wipe(m);
    for (const w of workers) ctx.cluster.wipeWorker(w);
    return {
      id,
      fault,
      targets,
      detail: {},
      description: `${describeFault(fault)}: ${targets.join(' ') || 'nobody running'}`,
    };
  },
  async stop(active: ActiveFault, ctx: NemesisContext) {
    const rejoined: string[] = [];
    const refused: Record<string, string> = {};
    for (const w of workerTargets(active.targets, ctx)) {
      ctx.cluster.restartWorker(w);
      rejoined.push(w);
    }
    for (const m of memberTargets(active.targets, ctx)) {
      const r = await rejoin(m, ctx, RUN_REMOVE_MS);
      if (r.rejoined) {
        rejoined.push(m);
        wipedOutOf(ctx).delete(m);
      } else {
        // Never start an empty member that is still a voter (above): it stays down until the final heal.
        refused[m] = r.refused!;
        if (r.refused!.startsWith('remove')) {
          const set = pending.get(ctx) ?? new Set<string>();
          set.add(m);
          pending.set(ctx, set);
        }
        ctx.say(`nemesis: wipe: ${m} not back yet (${r.refused}); it stays down until the final heal`);
      }
    }
    return { rejoined, ...(Object.keys(refused).length > 0 ? { refused } : {}) };
  },
  async heal(ctx: NemesisContext) {
    for (const m of pending.get(ctx) ?? []) {
      const r = await rejoin(m, ctx, CHANGE_MS);
      if (r.rejoined) wipedOutOf(ctx).delete(m);
      ctx.say(`heal: wiped ${m} ${r.rejoined ? 'rejoined' : `still out (${r.refused})`}`);
    }
    pending.delete(ctx);
  },
};
