/**
 * `collab`: remote-edit latency of the collaborative editor, from one client's keystroke to another client's
 * screen, beside a y-websocket server doing the same. N editors (5, then 50) hold one document; each types one
 * character at a random place, waits until the next editor (w+1 mod N) has it, then types again after a think
 * time (--think-ms, 100 by default: a fast typist's 10 keys a second). Measured per phase:
 *
 *  - latency keystroke -> the next editor's document (the goal's figure), and keystroke -> every other editor's
 *    document (every receipt counted: N-1 per keystroke);
 *  - keystrokes per second delivered; and, in a last phase of 50 editors without think time, the most keystrokes
 *    per second the system carries (ops/s).
 *
 * "On the screen" means applied to the client's replica (our Doc, Yjs's Y.Doc), with no editor page around it:
 * the same for both sides. Ours: `cluster up --service collab` (op-log Raft members and workers); clients speak the
 * wire contract over WebSocket (join, op, snapshot, op/ack) with an @raftkit/crdt Doc each, editors spread over
 * the workers (the document's owner relays to the others); a keystroke is broadcast once committed in the Raft
 * log (fsynced on a majority). y-websocket: its reference server (`@y/websocket-server`, in memory, nothing
 * persisted) and its reference client provider (`y-websocket`'s WebsocketProvider) with a Y.Doc each.
 */
import { join } from 'node:path';
import { Doc, type Op } from '@raftkit/crdt';
import WebSocket from 'ws';
import * as Y from 'yjs';
import { WebsocketProvider } from 'y-websocket';
import type { Benchmark, Goal, RunOptions, SideResult } from '../benchmark.js';
import { interrupted } from '../cleanup.js';
import { startOurCluster } from '../ours.js';
import { startYWebsocket } from '../peers/ywebsocket.js';
import { BenchError, CpuMeter, sleep } from '../procs.js';
import { summarizeProfiles } from '../profile.js';
import { round, summarize } from '../stats.js';

/** One editor of a run, whatever the system. */
export interface Editor {
  /** Types one character at a random place; returns the keystroke's key (how receivers name it). */
  type(): string;
  /** Called with the key of every remote keystroke this editor applies. */
  onRemote: (key: string) => void;
  /** Ours only: called with the key of this editor's keystroke when the owner acknowledges it (committed). */
  onAck?: (key: string) => void;
  close(): void;
}

interface Side {
  system: string;
  serverPids: number[];
  members: number | null;
  /** Ours with --profile: where each member's and worker's CPU profile lands (member-<pid>.cpuprofile). */
  profileDir?: string;
  /** Connects `n` editors to one fresh document, all synced with it. */
  editors(n: number, docName: string): Promise<Editor[]>;
  stop(): Promise<void>;
}

export interface Phase {
  editors: number;
  thinkMs: number;
}

export interface PhaseFigures {
  editors: number;
  think_ms: number;
  keystrokes: number;
  keystrokes_per_s: number;
  /** Keystroke -> the next editor's replica. */
  next_p50_ms: number;
  next_p99_ms: number;
  next_max_ms: number;
  /** Keystroke -> every other editor's replica (N-1 receipts a keystroke). */
  all_p50_ms: number;
  all_p99_ms: number;
  /** Ours only: keystroke -> its author's acknowledgement (committed in the Raft log); null for y-websocket. */
  ack_p50_ms: number | null;
  ack_p99_ms: number | null;
  /** Keystrokes that reached the next editor only after 10 s (counted as errors, kept out of the figures). */
  timeouts: number;
  server_cpu_cores: number | null;
  /** CPU of this process, which holds every editor (all replicas apply every keystroke: N-1 applies each). */
  client_cpu_cores: number;
}

const WAIT_MS = 10_000;

