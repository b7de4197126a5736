/**
 * The leases of the consumer groups a coordinator partition leads, kept in its leader's memory (as Kafka's group
 * coordinator keeps its members' session timers): a heartbeat renews a lease here and writes nothing; only a lease
 * that lapsed on this clock becomes a Raft entry (`expire`), proposed by the leader.
 *
 * Pure: the caller passes the time and the leader's term. Leases belong to one term of leadership: a new term (this
 * member elected again, or another's term seen in between) forgets them, and every member of the replicated table
 * without a lease here is granted a full one the first time this leader looks at it, so a failover expels no live
 * member (each had until the new leader's lease ran out to send a heartbeat to it).
 */

export class CoordinatorLeases {
  private term = -1;
  /** Group -> member -> the time (this process's clock) its lease ends. */
  private readonly leases = new Map<string, Map<string, number>>();
  /** Group -> members whose `expire` is proposed and not yet applied. */
  private readonly expiring = new Map<string, Set<string>>();

  /** Starts over when `term` is not the term the leases were granted in. */
  sync(term: number): void {
    if (term === this.term) return;
    this.term = term;
    this.leases.clear();
    this.expiring.clear();
  }

  /** The member's lease runs until `now + ttlMs`. */
  renew(group: string, member: string, ttlMs: number, now: number): void {
    let members = this.leases.get(group);
    if (members === undefined) {
      members = new Map();
      this.leases.set(group, members);
    }
    members.set(member, now + ttlMs);
  }

  /** After a leave: the member holds no lease. */
  forget(group: string, member: string): void {
    this.leases.get(group)?.delete(member);
  }

  /** Whether an `expire` of the member is in flight (its heartbeat must then join again, after it). */
  isExpiring(group: string, member: string): boolean {
    return this.expiring.get(group)?.has(member) ?? false;
  }

  /**
   * The members of `members` (the replicated group, with each one's lease length) whose lease ended by `now`, now
   * marked expiring until `settled` is called; a member seen here for the first time is granted a full lease.
   * Leases of members no longer in the group are dropped.
   */
  lapsed(group: string, members: ReadonlyArray<readonly [string, number]>, now: number): string[] {
    let leases = this.leases.get(group);
    if (leases === undefined) {
      leases = new Map();
      this.leases.set(group, leases);
    }
    const present = new Set(members.map(([m]) => m));
    for (const member of leases.keys()) if (!present.has(member)) leases.delete(member);
    const out: string[] = [];
    for (const [member, ttlMs] of members) {
      if (this.isExpiring(group, member)) continue;
      const until = leases.get(member);
      if (until === undefined) leases.set(member, now + ttlMs);
      else if (until <= now) out.push(member);
    }
    if (out.length > 0) {
      let marked = this.expiring.get(group);
      if (marked === undefined) {
        marked = new Set();
        this.expiring.set(group, marked);
      }
      for (const member of out) {
        marked.add(member);
        leases.delete(member);
      }
    }
    return out;
  }

  /** The `expire` of `members` proposed in `term` was applied (or failed): they are no longer marked expiring. */
  settled(term: number, group: string, members: readonly string[]): void {
    if (term !== this.term) return;
    const marked = this.expiring.get(group);
    if (marked === undefined) return;
    for (const member of members) marked.delete(member);
    if (marked.size === 0) this.expiring.delete(group);
  }

  /** The groups holding a lease or an expiry in flight (for tests and status). */
  get groups(): number {
    return new Set([...this.leases.keys(), ...this.expiring.keys()]).size;
  }
}
