/**
 * A short real run: a 5-member kv cluster (namespaces when root, else proxies), clients for 18 s, a partition
 * and a kill from the schedule of seed 4, heal, final reads, check. Bounded: about 30-40 s.
 */
import { mkdtempSync, readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { parseNemesisList, runTest } from '../src/index.js';

t.setTimeout(120_000);

t.test('kv under a partition and a kill: valid, and nothing left behind', async (t) => {
  const out = mkdtempSync(join(tmpdir(), 'jl-smoke-'));
  const lines: string[] = [];
  const started = Date.now();
  const result = await runTest(
    {
      service: 'kv',
      timeS: 18,
      concurrency: 4,
      nemeses: parseNemesisList('partition,kill'),
      seed: 4,
      out,
      mode: 'auto',
      packetVia: 'auto',
      intervalS: 3,
      recoveryS: 15,
      opTimeoutMs: 2_000,
      rate: 40,
      checkTimeoutS: 60,
      clockSkew: false,
      tickMs: 100,
      members: 5,
      keepData: false,
      say: (line) => lines.push(line),
    },
    new AbortController().signal,
  );
  t.comment(
    `${((Date.now() - started) / 1000).toFixed(1)} s, ${result.run.mode} mode; ${result.ops.total} ops (ok ${result.ops.ok}, fail ${result.ops.fail}, info ${result.ops.info})`,
  );
  t.equal(result.valid, true, 'every check passes');
  t.ok(result.ops.ok > 50, 'operations succeeded');
  const kinds = new Set(result.faults.map((f) => f.nemesis));
  t.ok(kinds.has('partition') && kinds.has('kill'), `a partition and a kill happened (${[...kinds].join(', ')})`);
  t.ok(
    result.faults.every((f) => f.stop !== null),
    'every fault was stopped',
  );
  t.match(lines.join('\n'), /nemesis: final heal/);
  const history = readFileSync(join(out, 'history.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { process: unknown; node?: string });
  t.ok(
    history.some((e) => e.node === 'final'),
    'final reads recorded',
  );
  t.ok(
    history.some((e) => e.process === 'nemesis'),
    'nemesis events recorded',
  );
  t.same(
    readdirSync(out)
      .filter((f) => f !== 'data')
      .sort(),
    ['history.jsonl', 'report.html', 'result.json'],
  );
  // Nothing left: no member of this run, no namespace of its slot.
  const runId = String(result.run.runId);
  const strays = readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        return readFileSync(`/proc/${p}/environ`, 'utf8').includes(`JEPSEN_LIKE_RUN=${runId}`);
      } catch {
        return false;
      }
    });
  t.same(strays, [], 'no member process left');
  if (result.run.mode === 'namespace') {
    const { execFileSync } = await import('node:child_process');
    const ns = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' });
    t.notMatch(
      ns,
      new RegExp(`^jl${String(result.run.slot)}-n\\d`, 'm'),
      `no namespace of slot ${String(result.run.slot)} left`,
    );
  }
});
