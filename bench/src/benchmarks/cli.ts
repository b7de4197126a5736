/**
 * `cli`: what one call of the `cluster` CLI costs, in CPU seconds of the call's own processes, against a running
 * 5-member kv cluster. Each round calls, in order: status, status --json, list, groups, kill 3, restart 3, pause 1,
 * resume 1, partition "1,2|3,4,5", heal, transfer-leader 2 (so the cluster is whole again after each round);
 * --duration N rounds (default 5). Ours is `bin/cluster` (node cluster/bin/cluster.js); `--vs npx` runs the same
 * calls as `npx cluster`, which adds npm's own start. Goal (issue 39): every call under 0.5 s of CPU.
 *
 * A call's CPU is read from this process's `cutime + cstime` (/proc/self/stat) before and after a synchronous spawn:
 * the CPU of the children it waited for, the call and whatever it waited for itself (npm's node for npx), and not
 * the members a `restart` starts (they are detached and outlive the call). 10 ms resolution (the kernel's ticks).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Benchmark, Goal, RunOptions, SideResult } from '../benchmark.js';
import { interrupted } from '../cleanup.js';
import { startOurCluster } from '../ours.js';
import { BenchError } from '../procs.js';
import { round, summarize } from '../stats.js';

const repoRoot = fileURLToPath(new URL('../../../../', import.meta.url));
const GOAL_CPU_S = 0.5;
const TICKS_PER_SECOND = 100;

/** The calls of one round; `{data}` and `{root}` are the cluster's folder and the folder holding it. */
const CALLS: string[][] = [
  ['status', '--data', '{data}'],
  ['status', '--json', '--data', '{data}'],
  ['list', '--data-root', '{root}'],
  ['groups', '--data', '{data}'],
  ['kill', '3', '--data', '{data}'],
  ['restart', '3', '--data', '{data}'],
  ['pause', '1', '--data', '{data}'],
  ['resume', '1', '--data', '{data}'],
  ['partition', '1,2|3,4,5', '--data', '{data}'],
  ['heal', '--data', '{data}'],
  ['transfer-leader', '2', '--data', '{data}'],
];

/** CPU seconds of this process's children that it has waited for (cutime + cstime). */
function childrenCpuSeconds(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[13]) + Number(fields[14])) / TICKS_PER_SECOND;
}

interface CommandFigures {
  calls: number;
  mean_cpu_s: number;
  max_cpu_s: number;
  mean_wall_ms: number;
}

