/**
 * collab: the collaborative editor (packages/services/collab) under faults. The harness runs the op-log members (and
 * partitions, kills and pauses them); this workload starts the service's three worker processes itself (the
 * cluster's own worker.js, given a cluster.json naming the members) and kills, restarts, pauses and resumes
 * them on a schedule of its own, one worker at a time, while clients type.
 *
 * Each client is a CollabClient (as programs use it) on one document, connected to worker `i mod 3` and failing
 * over to the others. A client types tokens `[c<i>.<n>]` at token boundaries (never inside another token, so a
 * token stays one run: Fugue keeps concurrent runs apart), a tenth of them offline (it goes offline, types, comes
 * back 0.2-1 s later), deletes one of its own tokens now and then, and bolds or unbolds one of its own tokens. An operation is `ok` once the client is synced (every change it made is
 * acknowledged by the owner, so committed in the Raft log) and its own replica shows the effect; otherwise it is
 * `info` (unknown: the change stays queued and may commit later).
 *
 * After the heal every client goes online and syncs, then reads its text and formatting (f "read"); a fresh
 * client joining afterwards reads too (what the service holds). Checks (no linearizability model: nothing here is
 * a register):
 *  - converged: every final read has the same text and the same formatting;
 *  - acked-present: every acknowledged token that no delete ever aimed at is in every final text, once;
 *  - acked-deletes: no token whose delete was acknowledged is in any final text;
 *  - no-duplicates / no-garbage: the final text is a sequence of whole tokens, each typed by some client, none twice.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { freePort } from '@raftkit/testkit';
import { CollabClient } from '@raftkit/collab';
import type { HistoryEvent } from '../history.js';
import { memberScript } from '../cluster.js';
import { Rng } from '../rng.js';
import { readRunStates } from '../state.js';
import type { Anomaly, CheckResult, Completion, FinalContext, Worker, WorkerContext, Workload } from './workload.js';

interface CollabOptions {
  /** Worker processes of the service (each active document is owned by one of them). */
  workers: number;
  /** Worker faults (kill or pause one worker for 1-3 s) start this often on average, in ms; 0 for none. */
  workerFaultEveryMs: number;
  /** Shares of the clients' operations besides typing. */
  deleteShare: number;
  formatShare: number;
  /** Share of typing done offline: the client goes offline, types, waits 0.2-1 s, comes back and syncs. */
  offlineShare: number;
}

const DEFAULT_COLLAB_OPTIONS: CollabOptions = {
  workers: 3,
  workerFaultEveryMs: 4_000,
  deleteShare: 0.15,
  formatShare: 0.15,
  offlineShare: 0.1,
};

const TOKEN = /\[c\d+\.\d+\]/g;

interface WorkerProcess {
  id: string;
  http: string;
  child: ChildProcess | null;
  paused: boolean;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Indexes where a token may go: the start, and right after each token's closing bracket. */
function boundaries(text: string): number[] {
  const out = [0];
  for (let i = 0; i < text.length; i++) if (text[i] === ']') out.push(i + 1);
  return out;
}

export class CollabWorkload implements Workload {
  readonly name = 'collab';
  readonly service = 'collab';
  readonly model = 'register' as const;
  private dir: string | null = null;
  private procs: WorkerProcess[] = [];
  private docId = '';
  private readonly tokens = new Map<string, string>();
  private readonly clients: Array<CollabClient | null> = [];
  private chaos: Promise<void> | null = null;
  private stopChaos = false;
  private say: (line: string) => void = (line) => process.stdout.write(`[collab] ${line}\n`);

  constructor(private readonly options: CollabOptions = DEFAULT_COLLAB_OPTIONS) {}

  describe(): string {
    return `clients typing tokens into one document through CollabClient (deletes ${this.options.deleteShare * 100}%, formats ${this.options.formatShare * 100}%, ${this.options.offlineShare * 100}% of typing offline), ${this.options.workers} workers killed or paused every ~${this.options.workerFaultEveryMs / 1000}s`;
  }

  // ---- the service's workers

