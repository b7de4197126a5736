/**
 * A real cluster of one service for integration tests, started, broken and stopped through the `cluster` CLI (by
 * path: services cannot import the CLI, which depends on them), in a fresh temporary directory on reserved ports.
 */
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { reservePorts } from './ports.js';

export const CLUSTER_CLI = fileURLToPath(new URL('../../../../../cluster/bin/cluster.js', import.meta.url));

/** Data folders of this process's clusters not yet brought down. */
const running = new Set<string>();
let stopsAtExit = false;

/**
 * Brings down, as the test process exits, every cluster it started and did not stop: a test ended by tap's
 * timeout (or a failure before its teardown) must not leave its members running to load the tests after it.
 */
function stopAtExit(dataDir: string): void {
  if (!stopsAtExit) {
    stopsAtExit = true;
    process.once('exit', () => {
      for (const dir of running) {
        spawnSync(process.execPath, [CLUSTER_CLI, 'down', '--wipe', '--data', dir], { timeout: 15_000 });
        rmSync(dir, { recursive: true, force: true });
      }
      running.clear();
    });
  }
  running.add(dataDir);
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface TestWorker {
  id: string;
  role: string;
  /** http://host:port of its HTTP API. */
  url: string;
  /** host:port of its binary listener. */
  tcp: string;
}

export interface TestCluster {
  service: string;
  base: number;
  dataDir: string;
  token: string;
  /** Members' HTTP base URLs, n1 first. */
  members: string[];
  workers: TestWorker[];
  /** The workers of one role, in index order. */
  role(name: string): TestWorker[];
  /** A CLI command against this cluster (`--data` appended). */
  run(...args: string[]): Promise<CliResult>;
  /** `up` again with the first call's arguments (after a `down` without wipe). */
  up(): Promise<CliResult>;
  /** `down --wipe`, then the directory and the port reservation go. */
  down(): Promise<void>;
}

export interface ClusterOptions {
  nodes?: number;
  tickMs?: number;
  snapshotEvery?: number;
  /** `--workers`, e.g. "app=3,stream=1". */
  workers?: string;
  /** `--set` pairs. */
  settings?: Record<string, string>;
  /** Added to the CLI's environment, so every member and worker it starts inherits it. */
  env?: Record<string, string>;
}

export function runCli(args: string[], env: Record<string, string> = {}, timeoutMs = 120_000): Promise<CliResult> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
  delete childEnv.CLUSTER_DATA;
  if (env.CLUSTER_AUTH_TOKEN === undefined) delete childEnv.CLUSTER_AUTH_TOKEN;
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CLUSTER_CLI, ...args],
      { timeout: timeoutMs, env: childEnv },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

export async function startCluster(service: string, options: ClusterOptions = {}): Promise<TestCluster> {
  const nodes = options.nodes ?? 5;
  const env = options.env ?? {};
  const dataDir = mkdtempSync(join(tmpdir(), `${service}-it-`));
  const ports = await reservePorts();
  const args = [
    'up',
    '--service',
    service,
    '--nodes',
    String(nodes),
    '--data',
    dataDir,
    '--base-port',
    String(ports.base),
    '--tick-ms',
    String(options.tickMs ?? 50),
  ];
  if (options.snapshotEvery !== undefined) args.push('--snapshot-every', String(options.snapshotEvery));
  if (options.workers !== undefined) args.push('--workers', options.workers);
  for (const [k, v] of Object.entries(options.settings ?? {})) args.push('--set', `${k}=${v}`);
  const down = async (): Promise<void> => {
    await runCli(['down', '--wipe', '--data', dataDir], env);
    rmSync(dataDir, { recursive: true, force: true });
    running.delete(dataDir);
    ports.release();
  };
  stopAtExit(dataDir);
  const up = await runCli(args, env);
  if (up.code !== 0) {
    await down();
    throw new Error(`cluster up failed (${up.code}): ${up.stderr}${up.stdout}`);
  }
  const state = JSON.parse(readFileSync(join(dataDir, 'cluster.json'), 'utf8')) as {
    workers?: Array<{ id: string; role: string; httpAddress: string; tcpAddress: string }>;
  };
  const workers = (state.workers ?? []).map((w) => ({
    id: w.id,
    role: w.role,
    url: `http://${w.httpAddress}`,
    tcp: w.tcpAddress,
  }));
  return {
    service,
    base: ports.base,
    dataDir,
    token: readFileSync(join(dataDir, 'token'), 'utf8').trim(),
    members: Array.from({ length: nodes }, (_, i) => `http://127.0.0.1:${ports.base + 101 + i}`),
    workers,
    role: (name) => workers.filter((w) => w.role === name),
    run: (...a) => runCli([...a, '--data', dataDir], env),
    up: () => runCli(args, env),
    down,
  };
}
