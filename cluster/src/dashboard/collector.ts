/**
 * The dashboard's one collector: every second it polls each process of each cluster under the data root (status,
 * /metrics, groups; CPU and memory from /proc), builds the overview every page shows and derives the timeline's
 * events (leader changes, elections, snapshots, processes coming and going). However many pages watch, each
 * process is polled once a second; every call has a short deadline and all run in parallel, so a paused member
 * (which accepts connections and never answers) delays nothing.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readPartition } from '../actions.js';
import type { RemoteCluster } from '../remote.js';
import type { GroupedStatus, Replica } from '../views.js';
import type { MemberStatus } from '../processes.js';
import { isAlive, statePath, tokenPath, type ClusterState, type MemberRecord, type WorkerRecord } from '../state.js';
import { NO_METRICS, parseMetrics, rates, type MetricsSample } from './metrics-text.js';
import { CLOCK_TICKS, getJson, httpGet, procSample } from './probe.js';
import type { Timeline } from './timeline.js';
import type { ClusterView, GroupView, MemberState, MemberView, Overview, ProcessMetrics, TimelineEvent, WorkerView } from './types.js';

/** A cluster on other hosts, shown beside the data root's: its members' URLs, no pids, no local files. */
export interface RemoteSource {
  name: string;
  cluster: RemoteCluster;
}

export interface CollectorOptions {
  dataRoot: string;
  /** `cluster dashboard --endpoints`: one remote cluster, polled over HTTP(S) only. */
  remote?: RemoteSource;
  timeline: Timeline;
  intervalMs?: number;
  /** How often the data root is scanned for clusters that came or went. */
  scanMs?: number;
  /** Deadline of each HTTP call to a process. */
  timeoutMs?: number;
}

/** What the collector remembers of one process between polls (rates and changes are differences). */
interface ProcessMemory {
  pid: number | null;
  cpu?: { at: number; ticks: number };
  metrics?: MetricsSample;
  up?: boolean;
  snapshotIndex?: number;
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

export type TickListener = (overview: Overview, events: TimelineEvent[]) => void;

export class Collector {
  private readonly clusters = new Map<string, ClusterEntry>();
  private latest: Overview = { generatedAt: Date.now(), clusters: [] };
  private readonly listeners = new Set<TickListener>();
  private timer: NodeJS.Timeout | null = null;
  private lastScan = 0;
  private stopped = false;
  /** Exposed by GET /api/debug: ticks run, and how long the last one took. */
  readonly counters = { ticks: 0, lastTickMs: 0 };
  private readonly intervalMs: number;
  private readonly scanMs: number;
  private readonly timeoutMs: number;

  constructor(private readonly options: CollectorOptions) {
    this.intervalMs = options.intervalMs ?? 1_000;
    this.scanMs = options.scanMs ?? 3_000;
    this.timeoutMs = options.timeoutMs ?? 400;
  }

  start(): void {
    this.stopped = false;
    const loop = async (): Promise<void> => {
      const started = Date.now();
      try {
        await this.tick();
      } catch {
        // a cluster folder half-written or removed mid-poll: the next tick sees it whole or gone
      }
      if (this.stopped) return;
      this.timer = setTimeout(() => void loop(), Math.max(50, this.intervalMs - (Date.now() - started)));
    };
    void loop();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
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
    const names = existsSync(root) ? readdirSync(root).filter((d) => existsSync(statePath(join(root, d)))) : [];
    for (const name of names) {
      if (!this.clusters.has(name)) this.clusters.set(name, { name, dataDir: join(root, name), remote: false, grouped: null, processes: new Map(), groups: new Map() });
    }
    const remote = this.options.remote;
    if (remote !== undefined && !this.clusters.has(remote.name)) {
      this.clusters.set(remote.name, { name: remote.name, dataDir: '', remote: true, grouped: null, processes: new Map(), groups: new Map() });
    }
    for (const name of [...this.clusters.keys()]) {
      if (!names.includes(name) && name !== remote?.name) {
        this.clusters.delete(name);
        this.options.timeline.forget(name);
      }
    }
    this.lastScan = Date.now();
  }

  /** One poll of everything; public so tests and the server can force one. */
  async tick(): Promise<void> {
    const started = Date.now();
    if (started - this.lastScan >= this.scanMs) this.scan();
    const before = this.options.timeline.lastSeq;
    // One cluster folder that is not what it should be (half-written, hand-edited) must not hide the others.
    const views = await Promise.all([...this.clusters.values()].map((c) => this.pollCluster(c).catch(() => null)));
    this.latest = { generatedAt: Date.now(), clusters: views.filter((v): v is ClusterView => v !== null).sort((a, b) => (a.name < b.name ? -1 : 1)) };
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
    const [members, workerViews] = await Promise.all([Promise.all(state.members.map((m) => this.pollMember(c, m, token))), Promise.all(workers.map((w) => this.pollWorker(c, w)))]);
    const { views, groups } = this.settle(c, state.service, members);
    // Processes that are gone from the state file are forgotten.
    const ids = new Set([...state.members.map((m) => m.id), ...workers.map((w) => w.id)]);
    for (const id of c.processes.keys()) if (!ids.has(id)) c.processes.delete(id);
    return { name: c.name, service: state.service, dataDir: c.dataDir, members: views, workers: workerViews, groups, partition: readPartition(c.dataDir) };
  }

