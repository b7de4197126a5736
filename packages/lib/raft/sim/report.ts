/** Shared by the runners: run one seed, format results, show a failure's trace. */
import { configFromSeed, describeConfig, type SimConfig } from './config.js';
import type { HistoryChecker } from './linearizability.js';
import { runSimulation, type SimResult } from './simulation.js';

export interface SeedOutcome {
  seed: number;
  ok: boolean;
  invariant?: string;
  message?: string;
  summary: string;
  ms: number;
  unchecked: boolean;
}

export function runSeed(seed: number, checker: HistoryChecker | null, patch?: Partial<SimConfig>): SeedOutcome {
  const config = { ...configFromSeed(seed), ...patch };
  const started = performance.now();
  const result = runSimulation(config, { checkHistory: checker });
  const ms = performance.now() - started;
  const outcome: SeedOutcome = {
    seed,
    ok: result.ok,
    summary: summarize(result),
    ms,
    unchecked: checker === null || result.linearizability?.result === 'unknown',
  };
  if (result.failure !== undefined) {
    outcome.invariant = result.failure.invariant;
    outcome.message = result.failure.message;
  }
  return outcome;
}

export function summarize(r: SimResult): string {
  const s = r.stats;
  const lin = r.linearizability === null ? 'lin unchecked' : `lin ${r.linearizability.result}`;
  return (
    `${s.members} members, ${s.events} events, ${s.virtualMs}ms virtual, ${s.ops} ops (${s.infoOps} info, ${s.retries} retries), ` +
    `${s.elections} leaders, ${s.crashes} crashes, ${s.snapshotsTaken} snapshots taken / ${s.snapshotsInstalled} installed, ` +
    `${s.membershipChanges} config changes, ${lin}`
  );
}

/** Re-run a failing seed with tracing on (runs are deterministic) and return the failure with its last lines. */
export function explainFailure(config: SimConfig, checker: HistoryChecker | null, lines = 60): string {
  const result = runSimulation(config, { checkHistory: checker, traceLines: lines * 8 });
  const out: string[] = [];
  if (result.failure === undefined)
    return '  (the failure did not reproduce: the run is not deterministic — a simulator bug)';
  out.push(`  invariant: ${result.failure.invariant}`);
  out.push(
    `  at ${result.failure.time.toFixed(3)}ms virtual, event ${result.failure.event}: ${result.failure.message.split('\n').join('\n    ')}`,
  );
  if (result.failure.stack !== undefined)
    out.push(`  stack: ${result.failure.stack.split('\n').slice(1, 6).join('\n    ')}`);
  out.push(`  config: ${describeConfig(config)}`);
  // Heartbeats are most of any trace; leave them out here (`--trace` shows everything).
  const trace = result.trace.filter((line) => !/ heartbeat(Resp)? t\d/.test(line)).slice(-lines);
  out.push(`  last ${trace.length} trace lines (heartbeats left out; --trace for everything):`);
  for (const line of trace) out.push(`    ${line}`);
  return out.join('\n');
}
