/**
 * How a quiesced group still notices a dead leader. A quiesced group sends no heartbeats, so its followers stop
 * counting towards an election; in their place the process sends pings (any frame says a process is alive) and
 * keeps, per peer process, the tick it last heard anything from it. A quiesced follower whose leader's process has
 * been silent for an election timeout is woken, and so campaigns. Pure (ticks in, decisions out): the GroupHost
 * (one ping per peer process every `pingTicks` for all its groups), a RaftNode on its own transport (its leader
 * pings only its followers, and only while quiesced) and the simulator run this same class.
 */
import type { NodeId } from '../types.js';

/** What liveness needs to know of one group's member on this process. */
interface QuiescedView {
  quiesced: boolean;
  role: string;
  leader: NodeId | null;
}

export class Liveness {
  private ticks = 0;
  /** The tick of this process's (re)start: a peer not heard from since counts as silent from then. */
  private startTick = 0;
  private readonly lastHeard = new Map<NodeId, number>();

  /**
   * @param pingTicks pings go out every this many ticks (1: every tick). It must stay well under the election
   *   timeout: a live peer is silent for up to `pingTicks` ticks between pings, and a follower wakes only after an
   *   election timeout of silence (the caller checks the bound, see `checkPingTicks`).
   */
  constructor(readonly pingTicks = 1) {
    if (!Number.isInteger(pingTicks) || pingTicks < 1)
      throw new RangeError(`pingTicks must be a whole number >= 1, got ${pingTicks}`);
  }

  /** Ticks so far. */
  get tickCount(): number {
    return this.ticks;
  }

  /** One tick; true when pings are due on this one. */
  tick(): boolean {
    this.ticks++;
    return this.ticks % this.pingTicks === 0;
  }

  /** Anything (a message, a heartbeat batch, a ping) arrived from `peer`. */
  heard(peer: NodeId): void {
    this.lastHeard.set(peer, this.ticks);
  }

  /** Ticks since anything came from `peer` (since this start, when nothing has). */
  silentTicks(peer: NodeId): number {
    return this.ticks - (this.lastHeard.get(peer) ?? this.startTick);
  }

  /** Whether something came from `peer` in the last `ticks` ticks. */
  heardWithin(peer: NodeId, ticks: number): boolean {
    const heard = this.lastHeard.get(peer);
    return heard !== undefined && this.ticks - heard <= ticks;
  }

  /** After a restart: nobody has been heard from in this life yet. */
  restart(): void {
    this.lastHeard.clear();
    this.startTick = this.ticks;
  }

  /**
   * The silent ticks to wake a member with (RaftNode.wake / RaftCore.wake), or null when it must stay as it is: a
   * quiesced follower is woken once its leader's process has been silent for `electionTicks` or more.
   */
  wakeAfter(member: QuiescedView, electionTicks: number): number | null {
    if (!member.quiesced || member.role === 'leader' || member.leader === null) return null;
    const silent = this.silentTicks(member.leader);
    return silent >= electionTicks ? silent : null;
  }
}

/**
 * Fails unless pings every `pingTicks` leave a live leader's followers at least two pings per election timeout
 * (so a ping lost or a tick late never wakes a group whose leader is alive).
 */
export function checkPingTicks(pingTicks: number, electionTicks: number): void {
  if (pingTicks * 2 >= electionTicks)
    throw new RangeError(`pingTicks (${pingTicks}) must be under half the election timeout (${electionTicks} ticks)`);
}
