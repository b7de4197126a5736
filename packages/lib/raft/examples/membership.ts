import { LocalNetwork, MemoryStorage, RaftNode, type StateMachine } from '@raftkit/raft';

// A counter replicated by a group that lives in this one process: LocalNetwork carries the messages in memory and
// MemoryStorage keeps the log (use TcpTransport and LevelStorage for real members; nothing else changes).
class Counter implements StateMachine<number, number> {
  total = 0;
  apply(n: number): number {
    return (this.total += n);
  }
  snapshot(): Uint8Array {
    return Buffer.from(String(this.total));
  }
  restore(data: Uint8Array): void {
    this.total = Number(Buffer.from(data).toString());
  }
}

export async function runMembershipExample(): Promise<{ leaders: string[]; voters: string[]; total: number; leader: string | null }> {
  const network = new LocalNetwork();
  const leaders: string[] = [];
  const voters: string[][] = [];
  const start = (id: string, bootstrap: Record<string, string>, peers?: Record<string, string>) =>
    RaftNode.start({
      id,
      bootstrap,
      ...(peers !== undefined ? { peers } : {}),
      tickMs: 10,
      stateMachine: new Counter(),
      storage: new MemoryStorage(),
      transport: network.transport(id),
      // Observing leadership: every member reports its role and leader as they change.
      observer: {
        stateChanged: (state) => {
          if (state.role === 'leader') leaders.push(id);
        },
        membershipChanged: (config) => voters.push([...config.voters]),
      },
    });

  // 1. A brand-new group of three: every member gets the same bootstrap (ids and addresses).
  const founders = { a: 'a', b: 'b', c: 'c' };
  const [a, b, c] = await Promise.all(Object.keys(founders).map((id) => start(id, founders)));
  await a!.propose(5);

  // 2. A member joins the running group: empty bootstrap, the addresses of members it can answer. Then any member
  //    adds it: addVoter adds it as a learner, waits until it has caught up, and promotes it to voter.
  const d = await start('d', {}, founders);
  await b!.addVoter('d', 'd');
  await d.readBarrier(); // d has applied everything committed before this call
  const seenByD = d.readLocal((counter) => counter.total); // a serializable read of its own copy: 5

  // 3. Hand leadership to the new member (from any member; true once d leads), then retire a founder.
  await c!.transferLeadership('d');
  await d.removeMember('a');
  await a!.stop();
  const total = await c!.propose(seenByD); // 10, agreed by b, c and d

  const result = { leaders, voters: voters.at(-1) ?? [], total, leader: c!.leaderId };
  await Promise.all([b!, c!, d].map((node) => node.stop()));
  return result;
}
