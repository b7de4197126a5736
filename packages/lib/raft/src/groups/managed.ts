/**
 * A GroupHost steered by the meta group: the groups this process runs follow what the meta group records.
 * Every host runs the meta group (the founding hosts as voters, later hosts as learners); after each change to it,
 * and once a second, each host reconciles: it starts the groups it should hold (founding them or joining them),
 * the leader of each group carries out replica moves one single-server change at a time (a learner first, promoted
 * once caught up, then the old member removed), and a host drops a group only once the meta group says so after a
 * read barrier (so a host whose meta replica lags never deletes data it should keep).
 */
import type { RaftNode, NodeObserver } from '../node.js';
import type { NodeId, StateMachine } from '../types.js';
import { GroupHost, type GroupHostOptions, type GroupOptions } from './host.js';
import { META_GROUP, MetaMachine, type GroupRecord, type MetaCommand, type MetaResult } from './meta.js';
import { PreferredLeaders } from './preferred.js';

/** A group's own settings, as the application chooses them from its name. */
export type ManagedGroupOptions = Omit<
  GroupOptions<unknown, unknown, StateMachine<unknown, unknown>>,
  'members' | 'join'
>;

export interface ManagedHostOptions extends GroupHostOptions {
  /**
   * The hosts founding the meta group (the cluster's first processes, the same list on each). A host not among
   * them joins the meta group as a learner: a member adds it with `admit()`.
   */
  metaMembers: NodeId[];
  /** This host's HTTP endpoint ("http://host:port"), recorded in the meta group for routers. */
  http?: string | null;
  /** The settings of the group of that name (its state machine, options), or null for a name this host ignores. */
  groupOptions(name: string): ManagedGroupOptions | null;
  /** Milliseconds between reconciliations when nothing changed. Default 1000. */
  reconcileMs?: number;
  /**
   * Even out replicas by itself: when every move has settled and the hosts taking replicas differ by more than one,
   * the meta group's leader proposes `spread` (so a process added, or one retired, ends up with its share without
   * anyone asking). Default true.
   */
  autoSpread?: boolean;
  /**
   * Preferred leaders (as Kafka's preferred replica election): the first of a group's `members` is its preferred
   * leader, and placement rotates that first place over the hosts, so handing each group to its preferred leader
   * spreads leaders evenly. A host that has led a settled group for `preferredLeaderDelayMs` (default 10 s)
   * while its preferred leader's process is alive transfers leadership to it; after a failover, leadership comes
   * back once the preferred process returns. A failed transfer waits 30 s before the next try. Default true.
   */
  preferredLeaders?: boolean;
  /**
   * How many voters the meta group keeps when that many processes are registered and not retiring (default 5):
   * its leader promotes a caught-up learner (a process added later) while it has fewer, so replacing the
   * founding processes one by one never leaves the catalogue without a quorum.
   */
  metaVoters?: number;
  /** See `preferredLeaders`. Default 10,000. */
  preferredLeaderDelayMs?: number | undefined;
  /** Called when a reconciliation step fails (it is retried on the next round). */
  onError?: (what: string, error: unknown) => void;
}

type AnyNode = RaftNode<unknown, unknown>;

/**
 * A GroupHost whose groups follow the meta group (see the module comment): open one per process with
 * `ManagedHost.open`, create and drop groups with `proposeMeta`, reach a running group with `group(name)`.
 */
export class ManagedHost {
  private readonly busy = new Set<string>();
  /** The preferred-leader pass (src/groups/preferred.ts). */
  private readonly preferred: PreferredLeaders;
  private timer: NodeJS.Timeout | null = null;
  private reconciling: Promise<void> | null = null;
  private again = false;
  private closed = false;
  private registered = false;
  /** Set once `open` has started the groups on disk: reconciling before that would start them twice. */
  private opened = false;

  private constructor(
    readonly host: GroupHost,
    readonly meta: RaftNode<MetaCommand, MetaResult, MetaMachine>,
    private readonly options: ManagedHostOptions,
  ) {
    this.preferred = new PreferredLeaders(host.id, {
      delayMs: options.preferredLeaderDelayMs ?? 10_000,
      heard: (id) => host.heardFrom(id, host.pingTicks + 2),
    });
  }

