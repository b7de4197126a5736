/** Real short-link clusters for integration tests: members and workers started through the `cluster` CLI, always torn down. */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';

const cli = fileURLToPath(new URL('../../../../../cluster/bin/cluster.js', import.meta.url));

export interface Answer {
  status: number;
  body: Record<string, unknown>;
  headers: Record<string, string | string[] | undefined>;
}

export interface Worker {
  id: string;
  role: string;
  url: string;
}

export interface ShortlinkCluster {
  dataDir: string;
  token: string;
  members: string[];
  workers: Worker[];
  apps: string[];
  run(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }>;
  down(): Promise<void>;
}

/** `env`: added to this process's environment (members and workers inherit it from the CLI). */
function runCli(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [cli, ...args], { timeout: 120_000, env: { ...process.env, ...env } }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
      resolve({ code, stdout, stderr });
    });
  });
}

/** A base (step 200) whose member raft/HTTP ports and worker HTTP/binary ports are all free right now. */
export async function freeBasePort(): Promise<number> {
  const offsets = [
    ...Array.from({ length: 10 }, (_, i) => 1 + i),
    ...Array.from({ length: 20 }, (_, i) => 41 + i),
    ...Array.from({ length: 10 }, (_, i) => 101 + i),
    ...Array.from({ length: 20 }, (_, i) => 161 + i),
  ];
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * 199) * 200;
    if ((await Promise.all(offsets.map((o) => isFree(base + o)))).every(Boolean)) return base;
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

/** `env` reaches every process, restarted ones included (e.g. SHORTLINK_PURGE_GRACE_MS for the members). */
export async function startShortlink(options: { workers?: string; settings?: Record<string, string>; snapshotEvery?: number; env?: Record<string, string> } = {}): Promise<ShortlinkCluster> {
  const dataDir = mkdtempSync(join(tmpdir(), 'shortlink-it-'));
  const base = await freeBasePort();
  const args = ['up', '--service', 'shortlink', '--data', dataDir, '--base-port', String(base), '--tick-ms', '50'];
  if (options.workers !== undefined) args.push('--workers', options.workers);
  if (options.snapshotEvery !== undefined) args.push('--snapshot-every', String(options.snapshotEvery));
  for (const [k, v] of Object.entries(options.settings ?? {})) args.push('--set', `${k}=${v}`);
  const env = options.env ?? {};
  const up = await runCli(args, env);
  const down = async (): Promise<void> => {
    await runCli(['down', '--wipe', '--data', dataDir], env);
  };
  if (up.code !== 0) {
    await down();
    throw new Error(`cluster up failed: ${up.stderr}${up.stdout}`);
  }
  const state = JSON.parse(readFileSync(join(dataDir, 'cluster.json'), 'utf8')) as { workers?: Array<{ id: string; role: string; httpAddress: string }> };
  const workers = (state.workers ?? []).map((w) => ({ id: w.id, role: w.role, url: `http://${w.httpAddress}` }));
  return {
    dataDir,
    token: readFileSync(join(dataDir, 'token'), 'utf8').trim(),
    members: Array.from({ length: 5 }, (_, i) => `http://127.0.0.1:${base + 101 + i}`),
    workers,
    apps: workers.filter((w) => w.role === 'app').map((w) => w.url),
    run: (...a) => runCli([...a, '--data', dataDir], env),
    down,
  };
}

/** Keep-alive connections shared by a test's calls (redirects are not followed). */
export const agent = new Agent({ connections: 256, keepAliveTimeout: 10_000 });

export async function call(base: string, method: string, path: string, options: { token?: string | null; body?: unknown; raw?: string; headers?: Record<string, string> } = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  if (options.token !== undefined && options.token !== null) headers.authorization = `Bearer ${options.token}`;
  const payload = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
  if (payload !== undefined) headers['content-type'] = 'application/json';
  const res = await request(base + path, { method: method as 'GET', headers, body: payload, dispatcher: agent, headersTimeout: 30_000, bodyTimeout: 30_000 });
  const text = await res.body.text();
  let body: Record<string, unknown> = {};
  if (text.length > 0) {
    try {
      body = JSON.parse(text) as Record<string, unknown>;
    } catch {
      body = { text };
    }
  }
  return { status: res.statusCode, body, headers: res.headers };
}

export async function until<T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe().catch(() => null);
    if (v !== null && v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