  /**
   * The remote cluster: each endpoint's status, metrics and groups over HTTP(S). No pid, CPU or memory (they are
   * on another host), and up/down means "answers its status" rather than "its process runs".
   */
  private async pollRemote(c: ClusterEntry, remote: RemoteSource): Promise<ClusterView> {
    const cluster = remote.cluster;
    const ask = (i: number, path: string): Promise<unknown> =>
      cluster.ask(i, 'GET', path, undefined, this.timeoutMs).then((a) => (a.status === 200 ? a.body : null));
    const polled = await Promise.all(
      cluster.urls.map(async (url, i) => {
        const [statusBody, metricsText, groupsBody] = await Promise.all([ask(i, '/v1/cluster/status'), ask(i, '/metrics'), c.grouped ? ask(i, '/v1/cluster/groups') : Promise.resolve(null)]);
        const status = typeof (statusBody as { id?: unknown } | null)?.id === 'string' ? (statusBody as GroupedStatus) : null;
        const host = new URL(url).host;
        const id = status?.id ?? host;
        const mem = this.memory(c, url, null);
        this.upDown(c, mem, id, status !== null, 'member');
        const view: MemberView = { ...emptyMember(id, host, ''), pid: null };
        if (typeof metricsText === 'string') {
          const sample = parseMetrics(metricsText, Date.now());
          view.metrics = rates(mem.metrics, sample);
          mem.metrics = sample;
        }
        if (status !== null) this.fillStatus(c, mem, view, status);
        const replicas = Array.isArray((groupsBody as { groups?: unknown } | null)?.groups) ? (groupsBody as { groups: Replica[] }).groups : [];
        return { view, status, replicas };
      }),
    );
    // A member's status does not name its service: the remote cluster is shown under its --name.
    const { views, groups } = this.settle(c, remote.name, polled);
    return { name: c.name, service: remote.name, dataDir: '', members: views, workers: [], groups, partition: null };
  }

  /** From the members polled: whether the service is grouped (first answer), each one's lag, the groups, their events. */
  private settle(c: ClusterEntry, service: string, members: Array<{ view: MemberView; status: GroupedStatus | null; replicas: Replica[] }>): { views: MemberView[]; groups: GroupView[] } {
    if (c.grouped === null) {
      const any = members.find((m) => m.status !== null)?.status;
      if (any) c.grouped = typeof any.groups === 'number';
    }
    const views = members.map((m) => m.view);
    const maxCommit = Math.max(0, ...views.map((v) => v.commit ?? 0));
    for (const v of views) v.lag = v.applied === null ? null : maxCommit - v.applied;
    const groups = c.grouped ? mergeGroups(members.map((m) => ({ id: m.view.id, replicas: m.replicas }))) : singleGroup(service, members.map((m) => ({ view: m.view, status: m.status })));
    this.groupEvents(c, groups);
    return { views, groups };
  }

  /** A member's view from its status answer; a snapshot index that moved is a timeline event. */
  private fillStatus(c: ClusterEntry, mem: ProcessMemory, view: MemberView, status: GroupedStatus): void {
    view.state = roleState(status);
    view.term = status.term;
    view.leader = status.leader_id;
    view.commit = status.commit_index;
    view.applied = status.applied_index;
    view.groupsLed = typeof status.groups === 'number' ? (status.leaders ?? 0) : status.role === 'leader' ? 1 : 0;
    if (typeof status.snapshot_index === 'number') {
      if (mem.snapshotIndex !== undefined && status.snapshot_index > mem.snapshotIndex) {
        this.options.timeline.add(c.name, 'snapshot', view.id, null, `${view.id} took a snapshot at index ${status.snapshot_index}`);
      }
      mem.snapshotIndex = status.snapshot_index;
    }
  }

  private memory(c: ClusterEntry, id: string, pid: number | null): ProcessMemory {
    let mem = c.processes.get(id);
    if (mem === undefined || mem.pid !== pid) {
      // A new process (or a restart): its CPU time and counters start again.
      mem = { pid, up: mem?.up, snapshotIndex: mem?.snapshotIndex };
      c.processes.set(id, mem);
    }
    return mem;
  }

  /** up/down events when a process appears or goes (not on the first poll: that is how things were). */
  private upDown(c: ClusterEntry, mem: ProcessMemory, id: string, up: boolean, what: string): void {
    if (mem.up !== undefined && mem.up !== up) this.options.timeline.add(c.name, up ? 'up' : 'down', id, null, up ? `${what} ${id} is up (pid ${mem.pid})` : `${what} ${id} is down`);
    mem.up = up;
  }

  private cpu(mem: ProcessMemory, ticks: number): number | null {
    const now = Date.now();
    const prev = mem.cpu;
    mem.cpu = { at: now, ticks };
    if (prev === undefined || now <= prev.at) return null;
    return Math.round((((ticks - prev.ticks) / CLOCK_TICKS) / ((now - prev.at) / 1000)) * 1000) / 10;
  }

