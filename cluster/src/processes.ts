/** Starting and stopping member processes, and talking to their HTTP control endpoints. */
import { spawn } from 'node:child_process';
import { mkdirSync, openSync, closeSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { loopbackExchange } from './loopback-http.js';
import {
  CliError,
  isAlive,
  logPath,
  memberDir,
  tokenPath,
  workerLogPath,
  type ClusterState,
  type MemberRecord,
  type WorkerRecord,
} from './state.js';

const memberScript = fileURLToPath(new URL('./member.js', import.meta.url));
const workerScript = fileURLToPath(new URL('./worker.js', import.meta.url));

/** Start one member detached from the CLI (it outlives it); its output goes to DIR/<id>/member.log. */
export function spawnMember(state: ClusterState, member: MemberRecord): number {
  const dir = memberDir(state.dataDir, member.id);
  mkdirSync(dir, { recursive: true });
  const out = openSync(logPath(state.dataDir, member.id), 'a');
  const args = [
    memberScript,
    '--service',
    state.service,
    '--id',
    member.id,
    '--data',
    `${dir}/db`,
    '--raft',
    member.raftAddress,
    '--http',
    member.httpAddress,
    '--token-file',
    tokenPath(state.dataDir),
    '--tick-ms',
    String(state.tickMs),
  ];
  if (state.snapshotEvery !== undefined) args.push('--snapshot-every', String(state.snapshotEvery));
  if (state.replicas !== undefined) args.push('--replicas', String(state.replicas));
  if (member.joined) {
    const others = state.members.filter((m) => !m.removed && m.id !== member.id);
    args.push('--join', others.map((m) => `${m.id}=${m.raftAddress}`).join(','));
  } else {
    args.push(
      '--peers',
      Object.entries(state.bootstrap)
        .map(([id, a]) => `${id}=${a}`)
        .join(','),
    );
  }
  // The token reaches the member through its file only, so every member of the cluster agrees on it.
  const env = { ...process.env };
  delete env.CLUSTER_AUTH_TOKEN;
  const child = spawn(process.execPath, [...(state.memberNodeFlags ?? []), ...args], {
    detached: true,
    stdio: ['ignore', out, out],
    env,
  });
  closeSync(out);
  child.unref();
  if (child.pid === undefined) throw new CliError(`could not start member ${member.id}`);
  return child.pid;
}

/** Start one worker detached from the CLI; it reads its role and addresses from DIR/cluster.json. */
export function spawnWorker(state: ClusterState, worker: WorkerRecord): number {
  mkdirSync(memberDir(state.dataDir, worker.id), { recursive: true });
  const out = openSync(workerLogPath(state.dataDir, worker.id), 'a');
  const env = { ...process.env };
  delete env.CLUSTER_AUTH_TOKEN;
  const child = spawn(
    process.execPath,
    [...(worker.nodeFlags ?? []), workerScript, '--cluster', state.dataDir, '--id', worker.id],
    { detached: true, stdio: ['ignore', out, out], env },
  );
  closeSync(out);
  child.unref();
  if (child.pid === undefined) throw new CliError(`could not start worker ${worker.id}`);
  return child.pid;
}

/** Wait until a worker answers GET /healthz with 200; fail naming its log when it exits or takes too long. */
export async function waitHealthy(state: ClusterState, worker: WorkerRecord, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!isAlive(worker.pid))
      throw new CliError(`worker ${worker.id} exited at start; see ${workerLogPath(state.dataDir, worker.id)}`);
    if ((await callMember(worker, '', 'GET', '/healthz', undefined, 1_000)).status === 200) return;
    await sleep(100);
  }
  throw new CliError(
    `worker ${worker.id} did not become healthy within ${timeoutMs / 1000} s; see ${workerLogPath(state.dataDir, worker.id)}`,
  );
}

export function signal(member: { id: string; pid: number | null; role?: string }, sig: NodeJS.Signals): void {
  if (member.pid === null || !isAlive(member.pid))
    throw new CliError(`${member.role === undefined ? 'member' : 'worker'} ${member.id} is not running`);
  process.kill(member.pid, sig);
}

/** SIGTERM, wait up to `graceMs`, then SIGKILL. */
export async function stopProcess(pid: number | null, graceMs = 5_000): Promise<void> {
  if (pid === null || !isAlive(pid)) return;
  try {
    process.kill(pid, 'SIGCONT'); // a paused member cannot handle SIGTERM
    process.kill(pid, 'SIGTERM');
  } catch {
    return;
  }
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!isAlive(pid)) return;
    await sleep(50);
  }
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
  while (isAlive(pid)) await sleep(20);
}

/** Fails with a clear error when a port is taken. */
export async function assertPortFree(host: string, port: number): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const server = createServer();
    server.once('error', (e: NodeJS.ErrnoException) =>
      reject(
        new CliError(
          e.code === 'EADDRINUSE'
            ? `port in use: ${host}:${port} (choose another --base-port)`
            : `cannot listen on ${host}:${port}: ${e.message}`,
        ),
      ),
    );
    server.listen(port, host, () => server.close(() => resolve()));
  });
}

interface HttpAnswer {
  status: number;
  body: unknown;
}

/** One HTTP call to a given member (or worker) of a local cluster with its token (no failover). Connection failures and timeouts come back as status 0. */
export async function callMember(
  member: { httpAddress: string },
  token: string,
  method: string,
  path: string,
  body?: unknown,
  timeoutMs = 10_000,
): Promise<HttpAnswer> {
  const answer = await loopbackExchange({ address: member.httpAddress, method, path, token, body, timeoutMs });
  if (answer === null) return { status: 0, body: null };
  let parsed: unknown = null;
  if (answer.text.length > 0) {
    try {
      parsed = JSON.parse(answer.text) as unknown;
    } catch {
      parsed = answer.text;
    }
  }
  return { status: answer.status, body: parsed };
}

/** A member's GET /v1/cluster/status answer (single-group.ts statusBody). */
export interface MemberStatus {
  id: string;
  role: string;
  term: number;
  leader_id: string | null;
  commit_index: number;
  applied_index: number;
  last_log_index: number;
  snapshot_index: number;
  voters: string[];
  learners: string[];
  peers: Array<{
    id: string;
    match_index: number;
    next_index: number;
    state: string;
    learner: boolean;
    active: boolean;
  }>;
}

export async function memberStatus(
  member: MemberRecord,
  token: string,
  timeoutMs = 1_000,
): Promise<MemberStatus | null> {
  if (member.pid === null || !isAlive(member.pid)) return null;
  const answer = await callMember(member, token, 'GET', '/v1/cluster/status', undefined, timeoutMs);
  return answer.status === 200 ? (answer.body as MemberStatus) : null;
}

/** The member that leads, by asking the live members (majority view of the highest term). */
export async function findLeader(state: ClusterState, token: string, timeoutMs = 15_000): Promise<MemberRecord> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const live = state.members.filter((m) => !m.removed);
    const statuses = await Promise.all(live.map((m) => memberStatus(m, token)));
    let best: { member: MemberRecord; term: number } | null = null;
    statuses.forEach((s, i) => {
      if (s !== null && s.role === 'leader' && (best === null || s.term > best.term))
        best = { member: live[i]!, term: s.term };
    });
    if (best !== null) return (best as { member: MemberRecord }).member;
    await sleep(100);
  }
  throw new CliError('no leader was elected in time (is a majority of members running?)');
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