  private startWorker(p: WorkerProcess): void {
    if (p.child !== null) return;
    const script = join(dirname(memberScript()), 'worker.js');
    const out = openSync(join(this.dir!, p.id, 'worker.log'), 'a');
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.CLUSTER_AUTH_TOKEN;
    // Marked with this run's id, as the members are, so `jepsen-like clean` finds them if the harness dies.
    const runId = readRunStates().find((r) => r.state.harnessPid === process.pid)?.state.runId;
    if (runId !== undefined) env.JEPSEN_LIKE_RUN = runId;
    const child = spawn(process.execPath, [script, '--cluster', this.dir!, '--id', p.id], {
      stdio: ['ignore', out, out],
      env,
    });
    closeSync(out);
    p.child = child;
    p.paused = false;
    child.once('exit', () => {
      if (p.child === child) {
        p.child = null;
        p.paused = false;
      }
    });
  }

  private async healthy(p: WorkerProcess, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      try {
        const res = await fetch(`${p.http}/healthz`, { signal: AbortSignal.timeout(1_000) });
        if (res.status === 200) return true;
      } catch {
        // not yet
      }
      await sleep(100);
    }
    return false;
  }

  private async killWorker(p: WorkerProcess): Promise<void> {
    const child = p.child;
    if (child === null) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    try {
      child.kill('SIGKILL');
    } catch {
      return;
    }
    await exited;
  }

  private signal(p: WorkerProcess, sig: NodeJS.Signals): void {
    try {
      p.child?.kill(sig);
    } catch {
      // gone
    }
  }

  /** One worker at a time: killed (restarted 1-3 s later) or paused (resumed 1-3 s later). */
  private async runChaos(ctx: FinalContext): Promise<void> {
    // The run's --seed draws these faults too (the workload is not handed the seed: read from the command line).
    const i = process.argv.indexOf('--seed');
    const seed = i >= 0 && Number.isSafeInteger(Number(process.argv[i + 1])) ? Number(process.argv[i + 1]) : 1;
    const rng = Rng.derive(seed, 'collab-worker-faults');
    while (!this.stopChaos) {
      await sleep(rng.between(this.options.workerFaultEveryMs / 2, (this.options.workerFaultEveryMs * 3) / 2));
      if (this.stopChaos) break;
      const p = this.procs[rng.int(0, this.procs.length - 1)]!;
      const kill = rng.chance(0.5);
      const downMs = rng.between(1_000, 3_000);
      await ctx.perform(
        { f: kill ? 'worker-kill' : 'worker-pause', key: p.id, value: { down_ms: Math.round(downMs) } },
        async () => {
          if (kill) await this.killWorker(p);
          else {
            this.signal(p, 'SIGSTOP');
            p.paused = true;
          }
          return { type: 'ok' };
        },
      );
      this.say(`${kill ? 'killed' : 'paused'} ${p.id} for ${(downMs / 1000).toFixed(1)}s`);
      await sleep(downMs);
      await this.heal(p);
    }
  }

  private async heal(p: WorkerProcess): Promise<void> {
    if (p.paused) {
      this.signal(p, 'SIGCONT');
      p.paused = false;
    }
    if (p.child === null) {
      this.startWorker(p);
      await this.healthy(p, 20_000);
    }
  }

  // ---- setup

