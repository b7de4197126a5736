/**
 * The dashboard's one collector: while a page watches (a live socket is open, or an /api request came in the last
 * IDLE_AFTER_MS), it polls each process of each cluster under the data root (status, /metrics, groups; CPU and
 * memory from /proc), builds the overview every page shows and derives the timeline's events (leader changes,
 * elections, snapshots, processes coming and going). With no page it does nothing at all: the dashboard of a
 * stack nobody looks at costs no CPU. While nothing changes between polls (states, terms, leaders, commit indexes),
 * the pace slows from once a second to once every MAX_INTERVAL_MS; any change, or a fault made from the page,
 * brings it back. However many pages watch, each process is polled once per round; calls run in parallel with a
 * deadline (PROBE_TIMEOUT_MS), and what a member's answers mean (slow, down) is health.ts's.
 */
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { readPartition } from '../actions.js';
import type { RemoteCluster } from '../remote.js';
import type { GroupedStatus, Replica } from '../views.js';
import type { MemberStatus } from '../processes.js';
import {
  clusterDirs,
  isAlive,
  statePath,
  tokenPath,
  type ClusterState,
  type MemberRecord,
  type WorkerRecord,
} from '../state.js';
import { judge, newHealth, PROBE_TIMEOUT_MS, type HealthMemory, type Role } from './health.js';
import { NO_METRICS, parseMetrics, rates, type MetricsSample } from './metrics-text.js';
import { CLOCK_TICKS, getJson, httpGet, procSample } from './probe.js';
import type { Timeline } from './timeline.js';
import type {
  ClusterView,
  GroupView,
  MemberView,
  Overview,
  ProcessMetrics,
  TimelineEvent,
  WorkerView,
} from './types.js';

/** The slowest pace while nothing changes. */
export const MAX_INTERVAL_MS = 5_000;
/** Without a live socket, polling stops this long after the last /api request. */
export const IDLE_AFTER_MS = 15_000;

/** A cluster on other hosts, shown beside the data root's: its members' URLs, no pids, no local files. */
export interface RemoteSource {
  name: string;
  cluster: RemoteCluster;
}

interface CollectorOptions {
  dataRoot: string;
  /** `cluster dashboard --endpoints`: one remote cluster, polled over HTTP(S) only. */
  remote?: RemoteSource;
  timeline: Timeline;
  intervalMs?: number;
  /** How often the data root is scanned for clusters that came or went. */
  scanMs?: number;
  /** Deadline of each HTTP call to a process. */
  timeoutMs?: number;
  maxIntervalMs?: number;
  idleAfterMs?: number;
}

/** What the collector remembers of one process between polls (rates and changes are differences). */
interface ProcessMemory {
  pid: number | null;
  cpu?: { at: number; ticks: number };
  metrics?: MetricsSample;
  up?: boolean;
  snapshotIndex?: number;
  health: HealthMemory;
  /** The last status answered (shown while the member is slow). */
  lastStatus?: GroupedStatus;
  /** Remote members: the id the endpoint last answered with. */
  lastId?: string;
  /** Its last answered list of replicas (grouped services), kept while a call misses. */
  replicas?: { list: Replica[]; at: number };
}

interface ClusterEntry {
  name: string;
  /** '' for the remote cluster: it has no folder here. */
  dataDir: string;
  remote: boolean;
  /** Learned from the first status answer: the service runs many groups (GET /v1/cluster/groups). */
  grouped: boolean | null;
  processes: Map<string, ProcessMemory>;
  groups: Map<string, { leader: string | null; term: number }>;
}

type TickListener = (overview: Overview, events: TimelineEvent[]) => void;

export class Collector {
  private readonly clusters = new Map<string, ClusterEntry>();
  private latest: Overview = { generatedAt: 0, clusters: [] };
  private readonly listeners = new Set<TickListener>();
  private timer: NodeJS.Timeout | null = null;
  /** A round of polls is scheduled or running. */
  private looping = false;
  private running: Promise<void> | null = null;
  private lastScan = 0;
  private stopped = true;
  private watchers = 0;
  private lastDemandAt = 0;
  /** Rounds in a row whose overview matched the one before (states, terms, leaders, indexes). */
  private unchanged = 0;
  private lastSignature = '';
  /** Exposed by GET /api/debug: rounds run, how long the last took, the pace now, whether polling is parked. */
  readonly counters = { ticks: 0, lastTickMs: 0, paceMs: 0, parked: true };
  private readonly intervalMs: number;
  private readonly scanMs: number;
  private readonly timeoutMs: number;
  private readonly maxIntervalMs: number;
  private readonly idleAfterMs: number;

