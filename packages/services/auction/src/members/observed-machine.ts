/**
 * The auction machine as a member runs it: after each applied command the member's hook sees the command, its
 * result and the entry's time (for the writer's pushes and the projector). The hook runs on every member; it must
 * not throw and must not change the machine, so the replicated state stays the pure machine's.
 */
import type { ApplyContext } from '@raftkit/raft';
import { AuctionMachine, type AuctionCommand, type AuctionLimits, type AuctionResult } from '../machine.js';

interface ApplyHook {
  applied(command: AuctionCommand, result: AuctionResult, time: number): void;
  /** The machine was replaced by a snapshot: derived views must be rebuilt from it. */
  restored(machine: AuctionMachine): void;
}

export class ObservedAuctionMachine extends AuctionMachine {
  constructor(
    private readonly hook: ApplyHook,
    limits: Partial<AuctionLimits> = {},
  ) {
    super(limits);
  }

  override apply(command: AuctionCommand, ctx: ApplyContext): AuctionResult {
    const result = super.apply(command, ctx);
    try {
      this.hook.applied(command, result, ctx.time);
    } catch {
      // A derived view's failure must never fail an entry (it would count as applied with an error everywhere).
    }
    return result;
  }

  override restore(data: Uint8Array): void {
    super.restore(data);
    try {
      this.hook.restored(this);
    } catch {
      // As above.
    }
  }
}