  private async metricsOf(mem: ProcessMemory, address: string, token: string): Promise<ProcessMetrics> {
    const answer = await httpGet(address, '/metrics', token, this.timeoutMs);
    if (answer === null || answer.status !== 200) return NO_METRICS;
    const sample = parseMetrics(answer.text, Date.now());
    const out = rates(mem.metrics, sample);
    mem.metrics = sample;
    return out;
  }

  private async pollMember(c: ClusterEntry, m: MemberRecord, token: string): Promise<{ view: MemberView; status: GroupedStatus | null; replicas: Replica[] }> {
    const alive = !m.removed && isAlive(m.pid);
    const pid = alive ? m.pid : null;
    const mem = this.memory(c, m.id, pid);
    const view: MemberView = { ...emptyMember(m.id, m.httpAddress, m.raftAddress), state: m.removed ? 'removed' : 'down', pid };
    const proc = pid === null ? null : procSample(pid);
    if (!m.removed) this.upDown(c, mem, m.id, proc !== null, 'member');
    if (proc === null) return { view, status: null, replicas: [] };
    view.cpuPercent = this.cpu(mem, proc.cpuTicks);
    view.rssBytes = proc.rssBytes;
    if (proc.stopped) {
      // SIGSTOPped: it would take the connection and never answer; nothing to ask.
      view.state = 'paused';
      return { view, status: null, replicas: [] };
    }
    const [status, metrics, groups] = await Promise.all([
      getJson(m.httpAddress, '/v1/cluster/status', token, this.timeoutMs) as Promise<GroupedStatus | null>,
      this.metricsOf(mem, m.httpAddress, token),
      c.grouped ? (getJson(m.httpAddress, '/v1/cluster/groups', token, this.timeoutMs) as Promise<{ groups?: Replica[] } | null>) : Promise.resolve(null),
    ]);
    view.metrics = metrics;
    if (status !== null && typeof status === 'object') this.fillStatus(c, mem, view, status);
    const replicas = Array.isArray(groups?.groups) ? groups.groups : [];
    return { view, status, replicas };
  }

  private async pollWorker(c: ClusterEntry, w: WorkerRecord): Promise<WorkerView> {
    const alive = isAlive(w.pid);
    const pid = alive ? w.pid : null;
    const mem = this.memory(c, w.id, pid);
    const proc = pid === null ? null : procSample(pid);
    this.upDown(c, mem, w.id, proc !== null, 'worker');
    const view: WorkerView = { id: w.id, role: w.role, pid: proc === null ? null : pid, alive: proc !== null, cpuPercent: null, rssBytes: null, address: w.httpAddress, metrics: NO_METRICS };
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
        if (term > prev.term) timeline.add(c.name, 'election', g.leader, g.name, `${g.name}: term ${prev.term} -> ${term}${g.leader === null ? ' (no leader yet)' : ''}`);
        if (g.leader !== null && g.leader !== prev.leader) timeline.add(c.name, 'leader', g.leader, g.name, `${g.name}: ${g.leader} leads (term ${term})`);
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
  };
}

function roleState(status: MemberStatus): MemberState {
  if (Array.isArray(status.learners) && status.learners.includes(status.id)) return 'learner';
  return status.role === 'leader' || status.role === 'candidate' ? status.role : 'follower';
}

/** A single-group service: one group named after the service, from the members' statuses. */
function singleGroup(service: string, members: Array<{ view: MemberView; status: GroupedStatus | null }>): GroupView[] {
  const answered = members.filter((m) => m.status !== null);
  const term = answered.length === 0 ? null : Math.max(...answered.map((m) => m.status!.term));
  const leader = answered.find((m) => m.status!.role === 'leader' && m.status!.term === term)?.view.id ?? null;
  return [
    {
      name: service,
      leader,
      term,
      members: members.map((m) => ({ id: m.view.id, state: m.view.state, commit: m.view.commit, applied: m.view.applied })),
    },
  ];
}

/** A grouped service: every member's replicas merged per group (the replica that leads at the highest term wins). */
function mergeGroups(members: Array<{ id: string; replicas: Replica[] }>): GroupView[] {
  const byGroup = new Map<string, Array<Replica & { member: string }>>();
  for (const m of members) {
    for (const r of m.replicas) {
      if (typeof r?.group !== 'string') continue;
      let list = byGroup.get(r.group);
      if (list === undefined) byGroup.set(r.group, (list = []));
      list.push({ ...r, member: m.id });
    }
  }
  const out: GroupView[] = [];
  for (const [name, replicas] of byGroup) {
    const term = Math.max(...replicas.map((r) => r.term));
    const lead = replicas.find((r) => r.role === 'leader' && r.term === term);
    out.push({
      name,
      leader: lead?.member ?? null,
      term,
      members: replicas.map((r) => ({ id: r.member, state: r.role, commit: r.commit, applied: r.applied })).sort((a, b) => (a.id < b.id ? -1 : 1)),
    });
  }
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