async function runSide(entry: 'bin/cluster' | 'npx', o: RunOptions): Promise<SideResult> {
  const cluster = await startOurCluster({ service: 'kv', nodes: 5 });
  try {
    await cluster.leader();
    const env = { ...process.env };
    delete env.CLUSTER_AUTH_TOKEN;
    delete env.CLUSTER_DATA;
    const [command, prefix] =
      entry === 'npx' ? ['npx', ['cluster']] : [process.execPath, [join(repoRoot, 'bin', 'cluster')]];
    const wallMs: number[] = [];
    const perCommand = new Map<string, { cpu: number[]; wall: number[] }>();
    let errors = 0;
    const errorKinds: Record<string, number> = {};
    let cpuTotal = 0;
    const rounds = Math.max(1, o.durationS);
    for (let r = 0; r < rounds && !interrupted.aborted; r++) {
      for (const call of CALLS) {
        const args = call.map((a) => a.replace('{data}', cluster.dataDir).replace('{root}', dirname(cluster.dataDir)));
        const name = call.filter((a) => !a.startsWith('{') && a !== '--data' && a !== '--data-root').join(' ');
        const cpu0 = childrenCpuSeconds();
        const t0 = performance.now();
        const result = spawnSync(command, [...prefix, ...args], {
          cwd: repoRoot,
          env,
          encoding: 'utf8',
          timeout: 60_000,
        });
        const wall = performance.now() - t0;
        const cpu = childrenCpuSeconds() - cpu0;
        if (result.status !== 0) {
          errors++;
          const kind = `${name}: exit ${result.status ?? result.signal}: ${(result.stderr ?? '').trim().split('\n')[0]}`;
          errorKinds[kind] = (errorKinds[kind] ?? 0) + 1;
        }
        wallMs.push(wall);
        cpuTotal += cpu;
        const figures = perCommand.get(name) ?? { cpu: [], wall: [] };
        figures.cpu.push(cpu);
        figures.wall.push(wall);
        perCommand.set(name, figures);
      }
      process.stderr.write(
        `bench: ${entry} round ${r + 1}/${rounds}: ${CALLS.length} calls, ${round(cpuTotal / wallMs.length)} s of CPU a call so far\n`,
      );
    }
    if (wallMs.length === 0) throw new BenchError('no call was made');
    const commands: Record<string, CommandFigures> = {};
    for (const [name, f] of perCommand) {
      commands[name] = {
        calls: f.cpu.length,
        mean_cpu_s: round(f.cpu.reduce((a, b) => a + b, 0) / f.cpu.length),
        max_cpu_s: round(Math.max(...f.cpu)),
        mean_wall_ms: round(f.wall.reduce((a, b) => a + b, 0) / f.wall.length),
      };
    }
    const totalWallS = wallMs.reduce((a, b) => a + b, 0) / 1000;
    const { count: _count, ...latency } = summarize(wallMs);
    return {
      system: entry === 'npx' ? 'npx cluster' : 'bin/cluster (node cluster/bin/cluster.js)',
      members: 5,
      ...latency,
      ops_per_sec: round(wallMs.length / totalWallS),
      ops: wallMs.length,
      errors,
      error_kinds: errorKinds,
      duration_s: round(totalWallS),
      warmup_s: 0,
      concurrency: 1,
      interrupted: interrupted.aborted,
      // The "server" here is the CLI call itself: its CPU, per call.
      server_cpu_s: round(cpuTotal),
      server_cpu_cores: round(cpuTotal / totalWallS),
      server_cpu_us_per_op: Math.round((cpuTotal * 1e6) / wallMs.length),
      client_cpu_cores: 0,
      max_cpu_s_per_call: round(Math.max(...Object.values(commands).map((c) => c.max_cpu_s))),
      commands,
    };
  } finally {
    await cluster.stop();
  }
}

export const cliBenchmark: Benchmark = {
  name: 'cli',
  description:
    'CPU seconds of one `cluster` CLI call (status, list, groups, kill, restart, pause, resume, partition, heal, transfer-leader) against a 5-member kv cluster; --vs npx: the same through npx',
  title: (o) => `cli: CPU per call of the cluster CLI${o.vs !== null ? `, bin/cluster vs ${o.vs}` : ''}`,
  peers: ['npx'],
  defaults: { durationS: 5, concurrency: 1, size: 0, warmupS: 0 },
  workload: (o) => ({
    rounds: Math.max(1, o.durationS),
    calls_per_round: CALLS.map((c) =>
      c.filter((a) => !a.startsWith('{') && a !== '--data' && a !== '--data-root').join(' '),
    ),
    cluster: 'kv, 5 members, started with the CLI',
    cpu: "cutime + cstime of the benchmark process around each synchronous spawn (the call's processes, not the members it starts)",
  }),
  goals: (ours: SideResult): Goal[] => {
    const commands = ours.commands as Record<string, CommandFigures>;
    const worst = Object.entries(commands).sort((a, b) => b[1].max_cpu_s - a[1].max_cpu_s)[0]!;
    return [
      {
        goal: `every CLI call under ${GOAL_CPU_S} s of CPU (bin/cluster)`,
        met: (ours.max_cpu_s_per_call as number) < GOAL_CPU_S,
        detail: `mean ${round(ours.server_cpu_us_per_op! / 1e6)} s a call; the most costly call ${worst[0]} at ${worst[1].max_cpu_s} s (mean ${worst[1].mean_cpu_s} s)`,
      },
    ];
  },
  runOurs: (o) => runSide('bin/cluster', o),
  runPeer: async (peer, o) => {
    if (peer !== 'npx') throw new BenchError(`cli: no peer ${peer} (only npx)`);
    return runSide('npx', o);
  },
};
