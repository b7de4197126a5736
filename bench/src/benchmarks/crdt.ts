/**
 * `crdt`: the three editing traces of ../shared/data/editing-traces replayed, one after the other in this
 * process, into our sequence CRDT (@raftkit/crdt) and, with --vs, into Yjs (Y.Text) and Automerge (a text field,
 * `splice`). Every patch is a local edit; one trace transaction is one Yjs transaction and one Automerge change.
 * Per system: total replay time (and patches/s), time per transaction (p50/p99), the heap (plus external and wasm
 * memory) the finished documents hold after a full GC, the encoded document size (ours: encode(); Yjs:
 * encodeStateAsUpdate; Automerge: save), and that each final text equals the trace's endContent (a mismatch is
 * an error). Goals: faster than Yjs, smaller in memory than Yjs. The traces are read from beside the repository,
 * never copied into it.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { gunzipSync } from 'node:zlib';
import { Doc } from '@raftkit/crdt';
import * as A from '@automerge/automerge';
import * as Y from 'yjs';
import type { Benchmark, Goal, RunOptions, SideResult } from '../benchmark.js';
import { BenchError } from '../procs.js';
import { round, summarize } from '../stats.js';

/** bench/dist/src/benchmarks -> the repository root -> ../shared/data/editing-traces. */
const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');
const TRACES_DIR = resolve(repoRoot, '../shared/data/editing-traces');
const TRACE_NAMES = ['automerge-paper', 'seph-blog1', 'friendsforever_flat'];

interface Trace {
  endContent: string;
  txns: { patches: [number, number, string][] }[];
}

function loadTraces(): { name: string; trace: Trace; patches: number }[] {
  if (!existsSync(TRACES_DIR)) throw new BenchError(`editing traces not found at ${TRACES_DIR}`);
  const present = readdirSync(TRACES_DIR);
  return TRACE_NAMES.map((name) => {
    if (!present.includes(`${name}.json.gz`)) throw new BenchError(`trace ${name}.json.gz missing from ${TRACES_DIR}`);
    const trace = JSON.parse(gunzipSync(readFileSync(join(TRACES_DIR, `${name}.json.gz`))).toString('utf8')) as Trace;
    return { name, trace, patches: trace.txns.reduce((n, t) => n + t.patches.length, 0) };
  });
}

/** A full GC without --expose-gc on the command line (the harness is one process for every side). */
function gc(): void {
  setFlagsFromString('--expose-gc');
  const f = runInNewContext('gc') as () => void;
  f();
  f();
}

const heldBytes = (): number => {
  const m = process.memoryUsage();
  return m.heapUsed + m.external; // external includes arrayBuffers (and wasm memory)
};

/** One system: apply a transaction's patches, read the text, encode. */
interface Replica {
  txn(patches: [number, number, string][]): void;
  text(): string;
  encode(): Uint8Array;
}

const systems: Record<string, { label: string; make: () => Replica }> = {
  ours: {
    label: 'raftkit @raftkit/crdt (Doc, runs in a chunked list)',
    make: () => {
      const d = new Doc('author');
      return {
        txn: (patches) => {
          for (const [pos, del, ins] of patches) {
            if (del > 0) d.localDelete(pos, del);
            if (ins.length > 0) d.localInsert(pos, ins);
          }
        },
        text: () => d.text(),
        encode: () => d.encode(),
      };
    },
  },
  yjs: {
    label: 'Yjs (Y.Doc, Y.Text; one transaction per trace transaction)',
    make: () => {
      const d = new Y.Doc();
      const t = d.getText('text');
      return {
        txn: (patches) =>
          d.transact(() => {
            for (const [pos, del, ins] of patches) {
              if (del > 0) t.delete(pos, del);
              if (ins.length > 0) t.insert(pos, ins);
            }
          }),
        text: () => t.toString(),
        encode: () => Y.encodeStateAsUpdate(d),
      };
    },
  },
  automerge: {
    label: 'Automerge (a text field, splice; one change per trace transaction)',
    make: () => {
      let d = A.from<{ text: string }>({ text: '' });
      return {
        txn: (patches) => {
          d = A.change(d, (x) => {
            for (const [pos, del, ins] of patches) A.splice(x, ['text'], pos, del, ins);
          });
        },
        text: () => d.text,
        encode: () => A.save(d),
      };
    },
  },
};

interface TraceFigures {
  patches: number;
  replay_ms: number;
  memory_bytes: number;
  encoded_bytes: number;
  text_ok: boolean;
}

