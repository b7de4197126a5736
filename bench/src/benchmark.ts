/** What a benchmark is, what a run is asked to do, and what one side of a run measured. */
import type { LoadResult } from './load.js';

export type Routing = 'all' | 'leader';

export interface RunOptions {
  name: string;
  /** The peer to compare with, or null for ours alone. */
  vs: string | null;
  durationS: number;
  warmupS: number;
  concurrency: number;
  /** Directory for <name>.json and <name>.svg. */
  out: string;
  /** Where clients send requests: spread over all members (followers forward), or all to the leader. */
  routing: Routing;
  /** Payload bytes per operation. */
  size: number;
  /** Keys are drawn uniformly from k0..k<keys-1>. */
  keys: number;
  /** Our members' --snapshot-every (a diagnostic); null for the cluster's default. */
  snapshotEvery: number | null;
  /** Ours and the peer run alternately this many times; each side reports its median round. */
  rounds: number;
  /** When set, our member processes are CPU-profiled and the profiles land here. */
  profileDir: string | null;
  /** A side is flagged noisy when other processes used more than this many cores on average while it ran. */
  noisyCores: number;
}

/** One side's figures: the load generator's, plus what the side is and what it cost in CPU. */
export interface SideResult extends LoadResult {
  system: string;
  members: number | null;
  /** CPU seconds the server processes used in the measured window, and that per operation. */
  server_cpu_s: number | null;
  server_cpu_cores: number | null;
  server_cpu_us_per_op: number | null;
  /** CPU cores the harness (the load generator) used in the measured window. */
  client_cpu_cores: number;
  [extra: string]: unknown;
}

/** One goal of a benchmark, judged from a run's figures. */
export interface Goal {
  goal: string;
  met: boolean;
  detail: string;
}

export interface Benchmark {
  name: string;
  description: string;
  /** A short title for the chart. */
  title(o: RunOptions): string;
  /** Peers this benchmark can run against with --vs. */
  peers: string[];
  defaults: { durationS: number; concurrency: number; size: number; warmupS: number };
  /** A fixed goal when there is no peer (e.g. proposals per second). */
  target?: { ops_per_sec: number; note: string };
  /** The workload's description as recorded in the results. */
  workload(o: RunOptions): Record<string, unknown>;
  /** Goals judged from the figures (beyond throughput and p99 against the peer); each is named met or missed. */
  goals?(ours: SideResult, peer: SideResult | null): Goal[];
  /**
   * With --rounds: figures of its own the benchmark takes across the rounds (the median round is chosen by
   * throughput; another figure's median may sit in another round). Gets the median round and every round.
   */
  mergeRounds?(median: SideResult, rounds: SideResult[]): SideResult;
  runOurs(o: RunOptions): Promise<SideResult>;
  runPeer?(peer: string, o: RunOptions): Promise<SideResult>;
}
