/**
 * `jepsen-like run`: start a real 5-member cluster of a service, drive concurrent clients, inject faults on a
 * schedule drawn from the seed, heal, let the cluster recover, run the final reads, check the history, write
 * DIR/history.jsonl, DIR/result.json and DIR/report.html. Everything it creates (namespaces, rules, proxies,
 * member processes) is removed on the way out: normal end, error or Ctrl-C.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { GenericEvent } from '@raftkit/linearizability';
import { allAnomalies, checkLinearizability, overall, type LinearizabilityResult } from './check.js';
import { ClusterUnderTest } from './cluster.js';
import { isRoot, runCommand } from './exec.js';
import { countOps, HistoryWriter, type OpCounts } from './history.js';
import { describeFault, type NemesisChoice } from './nemesis/faults.js';
import { NemesisRunner, type FaultRecord } from './nemesis/index.js';
import { QUIET_SESSION_TIMEOUT_MS } from './nemesis/quiet.js';
import { makeSchedule } from './nemesis/schedule.js';
import { TrafficGate } from './nemesis/traffic.js';
import { NamespaceNetwork } from './net/namespaces.js';
import type { Network } from './net/network.js';
import { ProxyNetwork } from './net/proxy-network.js';
import { renderReport } from './report/html.js';
import { Rng } from './rng.js';
import { claimSlot, releaseSlot, StateFile } from './state.js';
import { closeHttp } from './workloads/http.js';
import { makeWorkload } from './workloads/index.js';
import type { CheckResult, Completion, Invocation, WorkerContext } from './workloads/workload.js';

export interface RunOptions {
  service: string;
  /** Workload name; defaults to the service's. */
  workload?: string;
  timeS: number;
  concurrency: number;
  nemeses: NemesisChoice[];
  seed: number;
  out: string;
  mode: 'auto' | 'namespace' | 'proxy';
  packetVia: 'auto' | 'netem' | 'proxy';
  /** Mean seconds between faults of one nemesis, and mean fault length. */
  intervalS: number;
  /** Seconds to wait for the cluster to recover after the final heal (and the final reads' deadline). */
  recoveryS: number;
  opTimeoutMs: number;
  /** Target operations per second over all clients. */
  rate: number;
  checkTimeoutS: number;
  clockSkew: boolean;
  tickMs: number;
  members: number;
  /** Namespace slot to use (default: the first free one). */
  slot?: number;
  /** Keep the members' data directories (default: removed after a valid run). */
  keepData: boolean;
  say?: (line: string) => void;
}

export interface RunResult {
  valid: boolean | 'unknown';
  anomalies: ReturnType<typeof allAnomalies>;
  ops: OpCounts;
  faults: FaultRecord[];
  checks: CheckResult[];
  run: Record<string, unknown>;
}

export class RunAborted extends Error {
  override name = 'RunAborted';
}

async function namespacesWork(): Promise<boolean> {
  if (!isRoot()) return false;
  const probe = `jlprobe${process.pid % 100000}`;
  const add = await runCommand('ip', ['netns', 'add', probe]);
  if (add.code !== 0) return false;
  await runCommand('ip', ['netns', 'del', probe]);
  return true;
}