/** Runs one phase: `n` editors typing on one document for warm-up + duration. */
export async function runPhase(side: Side, phase: Phase, o: RunOptions, docName: string): Promise<PhaseFigures> {
  const editors = await side.editors(phase.editors, docName);
  const sent = new Map<string, number>();
  const waiting = new Map<string, () => void>();
  const next: number[] = [];
  const all: number[] = [];
  const acks: number[] = [];
  let measuring = false;
  editors.forEach((e, i) => {
    e.onAck = (key) => {
      const t = sent.get(key);
      if (t !== undefined && measuring) acks.push(performance.now() - t);
    };
    e.onRemote = (key) => {
      const t = sent.get(key);
      if (t === undefined) return;
      if (measuring) all.push(performance.now() - t);
      const w = waiting.get(`${i}|${key}`);
      if (w !== undefined) {
        waiting.delete(`${i}|${key}`);
        w();
      }
    };
  });
  const cpu = new CpuMeter(() => side.serverPids);
  const start = performance.now();
  const measureFrom = start + o.warmupS * 1000;
  const end = measureFrom + o.durationS * 1000;
  let keystrokes = 0;
  let timeouts = 0;
  let client0 = process.cpuUsage();
  const opened = setTimeout(() => {
    measuring = true;
    cpu.start();
    client0 = process.cpuUsage();
  }, o.warmupS * 1000);
  const loop = async (w: number): Promise<void> => {
    const editor = editors[w]!;
    const observer = (w + 1) % editors.length;
    // Spread the editors' first keystrokes over one think time, as people do not type in step.
    await sleep(Math.random() * phase.thinkMs);
    while (performance.now() < end && !interrupted.aborted) {
      const t0 = performance.now();
      const counted = measuring;
      // type() is synchronous and receipts come on later turns of the event loop, so registering after it is safe.
      const key = editor.type();
      sent.set(key, t0);
      const slot = `${observer}|${key}`;
      const ok = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => {
          waiting.delete(slot);
          resolve(false);
        }, WAIT_MS);
        waiting.set(slot, () => {
          clearTimeout(timer);
          resolve(true);
        });
      });
      if (counted && measuring) {
        if (ok) {
          next.push(performance.now() - t0);
          keystrokes++;
        } else timeouts++;
      }
      const rest = phase.thinkMs - (performance.now() - t0);
      if (rest > 0) await sleep(rest);
    }
  };
  await Promise.all(editors.map((_, w) => loop(w)));
  clearTimeout(opened);
  cpu.stop();
  const clientCpu = process.cpuUsage(client0);
  const seconds = Math.max(1e-3, (performance.now() - Math.max(measureFrom, start)) / 1000);
  // Let late receipts land before closing (they are already counted or not by then).
  for (const e of editors) e.close();
  const n = summarize(next);
  const a = summarize(all);
  const k = acks.length > 0 ? summarize(acks) : null;
  return {
    editors: phase.editors,
    think_ms: phase.thinkMs,
    keystrokes,
    keystrokes_per_s: round(keystrokes / seconds, 1),
    next_p50_ms: n.p50_ms,
    next_p99_ms: n.p99_ms,
    next_max_ms: n.max_ms,
    all_p50_ms: a.p50_ms,
    all_p99_ms: a.p99_ms,
    ack_p50_ms: k?.p50_ms ?? null,
    ack_p99_ms: k?.p99_ms ?? null,
    timeouts,
    server_cpu_cores: cpu.used === null ? null : round(cpu.used / seconds, 2),
    client_cpu_cores: round((clientCpu.user + clientCpu.system) / 1e6 / seconds, 2),
  };
}

/**
 * The phases of a run: --size (think ms) pacing at 5 and at 50 editors, then 50 editors flat out, then 200 editors
 * on one document at a tenth of the pace (reported, no goal): 200 keystrokes a second, each applied by 199 replicas,
 * all held by this process (at 10 keys/s each the 400,000 replica applies a second would measure this process).
 */
function phases(o: RunOptions): Phase[] {
  const think = o.size;
  return [
    { editors: 5, thinkMs: think },
    { editors: 50, thinkMs: think },
    { editors: 50, thinkMs: 0 },
    { editors: 200, thinkMs: think * 10 },
  ];
}

