/**
 * A cluster's state on disk, in its data directory, so every later CLI call (and bench, and jepsen-like) finds
 * it: DIR/cluster.json (members, pids, ports), DIR/token (the bearer token), DIR/<member>/ (LevelDB and log).
 */
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { serviceNames } from './service-list.js';

export interface MemberRecord {
  id: string;
  /** Process id of the running member, or null when stopped. */
  pid: number | null;
  raftAddress: string;
  httpAddress: string;
  /** Set when the member was removed from the cluster (kept for its log). */
  removed?: boolean;
  /** The member joined a running cluster (no bootstrap list). */
  joined?: boolean;
}

/** A process of the service that is not a Raft member (application server, counter store...). */
export interface WorkerRecord {
  /** role + index, e.g. "app2". */
  id: string;
  role: string;
  index: number;
  pid: number | null;
  httpAddress: string;
  tcpAddress: string;
  /** The role's node flags (WorkerRole.nodeFlags), given to its process at every start; absent: none. */
  nodeFlags?: string[];
}

export interface ClusterState {
  service: string;
  dataDir: string;
  basePort: number;
  tickMs: number;
  /** Applied entries between snapshots (absent in older state files: the member's default). */
  snapshotEvery?: number;
  /** The bootstrap member set, passed to every original member. */
  bootstrap: Record<string, string>;
  members: MemberRecord[];
  /** The service's other processes, in start order (absent for services without workers). */
  workers?: WorkerRecord[];
  /** `cluster up --set key=value` settings, handed to every worker (`replicas` is not one: see below). */
  settings?: Record<string, string>;
  /** A grouped service's replica count (`cluster up --set replicas=N`), given to every member at every start. */
  replicas?: number;
  /** The service's member node flags (ServiceDefinition.memberNodeFlags), given to every member at every start. */
  memberNodeFlags?: string[];
}

export class CliError extends Error {
  override name = 'CliError';
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
  }
}

export function statePath(dataDir: string): string {
  return join(dataDir, 'cluster.json');
}

export function tokenPath(dataDir: string): string {
  return join(dataDir, 'token');
}

export function memberDir(dataDir: string, id: string): string {
  return join(dataDir, id);
}

export function logPath(dataDir: string, id: string): string {
  return join(dataDir, id, 'member.log');
}

export function workerLogPath(dataDir: string, id: string): string {
  return join(dataDir, id, 'worker.log');
}

export function readState(dataDir: string): ClusterState {
  const path = statePath(dataDir);
  if (!existsSync(path)) throw new CliError(`no cluster in ${dataDir} (start one with: cluster up --data ${dataDir})`);
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as ClusterState;
  } catch (e) {
    throw new CliError(`${path} is not readable: ${(e as Error).message}`);
  }
}

export function writeState(state: ClusterState): void {
  mkdirSync(state.dataDir, { recursive: true });
  // Write then rename, so a reader never sees half a file.
  const tmp = statePath(state.dataDir) + '.tmp';
  writeFileSync(tmp, JSON.stringify(state, null, 2) + '\n');
  renameSync(tmp, statePath(state.dataDir));
}

/**
 * Record a process's new pid. CLI calls on one cluster may run side by side (restarting two workers at once), and
 * each holds the state it read when it started: writing that whole state back would lose the other call's pid, and
 * `down` would then leave that process running. So the file is re-read and changed under a lock.
 */
export function savePid(dataDir: string, id: string, pid: number | null): void {
  withStateLock(dataDir, () => {
    const fresh = readState(dataDir);
    const record = [...fresh.members, ...(fresh.workers ?? [])].find((r) => r.id === id);
    if (record === undefined) throw new CliError(`${id} is no longer in ${statePath(dataDir)}`);
    record.pid = pid;
    writeState(fresh);
  });
}

const LOCK_WAIT_MS = 10_000;

function withStateLock(dataDir: string, body: () => void): void {
  const lock = statePath(dataDir) + '.lock';
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      const fd = openSync(lock, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      break;
    } catch {
      let holder = NaN;
      try {
        holder = Number(readFileSync(lock, 'utf8'));
      } catch {
        continue; // released meanwhile
      }
      // A lock left by a CLI call that died (or one still being written) is taken over once its holder is gone.
      if (Number.isInteger(holder) && holder > 0 && !isAlive(holder)) rmSync(lock, { force: true });
      else if (Date.now() > deadline)
        throw new CliError(`${lock} is held by pid ${holder}; remove it if no cluster command runs`);
      else Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
    }
  }
  try {
    body();
  } finally {
    rmSync(lock, { force: true });
  }
}