  constructor(private readonly options: CollectorOptions) {
    this.intervalMs = options.intervalMs ?? 1_000;
    this.scanMs = options.scanMs ?? 3_000;
    this.timeoutMs = options.timeoutMs ?? PROBE_TIMEOUT_MS;
    this.maxIntervalMs = Math.max(this.intervalMs, options.maxIntervalMs ?? MAX_INTERVAL_MS);
    this.idleAfterMs = options.idleAfterMs ?? IDLE_AFTER_MS;
    this.counters.paceMs = this.intervalMs;
  }

  /** Ready to poll; the first round runs when a page asks (demand, watch). */
  start(): void {
    this.stopped = false;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.looping = false;
  }

  /** A live socket opened (+1) or closed (-1): polling goes on while any is open. */
  watch(delta: 1 | -1): void {
    this.watchers = Math.max(0, this.watchers + delta);
    if (delta > 0) this.demand();
    else this.lastDemandAt = Date.now(); // the last page leaving keeps polling IDLE_AFTER_MS more, like a request
  }

  /** A page asked something: poll for IDLE_AFTER_MS more, starting now if polling was parked. */
  demand(): void {
    this.lastDemandAt = Date.now();
    if (!this.looping && !this.stopped) this.schedule(0);
  }

  /** Something was just changed (a fault from the page): the next round at once and at the base pace. */
  hurry(): void {
    this.unchanged = 0;
    this.lastDemandAt = Date.now();
    if (this.stopped) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.running === null) this.schedule(0);
    // else: the round under way schedules the next one at the base pace
  }

  /** The overview, polled anew first when it is older than maxAgeMs (a page asking after polling was parked). */
  async fresh(maxAgeMs: number): Promise<Overview> {
    this.demand();
    if (!this.stopped && Date.now() - this.latest.generatedAt > maxAgeMs) await this.tick();
    return this.latest;
  }

  private schedule(delayMs: number): void {
    this.looping = true;
    this.counters.parked = false;
    this.timer = setTimeout(() => void this.round(), delayMs);
  }

  private async round(): Promise<void> {
    this.timer = null;
    const started = Date.now();
    try {
      await this.tick();
    } catch {
      // a cluster folder half-written or removed mid-poll: the next round sees it whole or gone
    }
    if (this.stopped || this.timer !== null) return;
    if (this.watchers === 0 && Date.now() - this.lastDemandAt > this.idleAfterMs) {
      // Nobody is looking: no polls until a page asks again.
      this.looping = false;
      this.counters.parked = true;
      return;
    }
    // Three unchanged rounds at the base pace, then doubling up to maxIntervalMs.
    const pace = Math.min(this.maxIntervalMs, this.intervalMs * 2 ** Math.max(0, Math.min(this.unchanged - 2, 8)));
    this.counters.paceMs = pace;
    this.schedule(Math.max(50, pace - (Date.now() - started)));
  }

  overview(): Overview {
    return this.latest;
  }

  onTick(listener: TickListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Whether the cluster of that name is the remote one (no local processes to signal). */
  isRemote(name: string): boolean {
    return this.clusters.get(name)?.remote === true;
  }

  /** The data folder of a cluster shown now, by name ('' for the remote cluster). */
  dataDirOf(name: string): string | undefined {
    return this.clusters.get(name)?.dataDir;
  }

  /** The cluster folders under the data root (each with a cluster state file). */
  private scan(): void {
    const root = this.options.dataRoot;
    const names = clusterDirs(root).map((dir) => basename(dir));
    for (const name of names) {
      if (!this.clusters.has(name))
        this.clusters.set(name, {
          name,
          dataDir: join(root, name),
          remote: false,
          grouped: null,
          processes: new Map(),
          groups: new Map(),
        });
    }
    const remote = this.options.remote;
    if (remote !== undefined && !this.clusters.has(remote.name)) {
      this.clusters.set(remote.name, {
        name: remote.name,
        dataDir: '',
        remote: true,
        grouped: null,
        processes: new Map(),
        groups: new Map(),
      });
    }
    for (const name of [...this.clusters.keys()]) {
      if (!names.includes(name) && name !== remote?.name) {
        this.clusters.delete(name);
        this.options.timeline.forget(name);
      }
    }
    this.lastScan = Date.now();
  }

  /** One poll of everything (joined when one is under way); public so tests and the server can force one. */
  tick(): Promise<void> {
    this.running ??= this.pollAll().finally(() => (this.running = null));
    return this.running;
  }

  private async pollAll(): Promise<void> {
    const started = Date.now();
    if (started - this.lastScan >= this.scanMs) this.scan();
    const before = this.options.timeline.lastSeq;
    // One cluster folder that is not what it should be (half-written, hand-edited) must not hide the others.
    const views = await Promise.all([...this.clusters.values()].map((c) => this.pollCluster(c).catch(() => null)));
    this.latest = {
      generatedAt: Date.now(),
      clusters: views.filter((v): v is ClusterView => v !== null).sort((a, b) => (a.name < b.name ? -1 : 1)),
    };
    const signature = signatureOf(this.latest);
    this.unchanged = signature === this.lastSignature ? this.unchanged + 1 : 0;
    this.lastSignature = signature;
    this.counters.ticks++;
    this.counters.lastTickMs = Date.now() - started;
    const events = this.options.timeline.since(before);
    for (const listener of this.listeners) listener(this.latest, events);
  }

  private async pollCluster(c: ClusterEntry): Promise<ClusterView | null> {
    if (c.remote) return this.pollRemote(c, this.options.remote!);
    let state: ClusterState;
    let token: string;
    try {
      state = JSON.parse(readFileSync(statePath(c.dataDir), 'utf8')) as ClusterState;
      token = readFileSync(tokenPath(c.dataDir), 'utf8').trim();
      if (typeof state.service !== 'string' || !Array.isArray(state.members)) return null;
    } catch {
      return null; // being written or gone; shown again next tick
    }
    const timeline = this.options.timeline;
    timeline.ingestFaults(c.name, c.dataDir);
    const workers = state.workers ?? [];
    const [members, workerViews] = await Promise.all([
      Promise.all(state.members.map((m) => this.pollMember(c, m, token))),
      Promise.all(workers.map((w) => this.pollWorker(c, w))),
    ]);
    const { views, groups } = this.settle(c, state.service, members);
    // Processes that are gone from the state file are forgotten.
    const ids = new Set([...state.members.map((m) => m.id), ...workers.map((w) => w.id)]);
    for (const id of c.processes.keys()) if (!ids.has(id)) c.processes.delete(id);
    return {
      name: c.name,
      service: state.service,
      dataDir: c.dataDir,
      members: views,
      workers: workerViews,
      groups,
      partition: readPartition(c.dataDir),
    };
  }

  /**
   * The remote cluster: each endpoint's status, metrics and groups over HTTP(S). No pid, CPU or memory (they are
   * on another host): a member that stops answering is `slow`, then `down` after the misses health.ts counts.
   */
  private async pollRemote(c: ClusterEntry, remote: RemoteSource): Promise<ClusterView> {
    const cluster = remote.cluster;
    const ask = (i: number, path: string): Promise<unknown> =>
      cluster.ask(i, 'GET', path, undefined, this.timeoutMs).then(
        (a) => (a.status === 200 ? a.body : null),
        () => null,
      );
    const polled = await Promise.all(
      cluster.urls.map(async (url, i) => {
        const host = new URL(url).host;
        const sent = Date.now();
        const [statusBody, metricsText, groupsBody] = await Promise.all([
          ask(i, '/v1/cluster/status').then((b) => ({ b, ms: Date.now() - sent })),
          ask(i, '/metrics'),
          c.grouped ? ask(i, '/v1/cluster/groups') : Promise.resolve(null),
        ]);
        const status =
          typeof (statusBody.b as { id?: unknown } | null)?.id === 'string' ? (statusBody.b as GroupedStatus) : null;
        // Keyed by URL (a member that does not answer has no id to give); shown by the id it last answered with.
        const mem = this.memory(c, url, null);
        const id = status?.id ?? mem.lastId ?? host;
        if (status !== null) mem.lastId = status.id;
        const view: MemberView = { ...emptyMember(id, host, ''), pid: null };
        if (typeof metricsText === 'string') view.metrics = this.rate(mem, metricsText);
        this.fillStatus(c, mem, view, status, statusBody.ms);
        this.upDown(c, mem, id, view.state !== 'down', 'member');
        return { view, status, replicas: this.replicasOf(c, mem, view, groupsBody as { groups?: unknown } | null) };
      }),
    );
    // A member's status does not name its service: the remote cluster is shown under its --name.
    const { views, groups } = this.settle(c, remote.name, polled);
    return { name: c.name, service: remote.name, dataDir: '', members: views, workers: [], groups, partition: null };
  }

  /** From the members polled: whether the service is grouped (first answer), each one's lag, the groups, their events. */
  private settle(
    c: ClusterEntry,
    service: string,
    members: Array<{ view: MemberView; status: GroupedStatus | null; replicas: AgedReplicas }>,
  ): { views: MemberView[]; groups: GroupView[] } {
    if (c.grouped === null) {
      const any = members.find((m) => m.status !== null)?.status;
      if (any) c.grouped = typeof any.groups === 'number';
    }
    const views = members.map((m) => m.view);
    const maxCommit = Math.max(0, ...views.map((v) => v.commit ?? 0));
    for (const v of views) v.lag = v.applied === null ? null : maxCommit - v.applied;
    const groups = c.grouped
      ? mergeGroups(members.map((m) => ({ id: m.view.id, replicas: m.replicas })))
      : singleGroup(service, views);
    this.groupEvents(c, groups);
    return { views, groups };
  }

  /**
   * A member's view from its status answer (or its miss): role and latency through health.ts; while it is slow
   * its last answered term, leader and indexes stay shown. A snapshot index that moved is a timeline event.
   */
  private fillStatus(
    c: ClusterEntry,
    mem: ProcessMemory,
    view: MemberView,
    status: GroupedStatus | null,
    latencyMs: number,
  ): void {
    const judged = judge(mem.health, status === null ? null : { role: roleOf(status), latencyMs }, Date.now());
    view.state = judged.state;
    view.role = judged.role;
    view.latencyMs = judged.latencyMs;
    view.missedPolls = judged.misses;
    if (status === null) {
      const last = mem.lastStatus;
      if (last !== undefined && judged.state === 'slow') {
        view.term = last.term;
        view.leader = last.leader_id;
        view.commit = last.commit_index;
        view.applied = last.applied_index;
      }
      return;
    }
    mem.lastStatus = status;
    view.term = status.term;
    view.leader = status.leader_id;
    view.commit = status.commit_index;
    view.applied = status.applied_index;
    view.groupsLed = typeof status.groups === 'number' ? (status.leaders ?? 0) : status.role === 'leader' ? 1 : 0;
    if (typeof status.snapshot_index === 'number') {
      if (mem.snapshotIndex !== undefined && status.snapshot_index > mem.snapshotIndex) {
        this.options.timeline.add(
          c.name,
          'snapshot',
          view.id,
          null,
          `${view.id} took a snapshot at index ${status.snapshot_index}`,
        );
      }
      mem.snapshotIndex = status.snapshot_index;
    }
  }

  /**
   * The replicas a member holds: this poll's answer, else (it missed the call but is not down) the last list it
   * gave, aged; a grouped cluster's rows would otherwise empty and refill as calls miss under load.
   */
  private replicasOf(
    c: ClusterEntry,
    mem: ProcessMemory,
    view: MemberView,
    body: { groups?: unknown } | null,
  ): AgedReplicas {
    if (!c.grouped) return { list: [], ageMs: 0 };
    const now = Date.now();
    if (Array.isArray(body?.groups)) {
      mem.replicas = { list: body.groups as Replica[], at: now };
      return { list: mem.replicas.list, ageMs: 0 };
    }
    if (view.state === 'down' || view.state === 'removed' || mem.replicas === undefined) return { list: [], ageMs: 0 };
    return { list: mem.replicas.list, ageMs: now - mem.replicas.at };
  }

  private memory(c: ClusterEntry, id: string, pid: number | null): ProcessMemory {
    let mem = c.processes.get(id);
    if (mem === undefined || mem.pid !== pid) {
      // A new process (or a restart): its CPU time and counters start again.
      mem = {
        pid,
        up: mem?.up,
        snapshotIndex: mem?.snapshotIndex,
        health: newHealth(),
        ...(mem?.lastId !== undefined ? { lastId: mem.lastId } : {}),
      };
      c.processes.set(id, mem);
    }
    return mem;
  }

  /** up/down events when a process appears or goes (not on the first poll: that is how things were). */
  private upDown(c: ClusterEntry, mem: ProcessMemory, id: string, up: boolean, what: string): void {
    if (mem.up !== undefined && mem.up !== up)
      this.options.timeline.add(
        c.name,
        up ? 'up' : 'down',
        id,
        null,
        up ? `${what} ${id} is up${mem.pid === null ? '' : ` (pid ${mem.pid})`}` : `${what} ${id} is down`,
      );
    mem.up = up;
  }

  private cpu(mem: ProcessMemory, ticks: number): number | null {
    const now = Date.now();
    const prev = mem.cpu;
    mem.cpu = { at: now, ticks };
    if (prev === undefined || now <= prev.at) return null;
    return Math.round(((ticks - prev.ticks) / CLOCK_TICKS / ((now - prev.at) / 1000)) * 1000) / 10;
  }

  /** Rates since the last answered sample: a missed one leaves the previous sample in place (the next rate spans the gap). */
  private rate(mem: ProcessMemory, text: string): ProcessMetrics {
    const sample = parseMetrics(text, Date.now());
    const out = rates(mem.metrics, sample);
    mem.metrics = sample;
    return out;
  }

  private async metricsOf(mem: ProcessMemory, address: string, token: string): Promise<ProcessMetrics> {
    const answer = await httpGet(address, '/metrics', token, this.timeoutMs);
    // A miss is a gap (null rates), not a zero.
    if (answer === null || answer.status !== 200) return NO_METRICS;
    return this.rate(mem, answer.text);
  }

  private async pollMember(
    c: ClusterEntry,
    m: MemberRecord,
    token: string,
  ): Promise<{ view: MemberView; status: GroupedStatus | null; replicas: AgedReplicas }> {
    const alive = !m.removed && isAlive(m.pid);
    const pid = alive ? m.pid : null;
    const mem = this.memory(c, m.id, pid);
    const view: MemberView = {
      ...emptyMember(m.id, m.httpAddress, m.raftAddress),
      state: m.removed ? 'removed' : 'down',
      pid,
    };
    const proc = pid === null ? null : procSample(pid);
    if (!m.removed) this.upDown(c, mem, m.id, proc !== null, 'member');
    if (proc === null) return { view, status: null, replicas: { list: [], ageMs: 0 } };
    view.cpuPercent = this.cpu(mem, proc.cpuTicks);
    view.rssBytes = proc.rssBytes;
    view.role = mem.health.lastRole;
    if (proc.stopped) {
      // SIGSTOPped: it would take the connection and never answer; nothing to ask. Its replicas still exist: the
      // groups keep its last list, aged.
      view.state = 'paused';
      return { view, status: null, replicas: this.replicasOf(c, mem, view, null) };
    }
    const sent = Date.now();
    const [status, metrics, groups] = await Promise.all([
      (getJson(m.httpAddress, '/v1/cluster/status', token, this.timeoutMs) as Promise<GroupedStatus | null>).then(
        (s) => ({ s: s !== null && typeof s === 'object' ? s : null, ms: Date.now() - sent }),
      ),
      this.metricsOf(mem, m.httpAddress, token),
      c.grouped
        ? (getJson(m.httpAddress, '/v1/cluster/groups', token, this.timeoutMs) as Promise<{ groups?: unknown } | null>)
        : Promise.resolve(null),
    ]);
    view.metrics = metrics;
    this.fillStatus(c, mem, view, status.s, status.ms);
    if (view.state === 'down') {
      // Running but silent for DOWN_AFTER_MS: down with its pid, and on the timeline once.
      this.upDown(c, mem, m.id, false, 'member');
    }
    return { view, status: status.s, replicas: this.replicasOf(c, mem, view, groups) };
  }

  private async pollWorker(c: ClusterEntry, w: WorkerRecord): Promise<WorkerView> {
    const alive = isAlive(w.pid);
    const pid = alive ? w.pid : null;
    const mem = this.memory(c, w.id, pid);
    const proc = pid === null ? null : procSample(pid);
    this.upDown(c, mem, w.id, proc !== null, 'worker');
    const view: WorkerView = {
      id: w.id,
      role: w.role,
      pid: proc === null ? null : pid,
      alive: proc !== null,
      cpuPercent: null,
      rssBytes: null,
      address: w.httpAddress,
      metrics: NO_METRICS,
    };
    if (proc === null) return view;
    view.cpuPercent = this.cpu(mem, proc.cpuTicks);
    view.rssBytes = proc.rssBytes;
    if (!proc.stopped) view.metrics = await this.metricsOf(mem, w.httpAddress, '');
    return view;
  }

  /** Leader changes and elections (a group's term moving), against what the previous poll saw. */
  private groupEvents(c: ClusterEntry, groups: GroupView[]): void {
    const timeline = this.options.timeline;
    for (const g of groups) {
      const prev = c.groups.get(g.name);
      const term = g.term ?? prev?.term ?? 0;
      if (prev !== undefined) {
        if (term > prev.term)
          timeline.add(
            c.name,
            'election',
            g.leader,
            g.name,
            `${g.name}: term ${prev.term} -> ${term}${g.leader === null ? ' (no leader yet)' : ''}`,
          );
        if (g.leader !== null && g.leader !== prev.leader)
          timeline.add(c.name, 'leader', g.leader, g.name, `${g.name}: ${g.leader} leads (term ${term})`);
      }
      // A poll that saw no leader keeps the last one known, so a leader that returns is not "a change".
      c.groups.set(g.name, { leader: g.leader ?? prev?.leader ?? null, term: Math.max(term, prev?.term ?? 0) });
    }
    if (c.groups.size > groups.length * 2 + 16) {
      const names = new Set(groups.map((g) => g.name));
      for (const name of c.groups.keys()) if (!names.has(name)) c.groups.delete(name);
    }
  }
}

