/**
 * A real rate-limiting cluster for integration tests, started and broken through the `cluster` CLI (5 members,
 * store and check workers as separate processes), always torn down by the caller.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';

const cli = fileURLToPath(new URL('../../../../../cluster/bin/cluster.js', import.meta.url));

export interface Worker {
  id: string;
  role: string;
  http: string;
  tcp: string;
}

export interface RateLimitCluster {
  dataDir: string;
  token: string;
  members: string[];
  workers: Worker[];
  checks: Worker[];
  run(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }>;
  down(): Promise<void>;
}

export interface Answer {
  status: number;
  body: Record<string, unknown>;
  headers: Record<string, string | string[] | undefined>;
}

function runCli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [cli, ...args], { timeout: 90_000 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
      resolve({ code, stdout, stderr });
    });
  });
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** A base in 20000..59800 (step 200) whose member and worker ports are all free right now. */
export async function freeBasePort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * 200) * 200;
    const ports = [...range(base + 1, base + 10), ...range(base + 41, base + 60), ...range(base + 101, base + 110), ...range(base + 161, base + 180)];
    if ((await Promise.all(ports.map(isFree))).every(Boolean)) return base;
  }
  throw new Error('no free port range');
}

export async function startRateLimitCluster(options: { workers?: string; set?: string[] } = {}): Promise<RateLimitCluster> {
  const dataDir = mkdtempSync(join(tmpdir(), 'ratelimit-it-'));
  let base = 0;
  let up = { code: 1, stdout: '', stderr: '' };
  // Another process may take a port between the check and the start: try another range then.
  for (let attempt = 0; attempt < 3 && up.code !== 0; attempt++) {
    base = await freeBasePort();
    const args = ['up', '--service', 'ratelimit', '--data', dataDir, '--base-port', String(base), '--tick-ms', '50', '--workers', options.workers ?? 'store=2,check=3'];
    for (const s of options.set ?? []) args.push('--set', s);
    up = await runCli(args);
    if (up.code !== 0) await runCli(['down', '--wipe', '--data', dataDir]);
    if (up.code !== 0 && !/port in use/.test(up.stderr + up.stdout)) break;
  }
  if (up.code !== 0) {
    rmSync(dataDir, { recursive: true, force: true });
    throw new Error(`cluster up failed: ${up.stderr}${up.stdout}`);
  }
  const workers: Worker[] = [];
  for (const m of up.stdout.matchAll(/^\s+(\S+)\s+http:\/\/(\S+)\s+tcp (\S+)\s+pid \d+\s+\((\w+)\)/gm)) workers.push({ id: m[1]!, http: `http://${m[2]!}`, tcp: m[3]!, role: m[4]! });
  return {
    dataDir,
    token: readFileSync(join(dataDir, 'token'), 'utf8').trim(),
    members: range(base + 101, base + 105).map((p) => `http://127.0.0.1:${p}`),
    workers,
    checks: workers.filter((w) => w.role === 'check'),
    run: (...a) => runCli([...a, '--data', dataDir]),
    down: async () => {
      await runCli(['down', '--wipe', '--data', dataDir]);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** One HTTP call with a bearer token (null: none). */
export async function call(base: string, method: string, path: string, token: string | null, body?: unknown): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await request(base + path, { method: method as 'GET', headers, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body), headersTimeout: 20_000, bodyTimeout: 20_000 });
  const text = await res.body.text();
  let parsed: unknown = text;
  try {
    parsed = text.length > 0 ? JSON.parse(text) : null;
  } catch {
    // Not JSON (metrics): keep the text.
  }
  return { status: res.statusCode, body: parsed as Record<string, unknown>, headers: res.headers };
}

export async function until<T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs = 20_000, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe().catch(() => null);
    if (v !== null && v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