  private async api(
    method: string,
    path: string,
    body: unknown,
    token: string,
    base = this.procs[0]!.http,
  ): Promise<Record<string, unknown>> {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(5_000),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 200)}`);
    return JSON.parse(text) as Record<string, unknown>;
  }

  async setup(ctx: FinalContext): Promise<void> {
    this.dir = mkdtempSync(join(tmpdir(), 'jepsen-collab-workers-'));
    const members = ctx.nodes.map((id) => ({ id, pid: null, raftAddress: '', httpAddress: new URL(ctx.url(id)).host }));
    const records = [];
    for (let i = 1; i <= this.options.workers; i++) {
      const id = `worker${i}`;
      const http = await freePort();
      const tcp = await freePort();
      records.push({
        id,
        role: 'worker',
        index: i,
        pid: null,
        httpAddress: `127.0.0.1:${http}`,
        tcpAddress: `127.0.0.1:${tcp}`,
      });
      mkdirSync(join(this.dir, id), { recursive: true });
      this.procs.push({ id, http: `http://127.0.0.1:${http}`, child: null, paused: false });
    }
    // The worker reads what `cluster up` would have written: the members' addresses, the workers', the token.
    const state = {
      service: 'collab',
      dataDir: this.dir,
      basePort: 0,
      tickMs: 0,
      bootstrap: {},
      members,
      workers: records,
      settings: {},
    };
    writeFileSync(join(this.dir, 'cluster.json'), JSON.stringify(state, null, 2));
    writeFileSync(join(this.dir, 'token'), ctx.token + '\n', { mode: 0o600 });
    for (const p of this.procs) this.startWorker(p);
    for (const p of this.procs)
      if (!(await this.healthy(p, 30_000)))
        throw new Error(`collab worker ${p.id} not healthy within 30 s (log in ${join(this.dir, p.id)})`);

    // Users and the document (the members are still electing the document's group now and then: retry).
    for (;;) {
      try {
        const owner = await this.userToken('c0', ctx.token);
        this.docId = String(
          (await this.api('POST', '/api/docs', { title: 'jepsen', owner_id: 'c0' }, owner))['doc_id'],
        );
        break;
      } catch (e) {
        if (Date.now() > ctx.deadline) throw new Error(`could not create the document: ${(e as Error).message}`);
        await ctx.sleep(500);
      }
    }
    this.say(`document ${this.docId}; workers ${this.procs.map((p) => `${p.id}=${p.http}`).join(' ')}`);
    if (this.options.workerFaultEveryMs > 0) this.chaos = this.runChaos(ctx);
  }

  private async userToken(user: string, clusterToken: string): Promise<string> {
    let t = this.tokens.get(user);
    if (t === undefined) {
      t = String((await this.api('POST', '/api/collab/users', { user_id: user }, clusterToken))['user_token']);
      this.tokens.set(user, t);
      if (user !== 'c0' && this.docId !== '')
        await this.api(
          'PUT',
          `/api/docs/${encodeURIComponent(this.docId)}/permissions/${user}`,
          { role: 'editor' },
          clusterToken,
        );
    }
    return t;
  }

  // ---- clients

  createWorker(ctx: WorkerContext): Worker {
    const user = `c${ctx.worker}`;
    const home = this.procs[ctx.worker % this.procs.length]!;
    const workers = [home.http, ...this.procs.filter((p) => p !== home).map((p) => p.http)];
    let client: CollabClient | null = null;
    let counter = 0;
    const mine: string[] = [];
    const connect = async (): Promise<CollabClient> => {
      if (client !== null) return client;
      const token = await this.userToken(user, ctx.token);
      client = await CollabClient.connect({
        url: home.http,
        docId: this.docId,
        userId: user,
        token,
        workers,
        connectTimeoutMs: 10_000,
      });
      this.clients[ctx.worker] = client;
      return client;
    };
    const settle = async (c: CollabClient, effect: () => boolean, what: string): Promise<Completion> => {
      try {
        await c.synced(ctx.opTimeoutMs);
      } catch (e) {
        return { type: 'info', error: `not synced: ${(e as Error).message.slice(0, 120)}` };
      }
      return effect() ? { type: 'ok' } : { type: 'info', error: `synced but ${what}` };
    };
    return {
      step: async () => {
        let c: CollabClient;
        try {
          c = await connect();
        } catch (e) {
          await ctx.perform({ f: 'connect', value: { client: user } }, async () => ({
            type: 'fail',
            error: (e as Error).message.slice(0, 160),
          }));
          await ctx.sleep(500);
          return;
        }
        const text = c.text();
        const visible = mine.filter((tok) => text.includes(tok));
        const roll = ctx.rng.float();
        if (visible.length > 0 && roll < this.options.deleteShare) {
          const tok = visible[ctx.rng.int(0, visible.length - 1)]!;
          await ctx.perform({ f: 'delete', key: tok, value: { client: user, token: tok } }, async () => {
            const at = c.text().indexOf(tok);
            if (at < 0) return { type: 'fail', error: 'not visible' };
            c.delete(at, tok.length);
            return settle(c, () => !c.text().includes(tok), 'the token is still there');
          });
        } else if (visible.length > 0 && roll < this.options.deleteShare + this.options.formatShare) {
          const tok = visible[ctx.rng.int(0, visible.length - 1)]!;
          const bold = ctx.rng.chance(0.5) ? true : null;
          await ctx.perform({ f: 'format', key: tok, value: { client: user, token: tok, bold } }, async () => {
            const at = c.text().indexOf(tok);
            if (at < 0) return { type: 'fail', error: 'not visible' };
            c.format(at, tok.length, { bold });
            return settle(c, () => true, '');
          });
        } else {
          const tok = `[${user}.${counter++}]`;
          const spots = boundaries(text);
          const at = spots[ctx.rng.int(0, spots.length - 1)]!;
          mine.push(tok);
          const offline = ctx.rng.chance(this.options.offlineShare);
          const awayMs = ctx.rng.between(200, 1_000);
          await ctx.perform(
            { f: 'type', key: tok, value: { client: user, token: tok, at, ...(offline ? { offline: true } : {}) } },
            async () => {
              // Offline: the change is made locally, kept while away, and sent on reconnect (join with since_revision).
              if (offline) c.offline();
              c.insert(at, tok);
              if (offline) {
                await ctx.sleep(awayMs);
                c.online();
              }
              return settle(c, () => c.text().includes(tok), 'the token is missing');
            },
          );
        }
      },
      finish: async () => undefined,
      abort: () => {
        client?.close();
      },
    };
  }

  // ---- after the heal

  async finalReads(ctx: FinalContext): Promise<void> {
    this.stopChaos = true;
    await this.chaos;
    for (const p of this.procs) await this.heal(p);
    // Reads wait for every client to flush what it queued (a client coming back online at the end sends its offline
    // changes now), then for each client to have received every revision any client has seen: a client that is
    // synced only knows its own changes are in; others' last changes may still be on their way to it.
    const live = this.clients.flatMap((c, i) => (c === null || c === undefined ? [] : [{ label: `c${i}`, c }]));
    for (const { c } of live) c.online();
    await Promise.all(live.map(({ c }) => c.synced(Math.max(5_000, ctx.deadline - Date.now())).catch(() => undefined)));
    const latest = Math.max(0, ...live.map(({ c }) => c.revision));
    const read = async (label: string, c: CollabClient, atLeast: number): Promise<void> => {
      await ctx.perform({ f: 'read', key: label, value: { client: label } }, async () => {
        c.online();
        try {
          await c.synced(Math.max(5_000, ctx.deadline - Date.now()));
          while (c.revision < atLeast && Date.now() < ctx.deadline) await new Promise((r) => setTimeout(r, 50));
        } catch (e) {
          return { type: 'info', error: `not synced: ${(e as Error).message.slice(0, 160)}` };
        }
        if (c.revision < atLeast) return { type: 'info', error: `revision ${c.revision} never reached ${atLeast}` };
        return { type: 'ok', value: { client: label, text: c.text(), spans: c.spans() } };
      });
    };
    await Promise.all(live.map(({ label, c }) => read(label, c, latest)));
    // A client that never saw the faults: what the service holds now.
    const token = await this.userToken('c0', ctx.token);
    try {
      const fresh = await CollabClient.connect({
        url: this.procs[0]!.http,
        docId: this.docId,
        userId: 'c0',
        token,
        workers: this.procs.map((p) => p.http),
      });
      await read('fresh', fresh, latest);
      fresh.close();
    } catch (e) {
      await ctx.perform({ f: 'read', key: 'fresh', value: { client: 'fresh' } }, async () => ({
        type: 'info',
        error: (e as Error).message,
      }));
    }
  }

  async close(): Promise<void> {
    this.stopChaos = true;
    for (const c of this.clients) c?.close();
    await Promise.all(
      this.procs.map(async (p) => {
        if (p.paused) this.signal(p, 'SIGCONT');
        const child = p.child;
        if (child === null) return;
        const exited = new Promise<void>((r) => child.once('exit', () => r()));
        this.signal(p, 'SIGTERM');
        const timer = setTimeout(() => this.signal(p, 'SIGKILL'), 3_000);
        await exited;
        clearTimeout(timer);
      }),
    );
    if (this.dir !== null) rmSync(this.dir, { recursive: true, force: true });
  }

  /** Nothing here is a register: the checks are the workload's own. */
  modelEvents(): readonly HistoryEvent[] {
    return [];
  }

  check(events: readonly HistoryEvent[]): CheckResult[] {
    return checkCollabHistory(events);
  }
}