/** A member's replicas of its groups, and how old that list is (0: answered this poll). */
interface AgedReplicas {
  list: Replica[];
  ageMs: number;
}

function emptyMember(id: string, httpAddress: string, raftAddress: string): MemberView {
  return {
    id,
    state: 'down',
    pid: null,
    term: null,
    leader: null,
    commit: null,
    applied: null,
    lag: null,
    cpuPercent: null,
    rssBytes: null,
    httpAddress,
    raftAddress,
    groupsLed: 0,
    metrics: NO_METRICS,
    role: null,
    latencyMs: null,
    missedPolls: 0,
  };
}

function roleOf(status: MemberStatus): Role {
  if (Array.isArray(status.learners) && status.learners.includes(status.id)) return 'learner';
  return status.role === 'leader' || status.role === 'candidate' ? status.role : 'follower';
}

/**
 * A single-group service: one group named after the service, from the members' views. A slow leader still leads
 * (its role, at the highest term seen); when no member that answered leads, the leader the others follow is named.
 */
function singleGroup(service: string, views: MemberView[]): GroupView[] {
  const known = views.filter((v) => v.term !== null && v.state !== 'down' && v.state !== 'removed');
  const term = known.length === 0 ? null : Math.max(...known.map((v) => v.term!));
  const leader =
    known.find((v) => v.role === 'leader' && v.term === term)?.id ??
    known.find((v) => v.term === term && v.leader !== null)?.leader ??
    null;
  return [
    {
      name: service,
      leader,
      term,
      ageMs: 0,
      members: views.map((v) => ({ id: v.id, state: v.state, commit: v.commit, applied: v.applied })),
    },
  ];
}