async function runSide(side: Side, o: RunOptions, label: string): Promise<SideResult> {
  const figures: PhaseFigures[] = [];
  try {
    // Each WebsocketProvider (and each of our editors' sockets) adds listeners: 200 editors are expected, not a leak.
    process.setMaxListeners(500);
    let k = 0;
    for (const phase of phases(o)) {
      const f = await runPhase(side, phase, o, `bench-${label}-${k++}-${Date.now()}`);
      process.stderr.write(
        `bench: ${label}: ${f.editors} editors, think ${f.think_ms} ms: ${f.keystrokes_per_s} keystrokes/s, ` +
          `next editor p50 ${f.next_p50_ms} ms p99 ${f.next_p99_ms} ms, every editor p50 ${f.all_p50_ms} p99 ${f.all_p99_ms} ms, ` +
          (f.ack_p50_ms === null ? '' : `own ack p50 ${f.ack_p50_ms} p99 ${f.ack_p99_ms} ms, `) +
          `${f.timeouts} timeouts, server CPU ${f.server_cpu_cores} cores, client CPU ${f.client_cpu_cores} cores\n`,
      );
      figures.push(f);
    }
  } finally {
    await side.stop();
    if (side.profileDir !== undefined) {
      const summary = summarizeProfiles(side.profileDir, side.serverPids);
      if (summary !== null)
        process.stderr.write(`bench: CPU profiles of our processes in ${side.profileDir}\n${summary}\n`);
    }
  }
  // The side's headline: 50 paced editors for latency, the flat-out phase for ops/s.
  const paced50 = figures[1]!;
  const flat = figures[2]!;
  return {
    system: side.system,
    members: side.members,
    ops_per_sec: flat.keystrokes_per_s,
    ops: flat.keystrokes,
    errors: figures.reduce((s, f) => s + f.timeouts, 0),
    error_kinds: figures.some((f) => f.timeouts > 0)
      ? { 'keystroke not seen within 10 s': figures.reduce((s, f) => s + f.timeouts, 0) }
      : {},
    duration_s: o.durationS,
    warmup_s: o.warmupS,
    concurrency: 50,
    interrupted: interrupted.aborted,
    mean_ms: paced50.next_p50_ms,
    p50_ms: paced50.next_p50_ms,
    p90_ms: paced50.next_p99_ms,
    p99_ms: paced50.next_p99_ms,
    p999_ms: paced50.next_max_ms,
    max_ms: paced50.next_max_ms,
    server_cpu_s: null,
    server_cpu_cores: flat.server_cpu_cores,
    server_cpu_us_per_op:
      flat.server_cpu_cores === null || flat.keystrokes_per_s === 0
        ? null
        : round((flat.server_cpu_cores * 1e6) / flat.keystrokes_per_s, 0),
    client_cpu_cores: flat.client_cpu_cores,
    phases: figures,
  };
}

// ---- ours ----

interface Api {
  base: string;
  token: string;
}

