import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnSync } from 'node:child_process';
import fc from 'fast-check';
import t from 'tap';
import {
  checkLinearizability,
  parseAnyHistory,
  parseHistoryJsonl,
  serializeEvent,
  type HistoryEvent,
} from '../src/index.js';

const here = dirname(fileURLToPath(import.meta.url));
const data = resolve(here, '../../../../shared/data/porcupine-histories');
const cli = resolve(here, '../../bin/jepsen-like.js');

t.test('jepsen-like check agrees with the 102 known verdicts of the Jepsen etcd histories', async (t) => {
  const expected = readFileSync(join(data, 'jepsen', 'EXPECTED.txt'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => l.trim().split(/\s+/) as [string, string]);
  t.equal(expected.length, 102);
  let total = 0;
  for (const [file, verdict] of expected) {
    const { format, events } = parseAnyHistory(readFileSync(join(data, 'jepsen', file), 'utf8'));
    const r = checkLinearizability('cas-register', events, {
      timeoutMs: 60_000,
      casFailIsObservation: format === 'jepsen-log',
    });
    total += r.ms;
    t.equal(r.valid, verdict === 'linearizable', file);
  }
  t.comment(`102 etcd histories checked in ${total.toFixed(0)} ms`);
});

t.test('and with the Porcupine kv histories (-ok linearizable, -bad not)', async (t) => {
  for (const file of ['c01-ok.txt', 'c01-bad.txt', 'c10-ok.txt', 'c10-bad.txt', 'c50-ok.txt', 'c50-bad.txt']) {
    const { events } = parseAnyHistory(readFileSync(join(data, 'kv', file), 'utf8'));
    const r = checkLinearizability('kv', events, { timeoutMs: 60_000 });
    t.equal(r.valid, file.endsWith('-ok.txt'), `${file} (${r.ms.toFixed(0)} ms)`);
    if (r.valid === false)
      t.ok(r.window !== undefined && r.window.ops.some((o) => o.role === 'window'), `${file}: a failing window`);
  }
});

t.test('the CLI: exit codes, timing, formats', async (t) => {
  const run = (...args: string[]) => spawnSync(process.execPath, [cli, 'check', ...args], { encoding: 'utf8' });
  const ok = run('--model', 'cas-register', join(data, 'jepsen', 'etcd_002.log'));
  t.equal(ok.status, 0, ok.stderr);
  t.match(ok.stdout, /timing: parse [\d.]+ ms, check [\d.]+ ms/);
  const bad = run('--model', 'kv', join(data, 'kv', 'c10-bad.txt'));
  t.equal(bad.status, 1);
  t.match(bad.stdout, /cannot linearize/);
  const unknown = run('--model', 'kv', '--timeout', '0.001', join(data, 'kv', 'c50-ok.txt'));
  t.equal(unknown.status, 2, 'budget spent: unknown, exit 2');
  t.match(unknown.stdout, /linearizable: unknown/);
});

// ---- The whole path (our writer's JSON lines -> reader -> adapter -> checker) against a brute force ----------

interface Spec {
  process: number;
  call: number;
  duration: number;
  f: 'read' | 'write' | 'cas';
  a: number;
  b: number;
  outcome: 'ok' | 'info' | 'fail';
  seen: number;
}

/** Literal definition: some order respecting real time, every ok in it, every info in it or not, legal for a register. */
function bruteForce(
  ops: {
    call: number;
    ret: number;
    f: string;
    a: number;
    b: number;
    seen: number | null;
    pending: boolean;
    casFailed: boolean;
  }[],
): boolean {
  const used = ops.map(() => false);
  const search = (state: number | null, left: number): boolean => {
    if (left === 0) return true;
    for (let i = 0; i < ops.length; i++) {
      if (used[i]) continue;
      if (ops.some((o, j) => j !== i && !used[j] && !o.pending && o.ret < ops[i]!.call)) continue;
      const o = ops[i]!;
      let next = state;
      if (o.f === 'read') {
        if (!o.pending && o.seen !== state) continue;
      } else if (o.f === 'write') next = o.a;
      else if (o.casFailed) {
        if (state === o.a) continue;
      } else if (state === o.a) next = o.b;
      else if (!o.pending) continue;
      used[i] = true;
      if (search(next, left - (o.pending ? 0 : 1))) return true;
      used[i] = false;
    }
    return false;
  };
  return search(null, ops.filter((o) => !o.pending).length);
}

t.test('our JSON-lines histories through the checker agree with a brute force (fast-check)', async (t) => {
  const spec = fc.record({
    process: fc.integer({ min: 0, max: 3 }),
    call: fc.integer({ min: 0, max: 20 }),
    duration: fc.integer({ min: 0, max: 6 }),
    f: fc.constantFrom('read', 'write', 'cas'),
    a: fc.integer({ min: 0, max: 2 }),
    b: fc.integer({ min: 0, max: 2 }),
    outcome: fc.constantFrom('ok', 'ok', 'ok', 'info', 'fail'),
    seen: fc.integer({ min: -1, max: 2 }),
  }) as fc.Arbitrary<Spec>;
  let invalid = 0;
  fc.assert(
    fc.property(fc.array(spec, { maxLength: 7 }), (specs) => {
      // One operation at a time per process: shift each process's operations after its previous one.
      // A process whose operation ends in info is retired (Jepsen): its thread continues as a new process.
      const free = new Map<number, number>();
      const current = new Map<number, number>();
      const events: HistoryEvent[] = [];
      const ops: Parameters<typeof bruteForce>[0] = [];
      for (const spec of specs) {
        const thread = spec.process;
        const s = { ...spec, process: current.get(thread) ?? thread };
        const call = Math.max(s.call, (free.get(thread) ?? -1) + 1);
        const ret = call + s.duration;
        free.set(thread, ret);
        if (s.outcome === 'info') current.set(thread, s.process + 4);
        const value = s.f === 'cas' ? [s.a, s.b] : s.f === 'write' ? s.a : undefined;
        const seen = s.seen < 0 ? null : s.seen;
        events.push({
          process: s.process,
          type: 'invoke',
          f: s.f,
          key: 'k',
          ...(value !== undefined ? { value } : {}),
          time: call * 10,
        });
        const casMismatch = s.f === 'cas' && s.outcome === 'fail';
        events.push({
          process: s.process,
          type: s.outcome,
          f: s.f,
          key: 'k',
          ...(s.f === 'read' && s.outcome === 'ok' ? { value: seen } : value !== undefined ? { value } : {}),
          ...(casMismatch ? { error: 'cas_mismatch' } : {}),
          time: s.outcome === 'info' ? 1e12 + call : ret * 10 + 5,
        });
        if (s.outcome === 'fail' && s.f !== 'cas') continue;
        ops.push({
          call: call * 10,
          ret: s.outcome === 'info' ? Infinity : ret * 10 + 5,
          f: s.f,
          a: s.a,
          b: s.b,
          seen,
          pending: s.outcome === 'info',
          casFailed: casMismatch,
        });
      }
      events.sort((x, y) => x.time - y.time);
      const text = events.map(serializeEvent).join('\n') + '\n';
      const parsed = parseHistoryJsonl(text);
      const r = checkLinearizability('cas-register', parsed as never, { timeoutMs: 10_000 });
      const expected = bruteForce(ops);
      if (!expected) invalid++;
      if (r.valid !== expected) throw new Error(`checker ${String(r.valid)}, brute force ${expected}\n${text}`);
    }),
    { numRuns: 3000 },
  );
  t.ok(invalid > 300, `a good share are not linearizable (${invalid} of 3000)`);
});
