/**
 * `jepsen-like`: run fault-injection tests against real clusters, check saved histories, clean up after a
 * crashed run.
 *
 * Exit codes: 0 every check passed; 1 a check failed (not linearizable, an anomaly); 2 unknown (the checker's
 * budget ran out); 3 the harness could not run the test (bad arguments, no leader, ...); 130 interrupted.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command, Option } from 'commander';
import { MODEL_NAMES, type ModelName } from '@raftkit/linearizability';
import { checkLinearizability, overall, allAnomalies } from './check.js';
import { clean } from './clean.js';
import { countOps, parseAnyHistory, type HistoryEvent } from './history.js';
import { NEMESES, parseNemesisList, PARTITION_SHAPES, PACKET_KINDS, PROCESS_TARGETS } from './nemesis/faults.js';
import { renderReport } from './report/html.js';
import { RunAborted, runTest } from './runner.js';
import { checkLockHistory } from './workloads/lock.js';
import { WORKLOADS } from './workloads/index.js';
import type { CheckResult } from './workloads/workload.js';

const program = new Command()
  .name('jepsen-like')
  .description('Fault injection, history checking and reports for raftkit services.');

function int(name: string, min: number, max: number) {
  return (text: string): number => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < min || n > max) throw new Error(`${name} must be an integer from ${min} to ${max}`);
    return n;
  };
}

function num(name: string, min: number, max: number) {
  return (text: string): number => {
    const n = Number(text);
    if (!Number.isFinite(n) || n < min || n > max) throw new Error(`${name} must be a number from ${min} to ${max}`);
    return n;
  };
}

function exitCodeFor(valid: boolean | 'unknown'): number {
  return valid === true ? 0 : valid === false ? 1 : 2;
}

program
  .command('run')
  .description(
    'start a 5-member cluster, drive clients, inject faults, heal, check; exit 0 only when every check passes',
  )
  .requiredOption('--service <name>', `service to test (${Object.keys(WORKLOADS).join(', ')})`)
  .option('--workload <name>', "workload (default: the service's own)")
  .option(
    '--broken <variant>',
    "run the service's deliberately broken variant (workload SERVICE-VARIANT, e.g. flash: async-inventory), to see the checks catch it",
  )
  .option('--time <s>', 'seconds of workload under faults', num('--time', 1, 86_400), 60)
  .option('--concurrency <n>', 'client threads', int('--concurrency', 1, 200), 5)
  .option(
    '--nemesis <list>',
    `faults: ${NEMESES.join(', ')}, "all" or "none"; variants as name:a+b (partition: ${PARTITION_SHAPES.join(', ')}; kill/pause: ${PROCESS_TARGETS.join(', ')}; packet: ${PACKET_KINDS.join(', ')})`,
    'partition,kill,pause',
  )
  .option('--seed <n>', 'seed of the fault schedule and the workload', int('--seed', 0, 2 ** 32 - 1), 1)
  .option('--out <dir>', 'output directory (history.jsonl, result.json, report.html, member logs)', 'jepsen-out')
  .addOption(
    new Option(
      '--mode <mode>',
      'namespace (root: real network cut with nftables) or proxy (no root: userspace TCP proxies)',
    )
      .choices(['auto', 'namespace', 'proxy'])
      .default('auto'),
  )
  .addOption(
    new Option('--packet-via <how>', 'how packet faults are done in namespace mode')
      .choices(['auto', 'netem', 'proxy'])
      .default('auto'),
  )
  .option(
    '--interval <s>',
    'mean seconds between faults of one nemesis (and mean fault length)',
    num('--interval', 0.5, 3600),
    5,
  )
  .option('--recovery <s>', 'seconds allowed for recovery after the final heal', num('--recovery', 1, 600), 15)
  .option(
    '--op-timeout <ms>',
    'client operation timeout (then the outcome is unknown: info)',
    int('--op-timeout', 100, 120_000),
    3000,
  )
  .option('--rate <ops>', 'target operations per second over all clients', num('--rate', 0.1, 100_000), 50)
  .option(
    '--check-timeout <s>',
    'linearizability checker budget (then unknown)',
    num('--check-timeout', 1, 86_400),
    120,
  )
  .option('--clock-skew', 'load the clock-skew hook into members (implied by the clock nemesis)')
  .option('--tick-ms <ms>', 'Raft tick of the members', int('--tick-ms', 1, 10_000), 100)
  .option('--members <n>', 'cluster size', int('--members', 3, 9), 5)
  .option('--slot <n>', 'namespace slot (subnet 10.77.N.0/24; default: first free)', int('--slot', 1, 200))
  .option('--keep-data', "keep the members' databases even when the run is valid")
  .action(
    async (o: {
      service: string;
      workload?: string;
      broken?: string;
      time: number;
      concurrency: number;
      nemesis: string;
      seed: number;
      out: string;
      mode: 'auto' | 'namespace' | 'proxy';
      packetVia: 'auto' | 'netem' | 'proxy';
      interval: number;
      recovery: number;
      opTimeout: number;
      rate: number;
      checkTimeout: number;
      clockSkew?: boolean;
      tickMs: number;
      members: number;
      slot?: number;
      keepData?: boolean;
    }) => {
      const interrupt = new AbortController();
      let interrupts = 0;
      const onSignal = (signal: NodeJS.Signals): void => {
        interrupts++;
        if (interrupts === 1) {
          process.stderr.write(
            `\n${signal}: stopping the run and cleaning up (again to exit at once; then run jepsen-like clean)\n`,
          );
          interrupt.abort();
        } else process.exit(130);
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
      try {
        const result = await runTest(
          {
            service: o.service,
            ...(o.workload !== undefined
              ? { workload: o.workload }
              : o.broken !== undefined
                ? { workload: `${o.service}-${o.broken}` }
                : {}),
            timeS: o.time,
            concurrency: o.concurrency,
            nemeses: parseNemesisList(o.nemesis),
            seed: o.seed,
            out: o.out,
            mode: o.mode,
            packetVia: o.packetVia,
            intervalS: o.interval,
            recoveryS: o.recovery,
            opTimeoutMs: o.opTimeout,
            rate: o.rate,
            checkTimeoutS: o.checkTimeout,
            clockSkew: o.clockSkew === true,
            tickMs: o.tickMs,
            members: o.members,
            ...(o.slot !== undefined ? { slot: o.slot } : {}),
            keepData: o.keepData === true,
          },
          interrupt.signal,
        );
        process.exitCode = interrupt.signal.aborted ? 130 : exitCodeFor(result.valid);
      } catch (e) {
        if (e instanceof RunAborted || interrupt.signal.aborted) {
          process.exitCode = 130;
          return;
        }
        process.stderr.write(`jepsen-like: ${(e as Error).message}\n`);
        process.exitCode = 3;
      }
    },
  );

program
  .command('check <history>')
  .description('check a saved history (ours: JSON lines; Jepsen: history EDN or jepsen.util log lines)')
  .addOption(new Option('--model <model>', 'the sequential model').choices([...MODEL_NAMES]).makeOptionMandatory())
  .option('--timeout <s>', 'checker budget in seconds (then unknown)', num('--timeout', 0.001, 86_400), 300)
  .option('--report <file>', 'also write an HTML report')
  .option('--json', 'print the result as JSON')
  .action((file: string, o: { model: ModelName; timeout: number; report?: string; json?: boolean }) => {
    const t0 = performance.now();
    const text = readFileSync(file, 'utf8');
    const { format, events } = parseAnyHistory(text);
    const parseMs = performance.now() - t0;
    const lin = checkLinearizability(o.model, events, {
      timeoutMs: o.timeout * 1000,
      casFailIsObservation: format === 'jepsen-log',
    });
    const checks: CheckResult[] = [lin];
    if (o.model === 'lock' && format === 'jsonl') checks.push(...checkLockHistory(events as unknown as HistoryEvent[]));
    const valid = overall(checks);
    const ops = countOps(events as { process: unknown; type: string; f: string }[]);
    if (o.report !== undefined) {
      const timeUnit = events.every((e) => typeof e.time === 'number') && format !== 'jepsen-log' ? 'ns' : 'index';
      const drawn = events.map((e, i) => ({
        ...e,
        time: timeUnit === 'ns' ? e.time! : i,
      })) as unknown as HistoryEvent[];
      writeFileSync(
        o.report,
        renderReport({
          events: drawn,
          result: {
            valid,
            anomalies: allAnomalies(checks),
            ops,
            checks,
            run: { history: file, format, model: o.model },
          },
          timeUnit,
          title: `jepsen-like check ${file}`,
        }),
      );
    }
    if (o.json) {
      console.log(JSON.stringify({ valid, anomalies: allAnomalies(checks), ops, checks, format, parseMs }, null, 2));
    } else {
      console.log(
        `${file}: ${format}, ${events.length} events, ${ops.total} operations (ok ${ops.ok}, fail ${ops.fail}, info ${ops.info})`,
      );
      console.log(`model ${o.model}: ${lin.partitions} partition(s), ${lin.steps} search steps`);
      console.log(`timing: parse ${parseMs.toFixed(1)} ms, check ${lin.ms.toFixed(1)} ms`);
      for (const c of checks)
        console.log(`${c.name}: ${String(c.valid)}${c.stats ? ' ' + JSON.stringify(c.stats) : ''}`);
      if (lin.window) {
        const w = lin.window;
        console.log(
          `not linearizable (partition ${w.partition}): after ${w.prefixLength} operation(s), in state ${w.stateBefore}`,
        );
        for (const op of w.ops)
          console.log(
            `  ${op.role === 'window' ? 'cannot linearize ' : 'linearized before'}  process ${op.process} [${op.call}..${op.return ?? '?'}] ${op.description}`,
          );
      } else if (lin.valid === 'unknown') console.log(lin.explanation ?? '');
      for (const a of allAnomalies(checks)
        .filter((x) => x.check !== 'linearizable')
        .slice(0, 20))
        console.log(`${a.check}: ${a.description}`);
      console.log(`valid: ${String(valid)}`);
    }
    process.exitCode = exitCodeFor(valid);
  });

program
  .command('clean')
  .description('remove what crashed runs left: member processes, namespaces, links, nft rules, state files')
  .option('--force', 'also remove the resources of runs whose harness still runs')
  .action(async (o: { force?: boolean }) => {
    await clean({ force: o.force === true, say: (line) => console.log(line) });
  });

program
  .command('report <dir>')
  .description('re-render DIR/report.html from DIR/history.jsonl and DIR/result.json')
  .option(
    '--recheck',
    "check the history again (linearizability with the run's model, and the workload's checks) first",
  )
  .option('--timeout <s>', 'checker budget for --recheck', num('--timeout', 0.001, 86_400), 300)
  .action((dir: string, o: { recheck?: boolean; timeout: number }) => {
    const result = JSON.parse(readFileSync(`${dir}/result.json`, 'utf8')) as Parameters<
      typeof renderReport
    >[0]['result'] & { run?: { model?: ModelName; workload?: string } };
    const { events } = parseAnyHistory(readFileSync(`${dir}/history.jsonl`, 'utf8'));
    let out = result;
    if (o.recheck) {
      const model = result.run?.model;
      if (model === undefined) throw new Error('result.json names no model');
      const workloadName = result.run?.workload;
      const workload = workloadName !== undefined && WORKLOADS[workloadName] ? WORKLOADS[workloadName]!() : null;
      // The model sees what the run's checker saw: the workload's own selection (shortlink drops leases, log keeps commits).
      const modelEvents = (workload?.modelEvents?.(events as unknown as HistoryEvent[]) ?? events) as typeof events;
      const lin = checkLinearizability(model, modelEvents, { timeoutMs: o.timeout * 1000 });
      const extra = workload !== null ? workload.check(events as unknown as HistoryEvent[]) : [];
      const checks = [lin, ...extra];
      out = { ...result, checks, valid: overall(checks), anomalies: allAnomalies(checks) };
      writeFileSync(`${dir}/result.json`, JSON.stringify(out, null, 2) + '\n');
      console.log(`rechecked: valid ${String(out.valid)}`);
    }
    writeFileSync(`${dir}/report.html`, renderReport({ events: events as unknown as HistoryEvent[], result: out }));
    console.log(`wrote ${dir}/report.html`);
  });

program
  .command('summary <dir>')
  .description('one line per run found under DIR (each DIR/*/result.json): verdict, operations, faults, time')
  .action((dir: string) => {
    const runs = readdirSync(dir)
      .filter((d) => existsSync(join(dir, d, 'result.json')))
      .sort();
    let invalid = 0;
    console.log(['run', 'valid', 'ops', 'ok', 'fail', 'info', 'faults', 'seconds'].join('\t'));
    for (const d of runs) {
      const r = JSON.parse(readFileSync(join(dir, d, 'result.json'), 'utf8')) as {
        valid: boolean | 'unknown';
        ops: { total: number; ok: number; fail: number; info: number };
        faults: unknown[];
        run: { durationMs?: number };
      };
      if (r.valid !== true) invalid++;
      console.log(
        [
          d,
          String(r.valid),
          r.ops.total,
          r.ops.ok,
          r.ops.fail,
          r.ops.info,
          r.faults.length,
          ((r.run.durationMs ?? 0) / 1000).toFixed(0),
        ].join('\t'),
      );
    }
    console.log(`${runs.length} run(s), ${runs.length - invalid} valid`);
    process.exitCode = invalid === 0 ? 0 : 1;
  });

try {
  await program.parseAsync();
} catch (e) {
  process.stderr.write(`jepsen-like: ${(e as Error).message}\n`);
  process.exitCode = 3;
}
