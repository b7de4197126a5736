/**
 * Many Raft groups in one process (multi-raft): one TCP listener and one connection per peer process carry every
 * group's messages (TcpTransport channels), one LevelDB holds every group's log under its own key prefix with
 * one fsync per round of work across groups (GroupCommitLevel), and one timer ticks every group. Each group is a
 * RaftNode whose member ids are the ids of the processes (hosts) that hold it.
 */
import { Level } from 'level';
import type { Logger } from '../logger.js';
import { RaftNode, type RaftNodeOptions } from '../node.js';
import { PacedTicker } from '../ticker.js';
import { ReadyTurn } from '../turn.js';
import { LevelStorage, type SharedLevel } from '../storage/leveldb.js';
import {
  TcpTransport,
  type HostPort,
  type TransportSecret,
  type TransportStats,
  type TransportTls,
} from '../transport/tcp.js';
import type { NodeId, StateMachine } from '../types.js';
import type { SessionOptions } from '../sessions.js';
import { GroupCommitLevel, type GroupCommitStats } from './group-commit.js';
import { checkPingTicks, Liveness } from './liveness.js';
import { PreferredLeaders } from './preferred.js';

/** Group names: what may follow the key prefix and travel on the wire. */
const GROUP_NAME = /^[A-Za-z0-9._-]{1,128}$/;
const REGISTRY_PREFIX = 'groups!';
/** No group's election timeout is shorter than this many ticks (CoreOptions requires heartbeat < election). */
const MIN_ELECTION_TICKS = 2;
const KEY_ENCODINGS = { keyEncoding: 'utf8', valueEncoding: 'view' } as const;

/** Where and how a GroupHost runs: its id, listener, secret, database directory and the other processes. */
export interface GroupHostOptions {
  /** This process's id: its member id in every group it holds. */
  id: NodeId;
  /** Where the shared listener binds. Port 0 picks a free one (read it with `address()`). */
  listen: HostPort | string;
  /** The secret every process of the cluster shares (TcpTransport). */
  secret: TransportSecret;
  /** Optional mutual TLS (TcpTransport). */
  tls?: TransportTls;
  /** The directory of the one LevelDB every group of this process uses. */
  dataDir: string;
  /** Addresses ("host:port") of the other processes, by id; more may be added with addHost(). */
  hosts?: Record<NodeId, string>;
  /** Milliseconds per tick of every group. Default 100. */
  tickMs?: number;
  /**
   * Ticks a group must be idle before it quiesces (no ticks, no heartbeats until something happens; see
   * CoreOptions.quiesceTicks). Default 20. 0: groups never quiesce. A group's own `core.quiesceTicks` wins.
   */
  quiesceTicks?: number;
  /**
   * Ticks between the pings this process sends each peer process (what stands in for the heartbeats of quiesced
   * groups). Default 1: every tick. Larger costs less when everything is idle; it must stay under half of every
   * group's election timeout (a follower wakes after an election timeout of silence from its leader's process).
   */
  pingTicks?: number;
  /** Where every group of the host logs (RaftNodeOptions.logger), unless a group brings its own. */
  logger?: Logger;
  /**
   * Send the heartbeats and heartbeat responses of all groups shared with a peer process as one frame per turn
   * of the event loop (in practice one per tick) instead of one frame each. Default true.
   */
  coalesceHeartbeats?: boolean;
  /** The client sessions of every group (RaftNodeOptions.sessions), unless a group brings its own. */
  sessions?: SessionOptions;
  /**
   * Preferred leaders (src/groups/preferred.ts): the first of the `members` a group is created with is its preferred
   * leader. A new group's preferred member campaigns as soon as it is created, and a host that has led a group for
   * `delayMs` (default 3,000) while its preferred member's process is alive hands leadership to it, so leaders
   * spread as the placement rotates the first place, after creation and after a restart. Off by default
   * (ManagedHost runs its own pass over its catalogue, `preferredLeaders`).
   */
  leaderPreference?: { delayMs?: number };
}

/** Ticks between two runs of the preferred-leader pass over the groups (it costs a look at each group). */
const PREFERENCE_PASS_TICKS = 5;

/** A group's own settings: everything a RaftNode takes except what the host provides. */
export type GroupOptions<C, R, M extends StateMachine<C, R>> = Omit<
  RaftNodeOptions<C, R, M>,
  'id' | 'storage' | 'transport' | 'ticker' | 'readyTurn' | 'tickMs' | 'bootstrap' | 'peers'