/** The checks of a collab history (exported for tests). */
export function checkCollabHistory(events: readonly HistoryEvent[]): CheckResult[] {
  const typed = new Set<string>();
  const ackedTypes = new Set<string>();
  const deleteAimed = new Set<string>();
  const ackedDeletes = new Set<string>();
  const reads: Array<{ client: string; text: string; spans: unknown }> = [];
  for (const e of events) {
    const v = (e.value ?? {}) as { token?: string; client?: string; text?: string; spans?: unknown };
    if (e.f === 'type' && e.type === 'invoke' && v.token) typed.add(v.token);
    if (e.f === 'type' && e.type === 'ok' && typeof e.key === 'string') ackedTypes.add(e.key);
    if (e.f === 'delete' && e.type === 'invoke' && v.token) deleteAimed.add(v.token);
    if (e.f === 'delete' && e.type === 'ok' && typeof e.key === 'string') ackedDeletes.add(e.key);
    if (e.f === 'read' && e.type === 'ok' && typeof v.text === 'string')
      reads.push({ client: v.client ?? '?', text: v.text, spans: v.spans });
  }
  const anomalies: Record<string, Anomaly[]> = {
    converged: [],
    'acked-present': [],
    'acked-deletes': [],
    'whole-tokens': [],
  };
  const add = (check: string, type: string, description: string): void => {
    if (anomalies[check]!.length < 20) anomalies[check]!.push({ check, type, description });
  };
  const readsExpected = new Set(events.filter((e) => e.f === 'read' && e.type === 'invoke').map((e) => String(e.key)));
  if (reads.length === 0) add('converged', 'no-final-read', 'no client read the document after the heal');
  if (reads.length < readsExpected.size)
    add(
      'converged',
      'missing-final-read',
      `${readsExpected.size - reads.length} of ${readsExpected.size} final reads did not complete`,
    );
  const first = reads[0];
  for (const r of reads.slice(1)) {
    if (r.text !== first!.text)
      add(
        'converged',
        'text-differs',
        `${r.client} ends with ${r.text.length} chars, ${first!.client} with ${first!.text.length}`,
      );
    else if (JSON.stringify(r.spans) !== JSON.stringify(first!.spans))
      add(
        'converged',
        'format-differs',
        `${r.client} and ${first!.client} have the same text but different formatting`,
      );
  }
  for (const r of reads) {
    const found = r.text.match(TOKEN) ?? [];
    if (found.join('') !== r.text)
      add('whole-tokens', 'garbage', `${r.client}: the text is not a sequence of whole tokens`);
    const seen = new Set<string>();
    for (const tok of found) {
      if (seen.has(tok)) add('whole-tokens', 'duplicate', `${r.client}: ${tok} appears twice`);
      seen.add(tok);
      if (!typed.has(tok)) add('whole-tokens', 'unknown', `${r.client}: ${tok} was never typed`);
    }
    for (const tok of ackedTypes)
      if (!deleteAimed.has(tok) && !seen.has(tok))
        add('acked-present', 'lost', `${r.client}: acknowledged ${tok} is missing`);
    for (const tok of ackedDeletes)
      if (seen.has(tok))
        add('acked-deletes', 'resurrected', `${r.client}: ${tok} was deleted (acknowledged) but is there`);
  }
  const stats = {
    typed: typed.size,
    acked_types: ackedTypes.size,
    deletes_aimed: deleteAimed.size,
    acked_deletes: ackedDeletes.size,
    final_reads: reads.length,
    final_chars: first?.text.length ?? 0,
  };
  return Object.entries(anomalies).map(([name, list]) => ({
    name,
    valid: list.length === 0,
    anomalies: list,
    ...(name === 'converged' ? { stats } : {}),
  }));
}
