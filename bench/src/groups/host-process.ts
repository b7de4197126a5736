/**
 * One GroupHost as its own OS process, for `npx bench groups` (groups.ts starts five of them). Reads one JSON
 * request a line on stdin and answers one JSON line on stdout with the request's id:
 *
 *   {id, op: 'create', groups: [{name, members}]}   -> {id, ok}
 *   {id, op: 'status'}                              -> {id, groups: [[name, term, role, leader, quiesced]], commit: {requested, written}}
 *   {id, op: 'load', groups: [{name, workers}], warmupMs, durationMs, size}
 *        -> {id, ops, errors, error_kinds, latencies_ms, duration_ms, led}
 *   (with profileDir and profileLabel: the process's CPU profile over the load in <profileDir>/<id>-<label>.cpuprofile)
 *
 * `load` drives, closed loop, each listed group this process leads when the load starts (`workers` proposals in
 * flight per group), from inside the process: the figures are the groups' own (commit, fsync, apply), not those
 * of an HTTP layer. Only proposals that complete inside the measured window count.
 *
 *   node host-process.js <id> <data dir> <secret> <id=host:port,...> <tick ms> <quiesce ticks> <preference delay ms>
 *        <ping ticks>
 *
 * A preference delay of -1 leaves preferred leaders off (GroupHostOptions.leaderPreference); ping ticks is
 * GroupHostOptions.pingTicks (default 1).
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { GroupHost, type StateMachine } from '@raftkit/raft';

/** The smallest state machine that still applies every entry: a counter of applied bytes. */
class Counter implements StateMachine<string, number> {
  bytes = 0;
  apply(value: string): number {
    this.bytes += value.length;
    return this.bytes;
  }
  snapshot(): Uint8Array {
    return Buffer.from(String(this.bytes));
  }
  restore(data: Uint8Array): void {
    this.bytes = Number(Buffer.from(data).toString());
  }
}

type Request =
  | { id: number; op: 'create'; groups: Array<{ name: string; members: string[] }> }
  | { id: number; op: 'status' }
  | {
      id: number;
      op: 'load';
      groups: Array<{ name: string; workers: number }>;
      warmupMs: number;
      durationMs: number;
      size: number;
      /** --profile: the V8 CPU profile of this process during the load lands here as <id>-<label>.cpuprofile. */
      profileDir?: string;
      profileLabel?: string;
    };

const [id, dir, secret, list, tickArg, quiesceArg, preferenceArg, pingArg] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
  string,
  string | undefined,
  string | undefined,
];
const preferenceDelayMs = Number(preferenceArg ?? -1);
const hosts = Object.fromEntries(list.split(',').map((pair) => pair.split('=') as [string, string]));
const host = await GroupHost.open({
  id,
  listen: hosts[id]!,
  secret,
  dataDir: dir,
  hosts,
  tickMs: Number(tickArg),
  quiesceTicks: Number(quiesceArg),
  pingTicks: Number(pingArg ?? 1),
  ...(preferenceDelayMs >= 0 ? { leaderPreference: { delayMs: preferenceDelayMs } } : {}),
});

const message = (e: unknown): string => (e instanceof Error ? `${e.name}: ${e.message}` : String(e));

/** Runs `body` under the V8 CPU profiler (in-thread inspector session) and writes the profile to `file`. */
async function profiled<T>(file: string, body: () => Promise<T>): Promise<T> {
  const session = new Session();
  session.connect();
  const post = (method: string): Promise<unknown> =>
    new Promise((resolve, reject) =>
      session.post(method, (err, result) => (err === null ? resolve(result) : reject(err))),
    );
  await post('Profiler.enable');
  await post('Profiler.start');
  try {
    return await body();
  } finally {
    const { profile } = (await post('Profiler.stop')) as { profile: object };
    writeFileSync(file, JSON.stringify(profile));
    session.disconnect();
  }
}

async function load(request: Extract<Request, { op: 'load' }>): Promise<object> {
  if (request.profileDir !== undefined) {
    const file = join(request.profileDir, `${id}-${request.profileLabel ?? 'load'}.cpuprofile`);
    return profiled(file, () => drive({ ...request, profileDir: undefined }));
  }
  return drive(request);
}

async function drive(request: Extract<Request, { op: 'load' }>): Promise<object> {
  const led = request.groups.filter((g) => host.group(g.name)?.isLeader === true);
  const payload = 'x'.repeat(request.size);
  const start = performance.now();
  const open = start + request.warmupMs;
  const close = open + request.durationMs;
  const latencies: number[] = [];
  const errorKinds: Record<string, number> = {};
  let errors = 0;
  const worker = async (name: string): Promise<void> => {
    const node = host.group<string, number>(name)!;
    while (performance.now() < close) {
      const t0 = performance.now();
      try {
        await node.propose(payload);
        const t1 = performance.now();
        if (t0 >= open && t1 <= close) latencies.push(Math.round((t1 - t0) * 100) / 100);
      } catch (e) {
        if (performance.now() >= open) {
          errors++;
          const kind = e instanceof Error ? e.name : 'error';
          errorKinds[kind] = (errorKinds[kind] ?? 0) + 1;
        }
        await new Promise((r) => setTimeout(r, 10));
      }
    }
  };
  await Promise.all(led.flatMap((g) => Array.from({ length: g.workers }, () => worker(g.name))));
  // A process leading none of the groups still answers at the end of the window: its profile then covers the load
  // it served as a follower (and a load of no groups measures a process at rest).
  const left = close - performance.now();
  if (left > 0) await new Promise((r) => setTimeout(r, left));
  return {
    ops: latencies.length,
    errors,
    error_kinds: errorKinds,
    latencies_ms: latencies,
    duration_ms: request.durationMs,
    led: led.map((g) => g.name),
  };
}

async function answer(request: Request): Promise<object> {
  switch (request.op) {
    case 'create':
      await Promise.all(
        request.groups.map((g) =>
          host.createGroup<string, number>(g.name, {
            members: g.members,
            stateMachine: new Counter(),
            requestTimeoutMs: 20_000,
          }),
        ),
      );
      return { ok: true };
    case 'status':
      return {
        groups: host.groupNames().map((name) => {
          const node = host.group(name)!;
          const s = node.status();
          return [name, s.term, s.role, s.leader, node.quiesced];
        }),
        commit: host.commitStats,
      };
    case 'load':
      return load(request);
  }
}

const out = (line: object): void => void process.stdout.write(`${JSON.stringify(line)}\n`);
createInterface({ input: process.stdin }).on('line', (line) => {
  let request: Request;
  try {
    request = JSON.parse(line) as Request;
  } catch {
    return;
  }
  answer(request).then(
    (result) => out({ id: request.id, ...result }),
    (error: unknown) => out({ id: request.id, error: message(error) }),
  );
});
// The harness closes stdin when it is done with this process (or dies): close the host and leave.
process.stdin.on('end', () => void host.close().finally(() => process.exit(0)));
process.on('SIGTERM', () => void host.close().finally(() => process.exit(0)));
out({ ready: true });
