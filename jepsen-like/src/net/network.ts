/** What the runner needs from the network under the cluster: addresses, a way to start members, and faults. */
import type { Link } from '../nemesis/grudge.js';
import type { PacketRule } from './proxy.js';

export interface MemberAddresses {
  id: string;
  /** Where the member's Raft transport listens (--raft). */
  raftListen: string;
  /** The address the other members use for it (its entry in --peers). */
  raftAdvertised: string;
  /** Where its HTTP API listens (--http). */
  httpListen: string;
  /** The URL clients use. */
  httpUrl: string;
}

/** Where a worker listens when it has a network namespace of its own. */
export interface WorkerAddresses {
  /** Its HTTP address (host:port). */
  http: string;
  /** Its binary protocol address (host:port): what a partition between workers cuts. */
  tcp: string;
}

export interface LinkRule {
  from: string;
  to: string;
  rule: PacketRule;
}

export interface Network {
  readonly mode: 'namespace' | 'proxy';
  /** How packet faults are done: tc netem, the userspace proxies, or not at all (not requested). */
  readonly packetFaults: 'netem' | 'proxy' | 'none';
  /** Lines for the run's output (e.g. why packet faults go through the proxy). */
  readonly notes: string[];
  prepare(): Promise<void>;
  addresses(id: string): MemberAddresses;
  /** The command that starts a member's process (inside its namespace in namespace mode). */
  wrap(id: string, command: string, args: string[]): { command: string; args: string[] };
  /** Replaces the set of cut directed links (empty = healed). */
  setCuts(links: readonly Link[]): Promise<void>;
  /** Replaces the packet fault rules (empty = none). */
  setPacketRules(rules: readonly LinkRule[]): Promise<void>;
  /**
   * Gives each worker a network namespace of its own, so that links between workers can be cut (namespace mode);
   * false when this network cannot (proxy mode: the workers stay on the host's loopback, uncut).
   */
  isolateWorkers(ids: readonly string[]): Promise<boolean>;
  /** Where an isolated worker listens; null for a worker on the host's loopback. */
  workerAddresses(id: string): WorkerAddresses | null;
  /** The command that starts an isolated worker (inside its namespace). */
  wrapWorker(id: string, command: string, args: string[]): { command: string; args: string[] };
  /** Replaces the set of cut links between isolated workers: `a>b` loses a's connections to b's binary port. */
  setWorkerCuts(links: readonly Link[]): Promise<void>;
  /** Removes everything prepare() created. Safe to call more than once. */
  teardown(): Promise<void>;
}
