/** Real clusters for integration tests: started and broken through the `cluster` CLI, always torn down. */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const cli = fileURLToPath(new URL('../../../../../cluster/bin/cluster.js', import.meta.url));

export interface TestCluster {
  dataDir: string;
  token: string;
  endpoints: string[];
  run(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }>;
  /** Start the stopped cluster again on its data and ports. */
  up(): Promise<{ code: number; stdout: string; stderr: string }>;
  down(): Promise<void>;
}

function runCli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [cli, ...args], { timeout: 90_000 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
      resolve({ code, stdout, stderr });
    });
  });
}

/** A base port whose raft (base+1..) and HTTP (base+101..) ranges are free right now. */
export async function freeBasePort(nodes: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * 400) * 100;
    const ports = Array.from({ length: nodes }, (_, i) => [base + 1 + i, base + 101 + i]).flat();
    if ((await Promise.all(ports.map(isFree))).every(Boolean)) return base;
  }
  throw new Error('no free port range');
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

export async function startCluster(service: string, options: { nodes?: number; tickMs?: number } = {}): Promise<TestCluster> {
  const nodes = options.nodes ?? 5;
  const dataDir = mkdtempSync(join(tmpdir(), `${service}-it-`));
  const base = await freeBasePort(nodes);
  const upArgs = ['up', '--service', service, '--nodes', String(nodes), '--data', dataDir, '--base-port', String(base), '--tick-ms', String(options.tickMs ?? 50)];
  const up = await runCli(upArgs);
  if (up.code !== 0) throw new Error(`cluster up failed: ${up.stderr}`);
  return {
    dataDir,
    token: readFileSync(join(dataDir, 'token'), 'utf8').trim(),
    endpoints: Array.from({ length: nodes }, (_, i) => `http://127.0.0.1:${base + 101 + i}`),
    run: (...args) => runCli([...args, '--data', dataDir]),
    up: () => runCli(upArgs),
    down: async () => {
      await runCli(['down', '--wipe', '--data', dataDir]);
    },
  };
}