  /**
   * Opens the process's GroupHost, starts the meta group (founding it, or joining it as a learner when this host is
   * not among `metaMembers`) and the groups on disk, then reconciles with the meta group from then on.
   */
  static async open(options: ManagedHostOptions): Promise<ManagedHost> {
    // Its own preferred-leader pass follows the catalogue: the GroupHost's would follow creation order instead.
    const { leaderPreference: _unused, ...hostOptions } = options;
    const host = await GroupHost.open(hostOptions);
    let managed: ManagedHost | null = null;
    const observer: NodeObserver = {
      applied: () => managed?.schedule(),
      stateChanged: () => managed?.schedule(),
    };
    const stored = await host.storedGroups();
    const metaStored = stored.find((g) => g.name === META_GROUP);
    const joinMeta = metaStored?.join ?? !options.metaMembers.includes(options.id);
    const meta = await host.createGroup<MetaCommand, MetaResult, MetaMachine>(META_GROUP, {
      members: metaStored?.members ?? options.metaMembers,
      join: joinMeta,
      stateMachine: new MetaMachine(),
      observer,
    });
    managed = new ManagedHost(host, meta, options);
    // The meta group's committed entries on disk are applied from here on: wait for them, so the hosts that joined
    // since this process last ran (their addresses are in the catalogue only) are known before its groups start.
    const commit = meta.status().commit;
    const deadline = Date.now() + 10_000;
    while (meta.status().applied < commit && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 10));
    for (const h of managed.catalog().hosts())
      if (h.id !== options.id && host.hostAddress(h.id) !== h.raft) host.addHost(h.id, h.raft);
    for (const group of stored) {
      if (group.name === META_GROUP) continue;
      const settings = options.groupOptions(group.name);
      if (settings === null) continue;
      // A group on disk runs from its own stored configuration (with its peers' addresses); `members` only had to
      // name hosts this process can reach. One that cannot start now is started by reconciliation, or dropped.
      const members = group.join ? group.members.filter((m) => host.hostAddress(m) !== undefined) : group.members;
      await host
        .createGroup(group.name, { ...settings, members, join: group.join })
        .catch((e: unknown) => options.onError?.(`restart ${group.name}`, e));
    }
    managed.opened = true;
    managed.timer = setInterval(() => managed.schedule(), options.reconcileMs ?? 1000);
    managed.schedule();
    return managed;
  }

  get id(): NodeId {
    return this.host.id;
  }

  /** The meta group's state as this host has applied it (it may lag; `metaRead` is linearizable). */
  catalog(): MetaMachine {
    return this.meta.readLocal((m) => m);
  }

  /** A linearizable read of the meta group's state. */
  metaRead<T>(query: (meta: MetaMachine) => T): Promise<T> {
    return this.meta.read(query);
  }

  /** Proposes a change to the meta group (from any host: forwarded to its leader) and reconciles soon after. */
  async proposeMeta(command: MetaCommand): Promise<MetaResult> {
    const result = await this.meta.propose(command);
    this.schedule();
    return result;
  }

  /** The running group of that name on this host. */
  group<C, R, M extends StateMachine<C, R> = StateMachine<C, R>>(name: string): RaftNode<C, R, M> | undefined {
    return this.host.group<C, R, M>(name);
  }

  /**
   * Lets a new process into the cluster (call it on any host): it becomes a learner of the meta group, so it
   * reads the catalogue and registers itself; `spread` then moves replicas onto it.
   */
  async admit(id: NodeId, raftAddress: string): Promise<void> {
    this.host.addHost(id, raftAddress);
    await this.meta.addLearner(id, raftAddress);
  }

  /** Reconcile soon (coalesced: at most one pass at a time, one more if asked while it runs). */
  schedule(): void {
    if (this.closed || !this.opened) return;
    if (this.reconciling !== null) {
      this.again = true;
      return;
    }
    this.reconciling = this.reconcile()
      .catch((e: unknown) => this.options.onError?.('reconcile', e))
      .finally(() => {
        this.reconciling = null;
        if (this.again && !this.closed) {
          this.again = false;
          this.schedule();
        }
      });
  }

  private async reconcile(): Promise<void> {
    if (this.closed) return;
    const catalog = this.catalog();
    await this.register(catalog);
    for (const h of catalog.hosts())
      if (h.id !== this.id && this.host.hostAddress(h.id) !== h.raft) this.host.addHost(h.id, h.raft);
    const starts: Array<Promise<void>> = [];
    for (const record of catalog.groups()) {
      const node = this.host.group(record.name);
      if (node === undefined) {
        if (record.members.includes(this.id)) starts.push(this.start(record));
      } else if (node.isLeader && !this.busy.has(record.name)) {
        void this.step(record, node);
      }
    }
    await Promise.all(starts);
    this.growMeta(catalog);
    this.autoSpread(catalog);
    await this.dropStale();
    await this.reportGone(this.catalog());
  }

  /** On the meta group's leader: promote one registered learner while the meta group has too few voters. */
  private growMeta(catalog: MetaMachine): void {
    if (!this.meta.isLeader || this.busy.has('!meta')) return;
    const config = this.meta.status().config;
    const live = catalog.hosts().filter((h) => !h.retiring);
    if (config.voters.length >= Math.min(this.options.metaVoters ?? 5, live.length)) return;
    const learner = live.find((h) => config.learners.includes(h.id));
    if (learner === undefined) return;
    this.busy.add('!meta');
    void this.meta
      .addVoter(learner.id, learner.raft)
      .catch((e: unknown) => this.options.onError?.(`promote ${learner.id} in the meta group`, e))
      .finally(() => this.busy.delete('!meta'));
  }

  /** On the meta group's leader: one `spread` when replicas are uneven and no move is under way. */
  private autoSpread(catalog: MetaMachine): void {
    if (this.options.autoSpread === false || !this.meta.isLeader || this.busy.has('!spread')) return;
    const groups = catalog.groups();
    if (groups.length === 0 || groups.some((g) => !g.settled)) return;
    const counts = catalog.replicaCounts();
    const eligible = catalog
      .hosts()
      .filter((h) => !h.retiring)
      .map((h) => counts.get(h.id) ?? 0);
    if (eligible.length < 2 || Math.max(...eligible) - Math.min(...eligible) <= 1) return;
    this.busy.add('!spread');
    void this.proposeMeta({ t: 'spread' })
      .catch((e: unknown) => this.options.onError?.('spread', e))
      .finally(() => this.busy.delete('!spread'));
  }

  /** On a settled group this host leads: hand it to its preferred leader when that is due (see the option). */
  private preferLeader(record: GroupRecord, node: AnyNode): void {
    if (this.options.preferredLeaders === false) return;
    const transfer = this.preferred.consider(record.name, record.members[0], node, this.busy.has(record.name));
    if (transfer === null) return;
    this.busy.add(record.name);
    void transfer.finally(() => this.busy.delete(record.name));
  }

  /** Records this host's addresses in the meta group once (and again when they differ). */
  private async register(catalog: MetaMachine): Promise<void> {
    const raft = this.host.hostAddress(this.id)!;
    const http = this.options.http ?? null;
    const known = catalog.host(this.id);
    if (known !== undefined && known.raft === raft && known.http === http) {
      this.registered = true;
      return;
    }
    if (this.meta.leaderId === null) return;
    // A proposal in flight is not repeated every second: the next pass after it applies sees the record.
    if (this.busy.has('!register')) return;
    this.busy.add('!register');
    void this.meta
      .propose({ t: 'host', id: this.id, raft, http })
      .catch((e: unknown) => this.options.onError?.('register', e))
      .finally(() => this.busy.delete('!register'));
  }

  /** Whether this host's addresses are in the meta group yet. */
  get isRegistered(): boolean {
    return this.registered;
  }

  private async start(record: GroupRecord): Promise<void> {
    const settings = this.options.groupOptions(record.name);
    if (settings === null || this.busy.has(record.name)) return;
    this.busy.add(record.name);
    try {
      // Founders bootstrap identically (the same first configuration), so a late founder is safe; after a move,
      // a new member joins and the leader adds it.
      const founder = record.founders.includes(this.id) && sameSet(record.founders, record.members);
      if (founder) await this.host.createGroup(record.name, { ...settings, members: record.founders });
      else
        await this.host.createGroup(record.name, {
          ...settings,
          members: record.members.filter((m) => m !== this.id),
          join: true,
        });
    } finally {
      this.busy.delete(record.name);
    }
  }

  /**
   * One leader's share of a replica move: add a missing member (learner, caught up, promoted), or remove one
   * that should go (handing leadership away first when it is this host), or report the move settled.
   */
  private async step(record: GroupRecord, node: AnyNode): Promise<void> {
    const config = node.status().config;
    const missing = record.members.find((m) => !config.voters.includes(m));
    const extra = [...config.voters, ...config.learners].find((m) => !record.members.includes(m));
    if (missing === undefined && extra === undefined) {
      // Once per move: every meta entry applied schedules a pass, and a report in flight must not be repeated by each.
      const key = `!settled ${record.name} ${record.version}`;
      if (record.settled) {
        this.preferLeader(record, node);
        return;
      }
      if (this.busy.has(key)) return;
      this.busy.add(key);
      await this.proposeMeta({ t: 'settled', name: record.name, version: record.version })
        .catch((e: unknown) => this.options.onError?.(`settle ${record.name}`, e))
        .finally(() => this.busy.delete(key));
      return;
    }
    this.busy.add(record.name);
    let progressed = false;
    try {
      if (missing !== undefined) {
        const address = this.catalog().host(missing)?.raft;
        if (address !== undefined) {
          await node.addVoter(missing, address);
          progressed = true;
        }
      } else if (extra === this.id) {
        const to = record.members.find((m) => config.voters.includes(m));
        if (to !== undefined) progressed = await node.transferLeadership(to);
      } else if (extra !== undefined) {
        await node.removeMember(extra);
        progressed = true;
      }
    } catch (e) {
      this.options.onError?.(`move ${record.name}`, e);
    } finally {
      this.busy.delete(record.name);
    }
    // The next step of the move at once; a step that failed (or could not start) waits for the timer's pass
    // instead, so a move that cannot progress does not spin.
    if (progressed) this.schedule();
  }

  /**
   * Stops and deletes the groups the meta group no longer gives this host: dropped ones, and ones moved away once
   * their leader reported the move settled. Decided only after a read barrier on the meta group.
   */
  private async dropStale(): Promise<void> {
    const stale = (meta: MetaMachine): string[] =>
      this.host.groupNames().filter((name) => {
        if (name === META_GROUP || this.busy.has(name)) return false;
        const record = meta.group(name);
        return record === undefined || (!record.members.includes(this.id) && record.settled);
      });
    if (stale(this.catalog()).length === 0) return;
    const confirmed = await this.meta.read(stale);
    for (const name of confirmed) await this.removeGroup(name);
  }

  /** Stops and deletes a group here, and forgets what the preferred-leader pass kept about it. */
  private async removeGroup(name: string): Promise<void> {
    this.preferred.forget(name);
    await this.host.removeGroup(name, { deleteData: true });
  }

  /**
   * Reports to the meta group the dropped groups this host no longer holds, running or on disk (deleting a copy
   * left on disk first), so their names may be created again.
   */
  private async reportGone(catalog: MetaMachine): Promise<void> {
    const mine = catalog
      .dropping()
      .filter((d) => d.hosts.includes(this.id) && !this.busy.has(d.name) && this.host.group(d.name) === undefined);
    if (mine.length === 0) return;
    const stored = new Set((await this.host.storedGroups()).map((g) => g.name));
    for (const { name } of mine) {
      const key = `!gone ${name}`;
      if (this.busy.has(key) || this.host.group(name) !== undefined) continue;
      this.busy.add(key);
      try {
        // Confirmed against the meta group's latest state, as any deletion here is.
        let clean = !stored.has(name);
        if (!clean && (await this.meta.read((m) => m.group(name) === undefined))) {
          await this.removeGroup(name);
          clean = true;
        }
        if (clean) await this.proposeMeta({ t: 'gone', name, host: this.id });
      } catch (e) {
        this.options.onError?.(`report ${name} gone`, e);
      } finally {
        this.busy.delete(key);
      }
    }
  }

  /**
   * How many groups (not counting the meta group) each host leads, as this host sees it: exact for itself, a
   * lower bound for the others (it sees only the groups it holds). A caller that asked every process for its
   * own count passes those to `balanceLeaders`.
   */
  leaderCounts(): Record<NodeId, number> {
    const counts: Record<NodeId, number> = {};
    for (const name of this.host.groupNames()) {
      if (name === META_GROUP) continue;
      const leader = this.host.group(name)?.leaderId ?? null;
      if (leader !== null) counts[leader] = (counts[leader] ?? 0) + 1;
    }
    return counts;
  }

  /** The groups (not the meta group) running here, and how many of them this host leads. */
  groupCounts(): { groups: number; leaders: number } {
    const names = this.host.groupNames().filter((n) => n !== META_GROUP);
    return { groups: names.length, leaders: names.filter((n) => this.host.group(n)?.isLeader === true).length };
  }

  /**
   * Hands leadership of groups this host leads to their other voters while this host leads at least two more
   * groups than such a voter (the voter leading fewest first), by leadership transfer. `leaders` are the counts
   * of the whole cluster (each process's own count: see `groupCounts`); without them, this host's view
   * (`leaderCounts`). Run it on each process in turn (most leaders first), passing the counts updated with the
   * moves returned, and leaders end within about one of each other wherever the groups' placement allows.
   * With `preferredLeaders` on (the default), a group whose preferred leader's process is alive goes there instead
   * (and a group led by its preferred leader stays): the same spread, and one the preferred-leader pass keeps.
   * Resolves with the transfers that succeeded.
   */
  async balanceLeaders(
    options: { leaders?: Record<NodeId, number>; concurrency?: number } = {},
  ): Promise<Array<{ group: string; from: NodeId; to: NodeId }>> {
    const counts = new Map<NodeId, number>(Object.entries(options.leaders ?? this.leaderCounts()));
    const catalog = this.catalog();
    const retiring = new Set(
      catalog
        .hosts()
        .filter((h) => h.retiring)
        .map((h) => h.id),
    );
    const mine = this.host
      .groupNames()
      .filter((n) => n !== META_GROUP && !this.busy.has(n) && this.host.group(n)?.isLeader === true);
    counts.set(this.id, mine.length);
    const plan: Array<{ group: string; node: AnyNode; to: NodeId }> = [];
    const preferring = this.options.preferredLeaders !== false;
    for (const name of mine) {
      const node = this.host.group(name)!;
      // With preferred leaders on, a group goes to its preferred leader when that process is alive: the placement
      // already spreads those evenly, and handing it anywhere else would be undone by the preferred-leader pass.
      const preferred = preferring ? catalog.group(name)?.members[0] : undefined;
      if (
        preferred !== undefined &&
        preferred !== this.id &&
        !retiring.has(preferred) &&
        node.status().config.voters.includes(preferred) &&
        this.host.heardFrom(preferred, this.host.pingTicks + 2)
      ) {
        counts.set(this.id, counts.get(this.id)! - 1);
        counts.set(preferred, (counts.get(preferred) ?? 0) + 1);
        plan.push({ group: name, node, to: preferred });
        continue;
      }
      if (preferring && preferred === this.id) continue;
      let target: NodeId | null = null;
      for (const voter of node.status().config.voters) {
        if (voter === this.id || retiring.has(voter)) continue;
        if (target === null || (counts.get(voter) ?? 0) < (counts.get(target) ?? 0)) target = voter;
      }
      if (target === null || counts.get(this.id)! - (counts.get(target) ?? 0) < 2) continue;
      counts.set(this.id, counts.get(this.id)! - 1);
      counts.set(target, (counts.get(target) ?? 0) + 1);
      plan.push({ group: name, node, to: target });
    }
    const moved: Array<{ group: string; from: NodeId; to: NodeId }> = [];
    const concurrency = options.concurrency ?? 16;
    for (let i = 0; i < plan.length; i += concurrency) {
      await Promise.all(
        plan.slice(i, i + concurrency).map(async ({ group, node, to }) => {
          if (await node.transferLeadership(to).catch(() => false)) moved.push({ group, from: this.id, to });
        }),
      );
    }
    return moved;
  }

  /** Stops reconciling, then every group, the listener and the database. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer !== null) clearInterval(this.timer);
    await this.reconciling;
    await this.host.close();
  }
}

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x) => b.includes(x));
}