> & {
  /** The hosts holding a new group (its voters), this one among them. Ignored when the group exists on disk. */
  members: NodeId[];
  /**
   * Join a running group instead of founding it: this host starts with no configuration and waits for the
   * group's leader to add it (as a learner, then a voter). `members` then names hosts already in the group.
   */
  join?: boolean;
};

/**
 * Many Raft groups in one process: one listener, one connection per peer process, one LevelDB with group commit,
 * one timer. Open it with `GroupHost.open(options)`, then `createGroup(name, { members, stateMachine })` on every
 * host that is a member of the group.
 */
export class GroupHost {
  private readonly groups = new Map<string, RaftNode<unknown, unknown>>();
  /** Each group's election timeout in ticks: a leader silent that long wakes its quiesced followers here. */
  private readonly electionTicks = new Map<string, number>();
  /** Host ticks, and the tick each peer process was last heard from (src/groups/liveness.ts). */
  private readonly liveness: Liveness;
  private readonly stopLiveness: () => void;
  private readonly addresses: Map<NodeId, string>;
  /** One timer for every group of the process, paced down to one wake-up per ping while all are quiesced. */
  private readonly ticker: PacedTicker;
  /** One Ready pass for every group with work in a turn of the event loop (src/turn.ts). */
  private readonly readyTurn = new ReadyTurn();
  private readonly tickMs: number;
  /** With `leaderPreference`: each group's preferred leader, and the pass that hands groups to it. */
  private readonly preferredOf = new Map<string, NodeId>();
  private readonly preferred: PreferredLeaders | null;
  private closed = false;

  private constructor(
    private readonly options: GroupHostOptions,
    private readonly level: Level<string, Uint8Array>,
    private readonly db: GroupCommitLevel,
    private readonly transport: TcpTransport,
  ) {
    this.tickMs = options.tickMs ?? 100;
    this.liveness = new Liveness(options.pingTicks ?? 1);
    this.ticker = new PacedTicker({ periodMs: this.tickMs, idleTicks: this.liveness.pingTicks });
    const { host, port } = transport.address();
    // This host's address as `hosts` names it, when it does: the one the others reach it at (behind a proxy, a
    // NAT or another namespace it is not the listener's own address); the bound listener otherwise (port 0).
    this.addresses = new Map(
      Object.entries({ ...options.hosts, [options.id]: options.hosts?.[options.id] ?? `${host}:${port}` }),
    );
    for (const id of this.addresses.keys()) if (id !== options.id) transport.addPeer(id, this.addresses.get(id)!);
    transport.onPeerHeard((peer) => this.liveness.heard(peer));
    this.preferred =
      options.leaderPreference === undefined
        ? null
        : new PreferredLeaders(options.id, {
            delayMs: options.leaderPreference.delayMs ?? 3_000,
            heard: (id) => this.liveness.heardWithin(id, this.liveness.pingTicks + 2),
          });
    this.stopLiveness = this.ticker.subscribe(
      () => this.livenessTick(),
      () => true,
    );
  }

  /**
   * Once a tick: every `pingTicks`, one ping to each peer process (what keeps quiesced groups safe: it stands in
   * for every heartbeat they no longer send), then wake the quiesced groups whose leader's process has been silent
   * for an election timeout, so they elect a new leader.
   */
  private livenessTick(): void {
    const pingNow = this.liveness.tick();
    if (this.preferred !== null && this.liveness.tickCount % PREFERENCE_PASS_TICKS === 0) {
      for (const [name, preferred] of this.preferredOf) {
        const node = this.groups.get(name);
        if (node?.isLeader === true) this.preferred.consider(name, preferred, node);
      }
    }
    let anySilent = false;
    for (const id of this.addresses.keys()) {
      if (id === this.id) continue;
      if (pingNow) this.transport.ping(id);
      if (this.liveness.silentTicks(id) >= Math.max(MIN_ELECTION_TICKS, this.liveness.pingTicks + 1)) anySilent = true;
    }
    if (!anySilent) return;
    for (const [name, node] of this.groups) {
      if (!node.quiesced) continue;
      const silent = this.liveness.wakeAfter(
        { quiesced: true, role: node.isLeader ? 'leader' : 'follower', leader: node.leaderId },
        this.electionTicks.get(name) ?? 10,
      );
      if (silent !== null) node.wake(silent);
    }
  }

  /** Whether a frame (any: a ping, a heartbeat batch, a message) came from process `id` in the last `ticks` ticks. */
  heardFrom(id: NodeId, ticks: number): boolean {
    return this.liveness.heardWithin(id, ticks);
  }

  /** Ticks between this process's pings to each peer process (GroupHostOptions.pingTicks). */
  get pingTicks(): number {
    return this.liveness.pingTicks;
  }