export async function runTest(options: RunOptions, interrupt: AbortSignal): Promise<RunResult> {
  const say = options.say ?? ((line: string) => process.stdout.write(line + '\n'));
  const t0 = Date.now();
  const elapsed = (): string => `[${((Date.now() - t0) / 1000).toFixed(1).padStart(6)}s]`;
  const log = (line: string): void => say(`${elapsed()} ${line}`);
  const out = resolve(options.out);
  mkdirSync(out, { recursive: true });
  const workload = makeWorkload(options.workload ?? options.service);
  if (workload.service !== options.service)
    throw new Error(`workload ${workload.name} drives service ${workload.service}, not ${options.service}`);
  const ids = Array.from({ length: options.members }, (_, i) => `n${i + 1}`);
  const needPackets = options.nemeses.some((n) => n.name === 'packet');
  const clockSkew = options.clockSkew || options.nemeses.some((n) => n.name === 'clock');
  let mode = options.mode;
  if (mode === 'auto') mode = (await namespacesWork()) ? 'namespace' : 'proxy';
  if (mode === 'namespace' && !isRoot()) throw new Error('namespace mode needs root; use --mode proxy');
  const runId = `${Date.now().toString(36)}-${process.pid}`;
  const state = new StateFile({
    runId,
    harnessPid: process.pid,
    startedAt: new Date().toISOString(),
    mode,
    outDir: out,
    slot: null,
    namespaces: [],
    links: [],
    members: {},
    helpers: [],
  });
  const seed = options.seed;
  const runInfo0: Record<string, unknown> = {};
  let slot: number | null = null;
  let network: Network;
  if (mode === 'namespace') {
    slot = claimSlot(options.slot);
    runInfo0.slot = slot;
    state.state.slot = slot;
    state.save();
    network = new NamespaceNetwork({
      slot,
      ids,
      seed,
      packets: needPackets ? options.packetVia : 'none',
      state,
      say: log,
    });
  } else {
    network = new ProxyNetwork(ids, seed, needPackets);
  }
  // Last resort if the process dies without unwinding: kill members, drop namespaces (synchronously).
  const emergency = (): void => {
    for (const pid of Object.values(state.state.members))
      if (pid !== null)
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          /* gone */
        }
    for (const pid of state.state.helpers)
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    for (const ns of state.state.namespaces) spawnSync('ip', ['netns', 'del', ns]);
    for (const l of state.state.links) spawnSync('ip', ['link', 'del', l]);
  };
  process.on('exit', emergency);

  const dataDir = join(out, 'data');
  rmSync(dataDir, { recursive: true, force: true });
  const history = new HistoryWriter(join(out, 'history.jsonl'));
  let cluster: ClusterUnderTest | null = null;
  let nemesis: NemesisRunner | null = null;
  const traffic = new TrafficGate();
  let progress: NodeJS.Timeout | null = null;
  const abortWorkers: Array<() => void> = [];
  const stopWorkload = new AbortController();
  const stopNemesis = new AbortController();
  const onInterrupt = (): void => {
    stopWorkload.abort();
    stopNemesis.abort();
    traffic.releaseAll();
  };
  interrupt.addEventListener('abort', onInterrupt, { once: true });
  const runInfo: Record<string, unknown> = {
    runId,
    service: options.service,
    workload: workload.name,
    model: workload.model,
    seed,
    timeS: options.timeS,
    concurrency: options.concurrency,
    nemesis: options.nemeses.map((n) => (n.variants.length > 0 ? `${n.name}:${n.variants.join('+')}` : n.name)),
    mode,
    members: ids,
    startedAt: new Date(t0).toISOString(),
    intervalS: options.intervalS,
    recoveryS: options.recoveryS,
    opTimeoutMs: options.opTimeoutMs,
    rate: options.rate,
    out,
    ...runInfo0,
  };
  try {
    log(
      `jepsen-like: ${workload.name} on a ${ids.length}-member ${options.service} cluster, ${options.timeS}s, concurrency ${options.concurrency}, seed ${seed}, ${mode} mode`,
    );
    log(`workload: ${workload.describe()}`);
    await network.prepare();
    runInfo.packetFaults = network.packetFaults;
    runInfo.notes = network.notes;
    for (const note of network.notes) log(`note: ${note}`);
    if (mode === 'namespace')
      log(
        `network: namespaces ${ids.map((id) => network.addresses(id).raftAdvertised.split(':')[0]).join(' ')} on bridge jl${slot}br`,
      );
    const token = randomBytes(18).toString('base64url');
    // With the quiet nemesis, sessions lapse within a spell: the members' first writes after it are what it tests.
    const quiet = options.nemeses.some((n) => n.name === 'quiet');
    const env: Record<string, string> = quiet ? { RAFTKIT_SESSION_TIMEOUT_MS: String(QUIET_SESSION_TIMEOUT_MS) } : {};
    cluster = new ClusterUnderTest({
      service: options.service,
      ids,
      network,
      dataDir,
      token,
      tickMs: options.tickMs,
      runId,
      state,
      clockSkew,
      env,
      ...(workload.workers !== undefined ? { workers: workload.workers } : {}),
      ...(workload.settings !== undefined ? { settings: workload.settings } : {}),
      ...(workload.workerScript !== undefined ? { workerScript: workload.workerScript } : {}),
      ...(workload.faultWorkers !== undefined ? { faultWorkers: workload.faultWorkers } : {}),
      ...(workload.wipeMembers !== undefined ? { wipeMembers: workload.wipeMembers } : {}),
      ...(workload.partitionWorkers !== undefined ? { partitionWorkers: workload.partitionWorkers } : {}),
    });
    cluster.startAll();
    log(`started ${ids.length} members; waiting for a leader`);
    const leader = await cluster.waitForLeader(30_000);
    if (interrupt.aborted) throw new RunAborted('interrupted');
    if (leader === null) throw new Error(`no leader within 30 s (member logs in ${dataDir}/n*/member.log)`);
    log(`leader: ${leader}`);
    if (workload.workers !== undefined) {
      await cluster.startWorkers();
      log(`workers: ${cluster.workerUrls().join(' ')}`);
    }
    const workerUrls = cluster.workerUrls();

    const schedule = makeSchedule({
      seed,
      durationMs: options.timeS * 1000,
      nemeses: options.nemeses,
      intervalMs: options.intervalS * 1000,
    });
    const starts = schedule.filter((a) => a.action === 'start');
    log(
      `schedule: ${starts.length} fault(s): ${starts.map((a) => `${(a.at / 1000).toFixed(1)}s ${describeFault(a.fault)}`).join('; ') || 'none'}`,
    );
    nemesis = new NemesisRunner(
      { cluster, network, rng: Rng.derive(seed, 'nemesis-runtime'), traffic, say: log },
      history,
    );

    // Clients.
    let nextFinalProcess = 0;
    const perform = async (
      process: { id: number },
      retire: () => void,
      invocation: Invocation,
      exec: () => Promise<Completion>,
      node: string,
    ): Promise<Completion> => {
      history.append({
        process: process.id,
        type: 'invoke',
        f: invocation.f,
        ...(invocation.key !== undefined ? { key: invocation.key } : {}),
        ...(invocation.value !== undefined ? { value: invocation.value } : {}),
        node,
      });
      let completion: Completion;
      try {
        completion = await exec();
      } catch (e) {
        completion = { type: 'info', error: `client error: ${(e as Error).message}` };
      }
      history.append({
        process: process.id,
        type: completion.type,
        f: invocation.f,
        ...(invocation.key !== undefined ? { key: invocation.key } : {}),
        ...(completion.value !== undefined
          ? { value: completion.value }
          : invocation.value !== undefined && completion.type !== 'ok'
            ? { value: invocation.value }
            : {}),
        ...(completion.error !== undefined ? { error: completion.error } : {}),
        node,
      });
      if (completion.type === 'info') retire();
      return completion;
    };
    const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
    const c0 = cluster;
    // Setup operations are numbered apart from the clients' (and recorded as the final reads are, off the lanes).
    const finalProcess = { next: 1_000_000 };
    const performFinal = (inv: Invocation, exec: () => Promise<Completion>): Promise<Completion> => {
      const proc = { id: finalProcess.next++ };
      return perform(proc, () => {}, inv, exec, 'final');
    };
    if (workload.setup !== undefined) {
      log('setup');
      await workload.setup({
        nodes: ids,
        url: (id) => c0.url(id),
        workerUrls,
        token,
        opTimeoutMs: options.opTimeoutMs,
        perform: performFinal,
        sleep,
        deadline: Date.now() + 60_000,
      });
      if (interrupt.aborted) throw new RunAborted('interrupted');
    }

    const meanGapMs = (options.concurrency * 1000) / options.rate;
    const c = cluster;
    const workers = Array.from({ length: options.concurrency }, (_, w) => {
      const node = ids[w % ids.length]!;
      const proc = { id: w };
      const rng = Rng.derive(seed, `worker/${w}`);
      const ctx: WorkerContext = {
        worker: w,
        node,
        url: (id) => c.url(id),
        workerUrls,
        token,
        opTimeoutMs: options.opTimeoutMs,
        rng,
        perform: (inv, exec) => perform(proc, () => (proc.id += options.concurrency), inv, exec, node),
        get stopping() {
          return stopWorkload.signal.aborted;
        },
        sleep,
      };
      const worker = workload.createWorker(ctx);
      abortWorkers.push(() => worker.abort?.());
      return { worker, rng, proc };
    });
    const loops = workers.map(async ({ worker, rng }) => {
      while (!stopWorkload.signal.aborted) {
        await traffic.enter();
        try {
          if (!stopWorkload.signal.aborted) await worker.step();
        } finally {
          traffic.leave();
        }
        if (!stopWorkload.signal.aborted) await sleep(rng.between(0, 2 * meanGapMs));
      }
    });

    const workloadStart = Date.now();
    progress = setInterval(() => {
      void (async () => {
        const counts = countOps(history.events);
        const leaderNow = await c.leader(500).catch(() => null);
        const active = nemesis?.activeDescriptions() ?? [];
        log(
          `ops ${counts.total}: ok ${counts.ok}, fail ${counts.fail}, info ${counts.info} | leader ${leaderNow ?? 'none'} | faults: ${active.length > 0 ? active.join('; ') : 'none'}`,
        );
      })();
    }, 5_000);
    const nemesisDone = nemesis.run(schedule, workloadStart, stopNemesis.signal);
    await new Promise<void>((r) => {
      const timer = setTimeout(r, options.timeS * 1000);
      stopWorkload.signal.addEventListener(
        'abort',
        () => {
          clearTimeout(timer);
          r();
        },
        { once: true },
      );
    });
    stopNemesis.abort();
    stopWorkload.abort();
    traffic.releaseAll();
    await nemesisDone;
    log('time is up: stopping clients');
    await Promise.all(loops);
    clearInterval(progress);
    progress = null;
    await nemesis.healAll();
    if (interrupt.aborted) throw new RunAborted('interrupted');

    // Recovery, then the clients finish (release what they hold), then the final reads.
    const recoveredLeader = await cluster.waitForLeader(options.recoveryS * 1000);
    log(
      recoveredLeader === null
        ? `no leader ${options.recoveryS}s after the heal`
        : `recovered: leader ${recoveredLeader}`,
    );
    await sleep(1_000);
    await Promise.all(
      workers.map(({ worker }) =>
        worker.finish().catch((e: unknown) => log(`client finish failed: ${(e as Error).message}`)),
      ),
    );
    const maxProcess = Math.max(...history.events.map((e) => (typeof e.process === 'number' ? e.process : 0)));
    nextFinalProcess = maxProcess + 1;
    log('final reads');
    await workload.finalReads({
      nodes: ids,
      url: (id) => c.url(id),
      workerUrls,
      token,
      opTimeoutMs: options.opTimeoutMs,
      perform: (inv, exec) => {
        const proc = { id: nextFinalProcess++ };
        return perform(proc, () => {}, inv, exec, 'final');
      },
      sleep,
      deadline: Date.now() + options.recoveryS * 1000,
    });
    const counts = countOps(history.events);
    log(`workload done: ${counts.total} operations (ok ${counts.ok}, fail ${counts.fail}, info ${counts.info})`);
  } finally {
    if (progress !== null) clearInterval(progress);
    await workload.close?.().catch(() => undefined);
    for (const abort of abortWorkers) abort();
    interrupt.removeEventListener('abort', onInterrupt);
    history.close();
    if (cluster !== null) {
      if (nemesis !== null && interrupt.aborted) await nemesis.healAll().catch(() => {});
      await cluster.stopAll();
    }
    await network.teardown().catch((e: unknown) => log(`teardown: ${(e as Error).message}`));
    if (slot !== null) releaseSlot(slot);
    state.remove();
    process.off('exit', emergency);
    await closeHttp();
    log(interrupt.aborted ? 'interrupted: cluster stopped, network cleaned up' : 'cluster stopped, network cleaned up');
  }

  // Check.
  log(`checking ${workload.model} linearizability (budget ${options.checkTimeoutS}s)`);
  const events = (workload.modelEvents?.(history.events) ?? history.events) as unknown as GenericEvent[];
  const lin: LinearizabilityResult = checkLinearizability(workload.model, events, {
    timeoutMs: options.checkTimeoutS * 1000,
  });
  log(`linearizable: ${lin.valid} (${lin.partitions} partition(s), ${lin.steps} steps, ${lin.ms.toFixed(0)} ms)`);
  const checks: CheckResult[] = [lin, ...workload.check(history.events)];
  for (const extra of checks.slice(1))
    log(`${extra.name}: ${extra.valid}${extra.stats ? ' ' + JSON.stringify(extra.stats) : ''}`);
  const faults = nemesis?.faults ?? [];
  runInfo.durationMs = Date.now() - t0;
  const result: RunResult = {
    valid: overall(checks),
    anomalies: allAnomalies(checks),
    ops: countOps(history.events),
    faults,
    checks,
    run: runInfo,
  };
  writeFileSync(join(out, 'result.json'), JSON.stringify(result, null, 2) + '\n');
  writeFileSync(join(out, 'report.html'), renderReport({ events: history.events, result }));
  // The members' logs stay; their databases go unless asked to keep them (or the run failed).
  if (result.valid === true && !options.keepData)
    for (const id of ids) rmSync(join(dataDir, id, 'db'), { recursive: true, force: true });
  log(`valid: ${result.valid}  (${join(out, 'result.json')}, ${join(out, 'report.html')})`);
  return result;
}