async function api(
  a: Api,
  method: string,
  path: string,
  body: unknown,
  token = a.token,
): Promise<Record<string, unknown>> {
  const res = await fetch(`${a.base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new BenchError(`${method} ${path}: HTTP ${res.status} ${text.slice(0, 200)}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/** A client speaking the wire contract: join, snapshot, op / ack, with a Doc. */
function ourEditor(url: string, docId: string, userId: string, token: string, index: number): Promise<Editor> {
  return new Promise((resolve, reject) => {
    // The service accepts client ids `${user}~${session}` only (an op names who wrote it).
    const doc = new Doc(`${userId}~${index}`);
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/ws/docs/${encodeURIComponent(docId)}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    let revision = 0;
    let joined = false;
    const editor: Editor = {
      onRemote: () => undefined,
      type() {
        const at = Math.floor(Math.random() * (doc.length + 1));
        const op: Op[] = doc.localInsert(at, 'x');
        const first = op[0]!;
        const opId = `${first.id[0]}:${first.id[1]}`;
        ws.send(JSON.stringify({ type: 'op', op_id: opId, op, parent_revision: revision }));
        return opId;
      },
      close() {
        ws.close();
      },
    };
    const timer = setTimeout(() => reject(new BenchError(`editor ${index} got no snapshot within 30 s`)), 30_000);
    ws.on('open', () => ws.send(JSON.stringify({ type: 'join', user_id: userId })));
    ws.on('error', (e) => {
      if (!joined) reject(e);
    });
    ws.on('message', (data) => {
      const m = JSON.parse(String(data)) as Record<string, unknown>;
      if (m['type'] === 'snapshot') {
        doc.apply(Doc.decode(Buffer.from(String(m['content']), 'base64'), 'reader').opsSince(doc.stateVector()));
        revision = Number(m['revision']);
        if (!joined) {
          joined = true;
          clearTimeout(timer);
          resolve(editor);
        }
      } else if (m['type'] === 'op') {
        doc.apply(m['op'] as Op[]);
        revision = Math.max(revision, Number(m['revision']));
        editor.onRemote(String(m['op_id']));
      } else if (m['type'] === 'ack') {
        revision = Math.max(revision, Number(m['revision']));
        editor.onAck?.(String(m['op_id']));
      }
    });
  });
}

async function ourSide(o: RunOptions, label: string): Promise<Side> {
  const env: NodeJS.ProcessEnv = {};
  // --profile: every member and worker profiles itself (profile-preload) and writes its profile as it exits.
  const profileDir = o.profileDir === null ? undefined : join(o.profileDir, label);
  if (profileDir !== undefined) {
    env.NODE_OPTIONS =
      `${process.env.NODE_OPTIONS ?? ''} --import=${new URL('../profile-preload.js', import.meta.url).href}`.trim();
    env.BENCH_PROFILE_DIR = profileDir;
  }
  // 200 editors on one document: the service seats 100 editors by default (the rest join read-only).
  const cluster = await startOurCluster({ service: 'collab', nodes: 5, env, settings: { max_editors: '250' } });
  const workers = cluster.workers.filter((w) => w.role !== 'member');
  if (workers.length === 0) throw new BenchError('the collab cluster lists no worker');
  const a: Api = { base: workers[0]!.url, token: cluster.token };
  // The service comes up in steps (members elect, workers register): wait until a user can be made.
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      await api(a, 'POST', '/api/collab/users', { user_id: 'bench-owner' });
      break;
    } catch (e) {
      if (Date.now() > deadline)
        throw new BenchError(`the collab service did not answer within 60 s: ${(e as Error).message}`);
      await sleep(500);
    }
  }
  const tokens = new Map<string, string>();
  const userToken = async (u: string): Promise<string> => {
    let t = tokens.get(u);
    if (t === undefined) {
      t = String((await api(a, 'POST', '/api/collab/users', { user_id: u }))['user_token']);
      tokens.set(u, t);
    }
    return t;
  };
  return {
    system: `raftkit collab: ${cluster.members.length} op-log members, ${workers.length} workers (wire contract over WebSocket, Doc per client)`,
    serverPids: [...cluster.members, ...cluster.workers].map((p) => p.pid),
    members: cluster.members.length,
    ...(profileDir === undefined ? {} : { profileDir }),
    async editors(n, docName) {
      await userToken('bench-owner');
      const created = await api(a, 'POST', '/api/docs', { title: docName, owner_id: 'bench-owner' });
      const docId = String(created['doc_id']);
      const out: Editor[] = [];
      for (let i = 0; i < n; i++) {
        const user = `bench-u${i}`;
        const token = await userToken(user);
        await api(a, 'PUT', `/api/docs/${encodeURIComponent(docId)}/permissions/${user}`, { role: 'editor' });
        // Editors spread over the workers, as users behind a load balancer would be.
        out.push(await ourEditor(workers[i % workers.length]!.url, docId, user, token, i));
      }
      return out;
    },
    stop: () => cluster.stop(),
  };
}

// ---- y-websocket ----

function yEditor(url: string, room: string): Promise<Editor> {
  return new Promise((resolve, reject) => {
    const ydoc = new Y.Doc();
    const text = ydoc.getText('t');
    const provider = new WebsocketProvider(url, room, ydoc, { WebSocketPolyfill: WebSocket as never, disableBc: true });
    const editor: Editor = {
      onRemote: () => undefined,
      type() {
        const clock = Y.getState(ydoc.store, ydoc.clientID);
        text.insert(Math.floor(Math.random() * (text.length + 1)), 'x');
        return `${ydoc.clientID}:${clock}`;
      },
      close() {
        provider.destroy();
        ydoc.destroy();
      },
    };
    // A remote transaction names what it brought by the clocks it advanced: one clock per character typed.
    text.observe((_event, tr) => {
      if (tr.local) return;
      for (const [client, after] of tr.afterState) {
        for (let clock = tr.beforeState.get(client) ?? 0; clock < after; clock++) editor.onRemote(`${client}:${clock}`);
      }
    });
    const timer = setTimeout(() => reject(new BenchError('a y-websocket client did not sync within 30 s')), 30_000);
    provider.on('sync', (synced: boolean) => {
      if (!synced) return;
      clearTimeout(timer);
      resolve(editor);
    });
  });
}

