/**
 * Which of a Ready's messages a driver may send before the Ready's own writes are durable (Raft dissertation
 * §10.2.1: the leader writes its log in parallel with replicating it). RaftNode and the simulator's driver both
 * use this one rule, so the simulator checks the ordering the library runs.
 *
 * Safe to send early:
 * - `append` and `heartbeat` (a leader's): they promise nothing about this member's disk. The core counts the
 *   leader itself in the commit quorum only once `advance()` reports its entries durable, so an entry still
 *   commits only once a majority holds it on disk.
 * - `propose` and `readIndex` (a follower forwarding client work): they carry no state at all.
 *
 * - a leader's commit news (RaftCore.takeCommitNews), sent while its write is in flight: heartbeats too, under the
 *   same rule below (never while the term or vote being written is new).
 *
 * Never early: every acknowledgement (`appendResp`, `voteResp`, ...) promises that what it acknowledges is on
 * disk; votes and campaigns depend on the term and vote being durable; snapshots are read from storage.
 *
 * And nothing is early when this Ready changes the durable term or vote, or installs a snapshot: a leader's
 * appends carry its term, and a term only the receiver remembers could be reused after a crash (a single voter
 * with learners is elected, sends appends of term T, crashes before writing T, and is elected again in T with a
 * different log). Then the whole Ready goes out after the write, as before.
 *
 * What must be synced at all (`readyMustSync`): entries, a snapshot, a new term or vote. A Ready whose only
 * durable change is the commit index is not written at once: the commit index is a hint that a restarted member
 * relearns from the leader (Raft treats it as volatile; etcd's raft says the same with MustSync), so RaftNode
 * keeps it and writes it with the next write (or unsynced at a clean stop). Losing it in a crash only makes a
 * restart apply less before the leader tells it more; it is always written in order with the rest, so what is
 * durable never moves the commit index back. Without this, every commit a member learns costs it a second write
 * and fsync per round of work (one for the entries, one for the commit index), and the leader's next entries
 * wait behind it.
 */
import type { HardState, Message, Ready } from './types.js';

/** Whether `rd` leaves the durable term and vote as they are and installs no snapshot. */
export function readyAllowsEarlySends(rd: Ready, durable: HardState): boolean {
  if (rd.snapshot !== null) return false;
  const hs = rd.hardState;
  return hs === null || (hs.term === durable.term && hs.vote === durable.vote);
}

/** Whether `rd`'s writes must be durable before its acknowledgements go out (see above). */
export function readyMustSync(rd: Ready, durable: HardState): boolean {
  if (rd.entries.length > 0 || rd.snapshot !== null) return true;
  const hs = rd.hardState;
  return hs !== null && (hs.term !== durable.term || hs.vote !== durable.vote);
}

function earlyType(m: Message): boolean {
  switch (m.type) {
    case 'append':
    case 'heartbeat':
    case 'propose':
    case 'readIndex':
      return true;
    default:
      return false;
  }
}

/** Split `rd.messages` into those sent before the write and those sent after it. */
export function splitMessages(rd: Ready, durable: HardState): { early: Message[]; late: Message[] } {
  if (!readyAllowsEarlySends(rd, durable)) return { early: [], late: rd.messages };
  const early: Message[] = [];
  const late: Message[] = [];
  for (const m of rd.messages) (earlyType(m) ? early : late).push(m);
  return { early, late };
}
