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
  /** Removes everything prepare() created. Safe to call more than once. */
  teardown(): Promise<void>;
}