/** A grouped service: every member's replicas merged per group (the replica that leads at the highest term wins). */
function mergeGroups(members: Array<{ id: string; replicas: AgedReplicas }>): GroupView[] {
  const byGroup = new Map<string, { ageMs: number; replicas: Array<Replica & { member: string }> }>();
  for (const m of members) {
    for (const r of m.replicas.list) {
      if (typeof r?.group !== 'string') continue;
      let g = byGroup.get(r.group);
      if (g === undefined) byGroup.set(r.group, (g = { ageMs: 0, replicas: [] }));
      g.ageMs = Math.max(g.ageMs, m.replicas.ageMs);
      g.replicas.push({ ...r, member: m.id });
    }
  }
  const out: GroupView[] = [];
  for (const [name, { ageMs, replicas }] of byGroup) {
    const term = Math.max(...replicas.map((r) => r.term));
    const lead = replicas.find((r) => r.role === 'leader' && r.term === term);
    out.push({
      name,
      leader: lead?.member ?? null,
      term,
      ageMs,
      members: replicas
        .map((r) => ({ id: r.member, state: r.role, commit: r.commit, applied: r.applied }))
        .sort((a, b) => (a.id < b.id ? -1 : 1)),
    });
  }
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** What decides "something changed" for the pace: states, roles, terms, leaders, indexes, processes, group leaders. */
function signatureOf(o: Overview): string {
  const parts: string[] = [];
  for (const c of o.clusters) {
    parts.push(c.name, JSON.stringify(c.partition));
    for (const m of c.members)
      parts.push(`${m.id}:${m.state}:${m.role}:${m.pid}:${m.term}:${m.leader}:${m.commit}:${m.applied}`);
    for (const w of c.workers) parts.push(`${w.id}:${w.pid}:${w.alive}`);
    for (const g of c.groups) parts.push(`${g.name}:${g.leader}:${g.term}:${g.members.length}`);
  }
  return parts.join('|');
}
