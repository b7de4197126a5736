/**
 * Preferred leaders (as Kafka's preferred replica election, CockroachDB's lease preferences): each group names one
 * of its members as the leader it should have, and a host that leads a settled group whose preferred leader's
 * process is alive hands leadership over to it. Placement that rotates the preferred place over the hosts then
 * spreads leaders evenly by itself, after creation and again after a process comes back, with nobody running a
 * balance. GroupHost (option `preferredLeaders`) and ManagedHost both run their groups through this one pass.
 */
import type { RaftNode } from '../node.js';
import type { NodeId } from '../types.js';

/** How eagerly the pass hands groups over. */
export interface PreferredLeaderOptions {
  /** A host must have led a group this long in one term before handing it over (it has settled). */
  delayMs: number;
  /** After a failed transfer, the group waits this long before the next try. Default 30,000. */
  retryMs?: number;
  /** Most transfers under way at once from this host. Default 8. */
  maxInFlight?: number;
  /** Whether the process `id` has been heard from lately: a silent one is not given leadership. */
  heard(id: NodeId): boolean;
}

type AnyNode = RaftNode<unknown, unknown>;

/** The preferred-leader pass of one host, called for each group it runs (`consider`), as often as it likes. */
export class PreferredLeaders {
  /** Groups this host leads: since when (its term then). */
  private readonly leadingSince = new Map<string, { term: number; since: number }>();
  /** Groups whose last transfer failed, and when. */
  private readonly failedAt = new Map<string, number>();
  private readonly moving = new Set<string>();

  constructor(
    private readonly selfId: NodeId,
    private readonly options: PreferredLeaderOptions,
  ) {}

  /** Transfers under way. */
  get inFlight(): number {
    return this.moving.size;
  }

  /**
   * Hands `node` (group `name`, led here) to `preferred` when that is due: this host has led it for `delayMs` in
   * its current term, the preferred host is a voter and alive, and no earlier transfer of it failed lately.
   * `busy`: the caller's own work on the group (a membership change) that a transfer must not cross. Returns the
   * transfer when one starts (the caller may hold its own work on the group until it ends), null otherwise.
   */
  consider(name: string, preferred: NodeId | undefined, node: AnyNode, busy = false): Promise<void> | null {
    // Most groups a host leads are its own preferred ones once leaders have spread: those cost nothing here.
    if (!node.isLeader || preferred === undefined || preferred === this.selfId) {
      this.leadingSince.delete(name);
      return null;
    }
    // status() copies the configuration and the peers' progress: asked only for groups led by the wrong host.
    const status = node.status();
    const now = Date.now();
    let leading = this.leadingSince.get(name);
    if (leading === undefined || leading.term !== status.term)
      this.leadingSince.set(name, (leading = { term: status.term, since: now }));
    if (!status.config.voters.includes(preferred)) return null;
    if (now - leading.since < this.options.delayMs) return null;
    if (now - (this.failedAt.get(name) ?? 0) < (this.options.retryMs ?? 30_000)) return null;
    if (busy || this.moving.has(name) || this.moving.size >= (this.options.maxInFlight ?? 8)) return null;
    // A process that has sent nothing lately is not given leadership (it would only fail, or lose it again).
    if (!this.options.heard(preferred)) return null;
    this.moving.add(name);
    return node
      .transferLeadership(preferred)
      .catch(() => false)
      .then((moved) => {
        if (!moved) this.failedAt.set(name, Date.now());
      })
      .finally(() => this.moving.delete(name));
  }

  /** Forgets a group (stopped or deleted here). */
  forget(name: string): void {
    this.leadingSince.delete(name);
    this.failedAt.delete(name);
  }
}