  /** Opens the process's database and starts its listener. */
  static async open(options: GroupHostOptions): Promise<GroupHost> {
    const level = new Level<string, Uint8Array>(options.dataDir);
    await level.open();
    const transport = new TcpTransport({
      id: options.id,
      listen: options.listen,
      secret: options.secret,
      ...(options.tls !== undefined ? { tls: options.tls } : {}),
      ...(options.coalesceHeartbeats !== undefined ? { coalesceHeartbeats: options.coalesceHeartbeats } : {}),
    });
    // Messages outside any group have no business here.
    await transport.start(() => {});
    return new GroupHost(options, level, new GroupCommitLevel(level as unknown as SharedLevel), transport);
  }

  /** This host's id. */
  get id(): NodeId {
    return this.options.id;
  }

  /** The bound listener address. */
  address(): HostPort {
    return this.transport.address();
  }

  /** Fsyncs asked for by the groups and made on disk (fewer: group commit). */
  get commitStats(): GroupCommitStats {
    return this.db.stats;
  }

  /** Ticks of the host's shared timer so far. */
  get tickCount(): number {
    return this.liveness.tickCount;
  }

  /** Frames sent to each peer process (heartbeat batches among them) and batches received: see TransportStats. */
  wireStats(): TransportStats {
    return this.transport.stats();
  }

  /** Makes another process reachable (its id and "host:port"). */
  addHost(id: NodeId, address: string): void {
    this.addresses.set(id, address);
    this.transport.addPeer(id, address);
  }

  /**
   * Starts a group on this host: a new one with `members` as its voters (every member host must create it too),
   * or one this host already holds on disk, from its storage. Resolves once the group's member runs.
   */
  async createGroup<C, R, M extends StateMachine<C, R> = StateMachine<C, R>>(
    name: string,
    options: GroupOptions<C, R, M>,
  ): Promise<RaftNode<C, R, M>> {
    if (this.closed) throw new Error('the host is closed');
    if (!GROUP_NAME.test(name))
      throw new RangeError(`a group name is 1..128 of A-Z a-z 0-9 . _ -: ${JSON.stringify(name)}`);
    if (this.groups.has(name)) throw new Error(`group ${name} already runs here`);
    const join = options.join === true;
    if (!join && !options.members.includes(this.id))
      throw new RangeError(`group ${name}: its members must include this host (${this.id})`);
    const bootstrap: Record<NodeId, string> = {};
    for (const member of options.members) {
      const address = this.addresses.get(member);
      if (address === undefined)
        throw new RangeError(`group ${name}: no address for host ${member} (addHost it first)`);
      if (!join) bootstrap[member] = address;
    }
    const { members: _members, join: _join, ...nodeOptions } = options;
    const core = { quiesceTicks: this.options.quiesceTicks ?? 20, ...nodeOptions.core };
    checkPingTicks(this.liveness.pingTicks, core.electionTicks ?? 10);
    this.electionTicks.set(name, core.electionTicks ?? 10);
    const registered = join ? { members: options.members, join: true } : options.members;
    await this.db.batch(
      [{ type: 'put', key: `${REGISTRY_PREFIX}${name}`, value: Buffer.from(JSON.stringify(registered)) }],
      { ...KEY_ENCODINGS, sync: true },
    );
    const node = await RaftNode.start<C, R, M>({
      ...(this.options.logger !== undefined ? { logger: this.options.logger } : {}),
      ...(this.options.sessions !== undefined ? { sessions: this.options.sessions } : {}),
      ...nodeOptions,
      core,
      id: this.id,
      bootstrap,
      peers: Object.fromEntries(this.addresses),
      tickMs: this.tickMs,
      ticker: this.ticker,
      readyTurn: this.readyTurn,
      storage: new LevelStorage({ db: this.db, prefix: `g.${name}` }),
      transport: this.transport.channel(name),
    });
    this.groups.set(name, node as unknown as RaftNode<unknown, unknown>);
    if (this.preferred !== null && !join) {
      this.preferredOf.set(name, options.members[0]!);
      // A new group (nothing on disk yet) elects its preferred member at once rather than after a random timeout.
      if (options.members[0] === this.id && node.status().term === 0) node.campaign();
    }
    return node;
  }

  /** The running group of that name. */
  group<C, R, M extends StateMachine<C, R> = StateMachine<C, R>>(name: string): RaftNode<C, R, M> | undefined {
    return this.groups.get(name) as unknown as RaftNode<C, R, M> | undefined;
  }