export async function ywebsocketSide(): Promise<Side> {
  const server = await startYWebsocket();
  return {
    system:
      'y-websocket: @y/websocket-server 0.1.1 (one process, documents in memory) with y-websocket WebsocketProvider clients',
    serverPids: [server.pid],
    members: 1,
    async editors(n, docName) {
      const out: Editor[] = [];
      for (let i = 0; i < n; i++) out.push(await yEditor(server.url, docName));
      return out;
    },
    stop: () => server.stop(),
  };
}

/** Every round's phases (with --rounds); one round's alone otherwise. */
function roundsOf(r: SideResult): PhaseFigures[][] {
  const all = r.rounds_phases as PhaseFigures[][] | undefined;
  return all ?? [(r.phases as PhaseFigures[] | undefined) ?? []];
}

const figuresOf = (f: PhaseFigures | undefined): string =>
  f === undefined
    ? 'no figures'
    : `p99 ${f.next_p99_ms} ms, p50 ${f.next_p50_ms} ms, own ack p99 ${f.ack_p99_ms ?? '-'} ms, ${f.keystrokes_per_s} keys/s${f.timeouts > 0 ? `, ${f.timeouts} timeouts` : ''}`;

/** Issue 44's goals: p99 under 100 ms at 50 paced editors in every round; 200 editors on one document reported. */
export function collabGoals(ours: SideResult, peer: SideResult | null): Goal[] {
  const rounds = roundsOf(ours);
  const peerRounds = peer === null ? [] : roundsOf(peer);
  const at = (rs: PhaseFigures[][], editors: number) =>
    rs.map((phases) => phases.find((f) => f.editors === editors && f.think_ms > 0));
  const o50 = at(rounds, 50);
  const y50 = at(peerRounds, 50);
  const o200 = at(rounds, 200);
  const y200 = at(peerRounds, 200);
  const each = (os: Array<PhaseFigures | undefined>, ys: Array<PhaseFigures | undefined>) =>
    os
      .map(
        (f, i) =>
          `round ${i + 1}: ${figuresOf(f)}${ys[i] === undefined ? '' : ` (y-websocket p99 ${ys[i]!.next_p99_ms} ms, p50 ${ys[i]!.next_p50_ms} ms)`}`,
      )
      .join('; ');
  return [
    {
      goal: 'remote-edit p99 under 100 ms at 50 editors in every round',
      met: o50.length > 0 && o50.every((f) => f !== undefined && f.timeouts === 0 && f.next_p99_ms < 100),
      detail: each(o50, y50),
    },
    {
      goal: 'remote-edit at 200 editors on one document reported',
      met: o200.length > 0 && o200.every((f) => f !== undefined && f.keystrokes > 0),
      detail: each(o200, y200),
    },
  ];
}

/** Our rounds so far (each round's profiles go in a directory of their own). */
let ourRuns = 0;

export const collabBenchmark: Benchmark = {
  name: 'collab',
  description:
    'Remote-edit latency keystroke -> another editor, 5, 50 and 200 editors on one document typing every --size ms (think time), and keystrokes/s with 50 editors flat out; ours vs a y-websocket server.',
  title: (o) => `collab: 50 editors on one document, think ${o.size} ms (p50/p99: keystroke -> next editor)`,
  peers: ['y-websocket'],
  defaults: { durationS: 10, concurrency: 50, size: 100, warmupS: 2 },
  workload: (o) => ({
    phases: phases(o).map((p) => ({ editors: p.editors, think_ms: p.thinkMs })),
    keystroke: 'one character at a random place, then wait until the next editor has it, then the think time',
    measured_s: o.durationS,
    warmup_s: o.warmupS,
  }),
  goals: collabGoals,
  // The goal is judged in every round, not only the median one: keep each round's phases.
  mergeRounds: (median, rounds) => ({ ...median, rounds_phases: rounds.map((r) => r.phases as PhaseFigures[]) }),
  runOurs: async (o) => {
    ourRuns++;
    return runSide(await ourSide(o, `ours-${ourRuns}`), o, 'ours');
  },
  runPeer: async (peer, o) => {
    if (peer !== 'y-websocket') throw new BenchError(`collab has no peer ${peer}`);
    return runSide(await ywebsocketSide(), o, 'y-websocket');
  },
};
