/** Run the shared load generator against one side and add what it cost in CPU, server and client. */
import type { RunOptions, SideResult } from './benchmark.js';
import { interrupted } from './cleanup.js';
import { Endpoints, send, type HttpRequest } from './http.js';
import { runLoad, type LoadResult } from './load.js';
import { CpuMeter } from './procs.js';
import { round } from './stats.js';

export interface SideSpec {
  label: string;
  system: string;
  members: number | null;
  /** Process ids of the servers, for their CPU time; empty when in-process. */
  serverPids: number[];
  /** See LoadOptions.op: may resolve to the moment it sent its request. */
  op: (worker: number) => Promise<void | number>;
  extra?: Record<string, unknown>;
  /** Read server-side counters; called as the measured window opens and as it closes. */
  probe?: () => Promise<Record<string, number>>;
  /** Turn the counters' change over the window into figures for the report. */
  explain?: (delta: Record<string, number>, result: LoadResult) => Record<string, unknown>;
}

export async function measure(spec: SideSpec, o: RunOptions): Promise<SideResult> {
  const server = new CpuMeter(() => spec.serverPids);
  let client0 = process.cpuUsage();
  let t0 = performance.now();
  let clientCores = 0;
  type Counters = Record<string, number>;
  const probes: { start: Promise<Counters> | null; end: Promise<Counters> | null } = { start: null, end: null };
  const result = await runLoad({
    label: spec.label,
    concurrency: o.concurrency,
    durationS: o.durationS,
    warmupS: o.warmupS,
    op: spec.op,
    signal: interrupted,
    onMeasureStart: () => {
      server.start();
      probes.start = spec.probe?.() ?? null;
      client0 = process.cpuUsage();
      t0 = performance.now();
    },
    onMeasureEnd: () => {
      server.stop();
      probes.end = spec.probe?.() ?? null;
      const c = process.cpuUsage(client0);
      clientCores = (c.user + c.system) / 1000 / Math.max(1, performance.now() - t0);
    },
  });
  const cpu = server.used;
  let explained: Record<string, unknown> = {};
  if (probes.start !== null && probes.end !== null && spec.explain !== undefined) {
    const [a, b] = await Promise.all([probes.start, probes.end]);
    const delta: Counters = {};
    for (const [k, v] of Object.entries(b)) delta[k] = v - (a[k] ?? 0);
    explained = spec.explain(delta, result);
  }
  return {
    system: spec.system,
    members: spec.members,
    ...result,
    server_cpu_s: cpu === null ? null : round(cpu, 2),
    server_cpu_cores: cpu === null ? null : round(cpu / result.duration_s, 2),
    server_cpu_us_per_op: cpu === null || result.ops === 0 ? null : round((cpu * 1e6) / result.ops, 0),
    client_cpu_cores: round(clientCores, 2),
    ...spec.extra,
    ...explained,
  };
}

/** A side whose operations are HTTP requests spread over `origins` (worker w -> origins[w mod n]). */
export async function measureHttp(
  spec: Omit<SideSpec, 'op'> & { origins: string[]; request: (worker: number) => HttpRequest },
  o: RunOptions,
): Promise<SideResult> {
  const endpoints = new Endpoints(spec.origins, o.concurrency);
  try {
    return await measure(
      {
        ...spec,
        op: async (w) => {
          await send(endpoints.forWorker(w), spec.request(w));
        },
      },
      o,
    );
  } finally {
    await endpoints.close();
  }
}