  /** Names of the groups running here. */
  groupNames(): string[] {
    return [...this.groups.keys()];
  }

  /**
   * Names of the groups this host holds on disk (to start again after a restart), with their founding members,
   * or, for a group this host joined (`join: true`), the members it was given then.
   */
  async storedGroups(): Promise<Array<{ name: string; members: NodeId[]; join: boolean }>> {
    const out: Array<{ name: string; members: NodeId[]; join: boolean }> = [];
    for await (const [key, value] of this.db.iterator({
      gte: REGISTRY_PREFIX,
      lt: `${REGISTRY_PREFIX}\uffff`,
      ...KEY_ENCODINGS,
    })) {
      const stored = JSON.parse(Buffer.from(value).toString()) as NodeId[] | { members: NodeId[]; join: boolean };
      const name = key.slice(REGISTRY_PREFIX.length);
      out.push(
        Array.isArray(stored)
          ? { name, members: stored, join: false }
          : { name, members: stored.members, join: stored.join },
      );
    }
    return out;
  }

  /** The address ("host:port") of a known host. */
  hostAddress(id: NodeId): string | undefined {
    return this.addresses.get(id);
  }

  /** Stops a group here; with `deleteData`, its log and snapshots are removed from the database too. */
  async removeGroup(name: string, options: { deleteData?: boolean } = {}): Promise<void> {
    const node = this.groups.get(name);
    this.groups.delete(name);
    this.electionTicks.delete(name);
    this.preferredOf.delete(name);
    this.preferred?.forget(name);
    await node?.stop();
    if (options.deleteData === true) {
      await this.db.clear({ gte: `g.${name}!`, lt: `g.${name}!\uffff`, keyEncoding: 'utf8' });
      await this.db.batch([{ type: 'del', key: `${REGISTRY_PREFIX}${name}` }], { ...KEY_ENCODINGS, sync: true });
    }
  }

  /** How many of the groups running here each host leads, as this host sees it (`none` while a group has no leader). */
  leaderCounts(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const node of this.groups.values()) {
      const leader = node.leaderId ?? 'none';
      counts[leader] = (counts[leader] ?? 0) + 1;
    }
    return counts;
  }

  /**
   * Spreads the leaders of the groups running here evenly over their member hosts by leadership transfer (from
   * any member: the request is forwarded to the leader). A host leading more than its share (groups / hosts,
   * rounded up) hands groups to the member host that leads the fewest. Resolves with the transfers that
   * succeeded; a failed one is left for the next call.
   */
  async balanceLeaders(options: { concurrency?: number } = {}): Promise<number> {
    const counts = new Map<NodeId, number>();
    const hosts = new Set<NodeId>();
    for (const node of this.groups.values()) {
      for (const voter of node.status().config.voters) hosts.add(voter);
      const leader = node.leaderId;
      if (leader !== null) counts.set(leader, (counts.get(leader) ?? 0) + 1);
    }
    if (hosts.size === 0) return 0;
    const share = Math.ceil(this.groups.size / hosts.size);
    const moves: Array<{ node: RaftNode<unknown, unknown>; to: NodeId }> = [];
    for (const node of this.groups.values()) {
      const leader = node.leaderId;
      if (leader === null || (counts.get(leader) ?? 0) <= share) continue;
      let target: NodeId | null = null;
      for (const voter of node.status().config.voters) {
        if (voter !== leader && (target === null || (counts.get(voter) ?? 0) < (counts.get(target) ?? 0)))
          target = voter;
      }
      if (target === null || (counts.get(target) ?? 0) + 1 > share) continue;
      counts.set(leader, counts.get(leader)! - 1);
      counts.set(target, (counts.get(target) ?? 0) + 1);
      moves.push({ node, to: target });
    }
    let moved = 0;
    const concurrency = options.concurrency ?? 16;
    for (let i = 0; i < moves.length; i += concurrency) {
      const results = await Promise.all(
        moves.slice(i, i + concurrency).map(({ node, to }) => node.transferLeadership(to).catch(() => false)),
      );
      moved += results.filter(Boolean).length;
    }
    return moved;
  }

  /**
   * Cuts this process off from `peers` (both ways as far as this process goes: nothing sent to them, nothing
   * accepted from them, no pings): for fault injection. An empty list heals.
   */
  setBlocked(peers: Iterable<NodeId>): void {
    this.transport.setBlocked(new Set(peers));
  }

  /** Stops every group, the listener and the database. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stopLiveness();
    await Promise.all([...this.groups.values()].map((node) => node.stop()));
    this.groups.clear();
    await this.transport.close();
    await this.level.close();
  }
}
