/**
 * The one interface every workload plugs in through. A workload names the service it drives and the model its
 * history is checked against, makes one worker per client thread, runs the final reads, and adds its own checks
 * beside linearizability. Each later service adds a file here and a line in workloads/index.ts.
 */
import type { ModelName } from '@raftkit/linearizability';
import type { HistoryEvent } from '../history.js';
import type { Rng } from '../rng.js';

export interface Invocation {
  f: string;
  key?: string;
  value?: unknown;
}

export interface Completion {
  type: 'ok' | 'fail' | 'info';
  value?: unknown;
  error?: string;
}

/** What a worker gets from the runner. */
export interface WorkerContext {
  /** 0 .. concurrency-1. */
  worker: number;
  /** The member this worker talks to (as in Jepsen, each client is bound to one node). */
  node: string;
  url(node: string): string;
  /** The workers' URLs (e.g. the flash gateways) when the workload asked for workers; else empty. */
  workerUrls: readonly string[];
  token: string;
  opTimeoutMs: number;
  rng: Rng;
  /**
   * Records `invocation` for the worker's current process, runs `exec`, records its completion and returns it.
   * An `info` completion retires the process (the next operation runs as a new process, as in Jepsen).
   */
  perform(invocation: Invocation, exec: () => Promise<Completion>): Promise<Completion>;
  /** True once the run is over: finish up (release what you hold) and return. */
  readonly stopping: boolean;
  sleep(ms: number): Promise<void>;
}

export interface Worker {
  /** Performs one step (usually one operation). */
  step(): Promise<void>;
  /** Called once after the last step, while the cluster is healed: release, close sessions. */
  finish(): Promise<void>;
  /** Stops any background activity at once (timers, heartbeats). Called on every way out, after finish() or instead of it. */
  abort?(): void;
}

/** A check besides linearizability: its name, whether it passed, what it found. */
export interface CheckResult {
  name: string;
  valid: boolean | 'unknown';
  /** One line per finding (empty when valid). */
  anomalies: Anomaly[];
  /** Figures worth showing (counts and the like). */
  stats?: Record<string, unknown>;
}

export interface Anomaly {
  check: string;
  type: string;
  description: string;
  /** Times (ns) of the events involved, for the report. */
  times?: number[];
}

export interface FinalContext {
  nodes: readonly string[];
  url(node: string): string;
  /** The workers' URLs (e.g. the flash gateways) when the workload asked for workers; else empty. */
  workerUrls: readonly string[];
  token: string;
  opTimeoutMs: number;
  /** Like WorkerContext.perform, each call as a fresh process. */
  perform(invocation: Invocation, exec: () => Promise<Completion>): Promise<Completion>;
  sleep(ms: number): Promise<void>;
  /** Give up retrying after this Date.now() value. */
  deadline: number;
}

export interface Workload {
  readonly name: string;
  /** The service to run (the member process's --service). */
  readonly service: string;
  /** The model of the linearizability check. */
  readonly model: ModelName;
  /** One line on what the clients do. */
  describe(): string;
  /** The service's other processes to start beside the members, by role (e.g. {gateway: 2}); none by default. */
  readonly workers?: Readonly<Record<string, number>>;
  /**
   * A worker role (e.g. `store`), or several, the kill, pause and wipe nemeses hit besides members: each such fault
   * also takes one of their processes, picked from the seed.
   */
  readonly faultWorkers?: string | readonly string[];
  /**
   * Workers the partition nemesis also cuts apart: each partition cuts the links from some of the `clients` role's
   * processes (one to all, from the seed) to one process of the `servers` role (e.g. check instances from a counter
   * store). The workers then run in network namespaces of their own (namespace mode; in proxy mode they stay on the
   * host's loopback and only member links are cut). Without it workers share the host's loopback, never cut.
   */
  readonly partitionWorkers?: { readonly clients: string; readonly servers: string };
  /**
   * False: the wipe nemesis wipes only a `faultWorkers` process (a store's data folder), never a member. For
   * services whose members host many Raft groups (the event log's partitions), where the wipe's remove-and-add of a
   * member is a single group's membership change.
   */
  readonly wipeMembers?: boolean;
  /** Settings handed to those workers, as `cluster up --set` does. */
  readonly settings?: Readonly<Record<string, string>>;
  /**
   * A script started for the workers instead of the cluster's worker.js, with the same arguments (`--cluster DIR
   * --id ID`): a broken variant of a worker that lives here, not in the service (e.g. variants/flash-async-gateway).
   */
  readonly workerScript?: string;
  /** Before the clients start and the nemesis runs (the cluster has a leader): create what the clients need. */
  setup?(ctx: FinalContext): Promise<void>;
  createWorker(ctx: WorkerContext): Worker;
  /** Reads after the final heal and recovery, so the history ends with what the cluster holds. */
  finalReads(ctx: FinalContext): Promise<void>;
  /** Checks beside linearizability. */
  check(events: readonly HistoryEvent[]): CheckResult[];
  /** Releases what the workload holds (client connections); called once on every way out. */
  close?(): Promise<void>;
  /** The events the model checks, when some operations are outside it (default: all). Keeps invocations and completions together. */
  modelEvents?(events: readonly HistoryEvent[]): readonly HistoryEvent[];
}