/**
 * A local cluster's token: its token file, which holds what its members were started with. $CLUSTER_AUTH_TOKEN only
 * stands in when the file is missing: each cluster has its own token, so a token exported for one cluster must not
 * be sent to every other one.
 */
export function readToken(dataDir: string): string {
  const path = tokenPath(dataDir);
  if (existsSync(path)) return readFileSync(path, 'utf8').trim();
  const fromEnv = process.env.CLUSTER_AUTH_TOKEN;
  if (fromEnv !== undefined && fromEnv.length > 0) return fromEnv;
  throw new CliError(`no token in ${path}; set CLUSTER_AUTH_TOKEN`);
}

/** The clusters under a data root: each sub-folder holding a cluster.json, by name. */
export function clusterDirs(root: string): string[] {
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .filter((d) => existsSync(statePath(join(root, d))))
    .sort()
    .map((d) => join(root, d));
}

/**
 * Which data directory a command means: --data, else --service NAME (data/NAME, where `cluster up --service NAME`
 * and `make up` put it), else $CLUSTER_DATA, else the only cluster under ./data. Several clusters and none of these:
 * an error naming them, never a guess.
 */
export function resolveDataDir(option: string | undefined, service?: string): string {
  if (option !== undefined && service !== undefined) throw new CliError('give --data DIR or --service NAME, not both');
  if (option !== undefined) return resolve(option);
  if (service !== undefined) {
    if (!serviceNames().includes(service))
      throw new CliError(`--service: no service ${service} (services: ${serviceNames().join(', ')})`);
    return resolve('data', service);
  }
  if (process.env.CLUSTER_DATA) return resolve(process.env.CLUSTER_DATA);
  const found = clusterDirs(resolve('data'));
  if (found.length === 1) return found[0]!;
  if (found.length === 0)
    throw new CliError('no cluster running: no data/*/cluster.json here (start one with: cluster up)');
  const names = found.map((d) => basename(d));
  throw new CliError(
    `several clusters under ./data (${names.join(', ')}): choose one with --service NAME (data/NAME), e.g. --service ${names[0]}, or --data DIR`,
  );
}

/** A member by number ("3") or id ("n3"). */
export function findMember(state: ClusterState, ref: string): MemberRecord {
  const id = /^\d+$/.test(ref) ? `n${ref}` : ref;
  const member = state.members.find((m) => m.id === id);
  if (member === undefined) throw new CliError(`unknown member ${ref} (${knownIds(state)})`);
  return member;
}

/** A member (as findMember) or a worker by id ("app2"). */
export function findProcess(
  state: ClusterState,
  ref: string,
): { kind: 'member'; record: MemberRecord } | { kind: 'worker'; record: WorkerRecord } {
  const worker = state.workers?.find((w) => w.id === ref);
  if (worker !== undefined) return { kind: 'worker', record: worker };
  const id = /^\d+$/.test(ref) ? `n${ref}` : ref;
  const member = state.members.find((m) => m.id === id);
  if (member === undefined)
    throw new CliError(
      `unknown ${(state.workers ?? []).length > 0 ? 'member or worker' : 'member'} ${ref} (${knownIds(state)})`,
    );
  return { kind: 'member', record: member };
}

function knownIds(state: ClusterState): string {
  const members = state.members.filter((m) => !m.removed).map((m) => m.id);
  const workers = (state.workers ?? []).map((w) => w.id);
  return `members: ${members.join(', ')}${workers.length > 0 ? `; workers: ${workers.join(', ')}` : ''}`;
}

export function isAlive(pid: number | null): boolean {
  if (pid === null) return false;
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
  return !isZombie(pid);
}

/**
 * An exited member that nobody reaped yet: members outlive the CLI, so their parent is init (or whatever reaps
 * orphans in a container, possibly late or never), and kill(pid, 0) still succeeds on the zombie.
 */
function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) state ...": comm may hold spaces and parentheses, so read the state after the last ')'.
    return /^\s*[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 1));
  } catch {
    return false; // no /proc (not Linux): trust kill(pid, 0)
  }
}