function runSystem(key: string): SideResult {
  const sys = systems[key];
  if (sys === undefined) throw new BenchError(`unknown system ${key}`);
  const traces = loadTraces();
  const perTrace: Record<string, TraceFigures> = {};
  // Allocated up front so the latency samples are not counted in a document's memory.
  const txnMs = new Float64Array(traces.reduce((n, x) => n + x.trace.txns.length, 0));
  let samples = 0;
  let totalMs = 0;
  let patches = 0;
  let memory = 0;
  let encoded = 0;
  let errors = 0;
  const errorKinds: Record<string, number> = {};
  const cpu0 = process.cpuUsage();
  for (const { name, trace, patches: n } of traces) {
    gc();
    const before = heldBytes();
    let r: Replica | null = sys.make();
    const t0 = performance.now();
    for (const { patches: p } of trace.txns) {
      const s = performance.now();
      r.txn(p);
      txnMs[samples++] = performance.now() - s;
    }
    const ms = performance.now() - t0;
    gc();
    const held = heldBytes() - before;
    const bytes = r.encode().length;
    const ok = r.text() === trace.endContent;
    r = null; // dropped before the next trace's baseline
    if (!ok) {
      errors++;
      errorKinds[`${name}: text differs from endContent`] = 1;
    }
    perTrace[name] = { patches: n, replay_ms: round(ms), memory_bytes: held, encoded_bytes: bytes, text_ok: ok };
    totalMs += ms;
    patches += n;
    memory += held;
    encoded += bytes;
    process.stderr.write(
      `bench: ${key} ${name}: ${n} patches in ${ms.toFixed(0)} ms, ${(held / 2 ** 20).toFixed(1)} MiB held, ${bytes} bytes encoded${ok ? '' : ', TEXT DIFFERS'}\n`,
    );
  }
  const cpu = process.cpuUsage(cpu0);
  const cpuS = (cpu.user + cpu.system) / 1e6;
  const { count: _count, ...latency } = summarize(txnMs.subarray(0, samples));
  return {
    system: sys.label,
    members: null,
    ...latency,
    ops_per_sec: Math.round(patches / (totalMs / 1000)),
    ops: patches,
    errors,
    error_kinds: errorKinds,
    duration_s: round(totalMs / 1000),
    warmup_s: 0,
    concurrency: 1,
    interrupted: false,
    server_cpu_s: round(cpuS),
    server_cpu_cores: round(cpuS / (totalMs / 1000)),
    server_cpu_us_per_op: round((cpuS * 1e6) / patches),
    client_cpu_cores: 0,
    total_replay_ms: round(totalMs),
    total_memory_bytes: memory,
    total_encoded_bytes: encoded,
    traces: perTrace,
  };
}

const PEERS = ['yjs,automerge', 'yjs', 'automerge'];

export const crdtBenchmark: Benchmark = {
  name: 'crdt',
  description:
    'The three editing traces (automerge-paper, seph-blog1, friendsforever_flat) replayed as local edits into our sequence CRDT, beside Yjs and Automerge: time, memory held, encoded size',
  title: (o) => `crdt: three editing traces replayed${o.vs !== null ? `, ours vs ${o.vs}` : ''}`,
  peers: PEERS,
  defaults: { durationS: 0, concurrency: 1, size: 0, warmupS: 0 },
  workload: () => ({
    traces: TRACE_NAMES,
    traces_dir: '../shared/data/editing-traces (beside the repository)',
    operation:
      'each patch [pos, deleted, inserted] as a local delete then insert; a trace transaction is one Yjs transaction / Automerge change',
    latency: 'per trace transaction (all three traces)',
    memory:
      'heapUsed + external (which includes array buffers and wasm memory) held by the finished document after a full GC, minus before it was made',
    encoded: 'ours: Doc.encode(); Yjs: Y.encodeStateAsUpdate; Automerge: save()',
  }),
  goals: (ours, peer) => {
    if (peer === null || peer.total_replay_ms === undefined) return [];
    const goals: Goal[] = [];
    const yjs = (peer.yjs as SideResult | undefined) ?? (peer.system.startsWith('Yjs') ? peer : null);
    if (yjs !== null) {
      goals.push({
        goal: 'replay faster than Yjs',
        met: (ours.total_replay_ms as number) < (yjs.total_replay_ms as number),
        detail: `ours ${ours.total_replay_ms} ms, Yjs ${yjs.total_replay_ms} ms`,
      });
      goals.push({
        goal: 'smaller in memory than Yjs',
        met: (ours.total_memory_bytes as number) < (yjs.total_memory_bytes as number),
        detail: `ours ${mib(ours.total_memory_bytes)}, Yjs ${mib(yjs.total_memory_bytes)}`,
      });
    }
    const am = (peer.automerge as SideResult | undefined) ?? (peer.system.startsWith('Automerge') ? peer : null);
    if (am !== null) {
      goals.push({
        goal: 'replay faster than Automerge',
        met: (ours.total_replay_ms as number) < (am.total_replay_ms as number),
        detail: `ours ${ours.total_replay_ms} ms, Automerge ${am.total_replay_ms} ms; memory ours ${mib(ours.total_memory_bytes)}, Automerge ${mib(am.total_memory_bytes)}; encoded ours ${ours.total_encoded_bytes} B, Automerge ${am.total_encoded_bytes} B`,
      });
    }
    return goals;
  },
  runOurs: async (_o: RunOptions) => runSystem('ours'),
  /** 'yjs,automerge': Yjs is the peer of record (the goals name it); Automerge's figures ride along under `automerge`. */
  runPeer: async (peer: string, _o: RunOptions) => {
    if (peer === 'yjs' || peer === 'automerge') return runSystem(peer);
    const yjs = runSystem('yjs');
    const automerge = runSystem('automerge');
    return { ...yjs, system: `${yjs.system}; Automerge under "automerge"`, yjs: { ...yjs }, automerge };
  },
};

function mib(bytes: unknown): string {
  return `${((bytes as number) / 2 ** 20).toFixed(1)} MiB`;
}
