/**
 * The fault actions (kill, restart, pause, resume, partition, heal): one function each, used by the CLI's commands
 * and by the dashboard, so a fault made from either does the same thing and lands on the same timeline. Each one
 * appends a fault record to DIR/timeline.jsonl (JSON lines, trimmed when it grows past MAX_LINES), which the
 * dashboard tails; the partition in force is kept in DIR/partition.json so the dashboard can draw the sides.
 */
import { randomBytes } from 'node:crypto';
import {
  appendFileSync,
  existsSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { callMember, signal, sleep, spawnMember, spawnWorker, stopProcess, waitHealthy } from './processes.js';
import { CliError, findMember, findProcess, isAlive, memberDir, savePid, type ClusterState } from './state.js';

/** `wipe` (CLI only: it deletes data, so the dashboard does not offer it) restarts a worker on an empty folder. */
export type FaultAction = 'kill' | 'restart' | 'pause' | 'resume' | 'partition' | 'heal' | 'wipe';
export const FAULT_ACTIONS: readonly FaultAction[] = ['kill', 'restart', 'pause', 'resume', 'partition', 'heal'];

/** Who asked for the fault (said on the timeline). */
type FaultSource = 'cli' | 'dashboard';

/** One line of DIR/timeline.jsonl. */
export interface FaultRecord {
  /** Random id: the dashboard de-duplicates on it when the file is trimmed and re-read. */
  id: string;
  at: number;
  action: FaultAction;
  member: string | null;
  text: string;
}

export interface ActionResult {
  /** What the CLI prints on stdout. */
  message: string;
  /** Lines the CLI prints on stderr (members that did not take a partition). */
  warnings: string[];
  fault: FaultRecord;
}

/** The file is trimmed to its newest KEEP_LINES once it holds more than MAX_LINES. */
export const MAX_LINES = 10_000;
const KEEP_LINES = 5_000;
/** Lines are short (~150 bytes): checking the line count only past this size keeps appends cheap. */
const CHECK_BYTES = 1_000_000;

export function timelinePath(dataDir: string): string {
  return join(dataDir, 'timeline.jsonl');
}

export function partitionPath(dataDir: string): string {
  return join(dataDir, 'partition.json');
}

/** Appends one fault record (one write of one line, O_APPEND: CLI calls and the dashboard may append at once). */
export function recordFault(dataDir: string, action: FaultAction, member: string | null, text: string): FaultRecord {
  const fault: FaultRecord = { id: randomBytes(8).toString('hex'), at: Date.now(), action, member, text };
  const path = timelinePath(dataDir);
  appendFileSync(path, JSON.stringify(fault) + '\n');
  trimTimeline(path);
  return fault;
}

function trimTimeline(path: string): void {
  if (statSync(path).size < CHECK_BYTES) return;
  const lines = readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.length > 0);
  if (lines.length <= MAX_LINES) return;
  // Write then rename, so a reader never sees half a file (an append racing this rewrite may be lost: rare, and
  // only a timeline line).
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, lines.slice(-KEEP_LINES).join('\n') + '\n');
  renameSync(tmp, path);
}

/** The sides of the partition last made and not healed, or null. */
export function readPartition(dataDir: string): string[][] | null {
  const path = partitionPath(dataDir);
  if (!existsSync(path)) return null;
  try {
    const sides = JSON.parse(readFileSync(path, 'utf8')) as unknown;
    return Array.isArray(sides) && sides.every((s) => Array.isArray(s) && s.every((x) => typeof x === 'string'))
      ? (sides as string[][])
      : null;
  } catch {
    return null;
  }
}

function by(source: FaultSource): string {
  return source === 'cli' ? 'from the CLI' : 'from the dashboard';
}

const SIGNALS = { kill: 'SIGKILL', pause: 'SIGSTOP', resume: 'SIGCONT' } as const;

/** kill (SIGKILL, waits until it is gone), pause (SIGSTOP) or resume (SIGCONT) a member or worker. */
export async function signalProcess(
  state: ClusterState,
  action: 'kill' | 'pause' | 'resume',
  ref: string,
  source: FaultSource,
): Promise<ActionResult> {
  const record = findProcess(state, ref).record;
  const sig = SIGNALS[action];
  signal(record, sig);
  if (sig === 'SIGKILL') {
    while (isAlive(record.pid)) await sleep(20);
    record.pid = null;
    savePid(state.dataDir, record.id, null);
  }
  const fault = recordFault(state.dataDir, action, record.id, `${action} ${record.id} (${sig}) ${by(source)}`);
  return { message: `${action}: ${record.id}`, warnings: [], fault };
}

/** Stop a member or worker if it runs, then start it again on its data. */
export async function restartProcess(state: ClusterState, ref: string, source: FaultSource): Promise<ActionResult> {
  const found = findProcess(state, ref);
  const record = found.record;
  if (found.kind === 'worker') {
    await stopProcess(record.pid);
    record.pid = spawnWorker(state, found.record);
    savePid(state.dataDir, record.id, record.pid);
    await waitHealthy(state, found.record);
  } else {
    if (found.record.removed) throw new CliError(`${record.id} was removed from the cluster`);
    await stopProcess(record.pid);
    record.pid = spawnMember(state, found.record);
    savePid(state.dataDir, record.id, record.pid);
  }
  const fault = recordFault(
    state.dataDir,
    'restart',
    record.id,
    `restart ${record.id} (pid ${record.pid}) ${by(source)}`,
  );
  return { message: `restarted ${record.id} (pid ${record.pid})`, warnings: [], fault };
}

/**
 * A worker lost with its disk: SIGKILL it, delete everything in its data folder but its log (worker.log, kept for
 * the post-mortem), start it again empty. A Raft member is refused: its folder is its share of the group's log, and
 * a member comes back empty only through remove-node/add-node.
 */
export async function wipeWorker(state: ClusterState, ref: string, source: FaultSource): Promise<ActionResult> {
  const found = findProcess(state, ref);
  if (found.kind !== 'worker')
    throw new CliError(
      `${found.record.id} is a Raft member: wipe is for workers; a member's data is its copy of the log, so replace ` +
        'it with remove-node and add-node instead',
    );
  const record = found.record;
  if (record.pid !== null && isAlive(record.pid)) {
    signal(record, 'SIGKILL');
    const deadline = Date.now() + 5_000;
    while (isAlive(record.pid) && Date.now() < deadline) await sleep(20);
  }
  const dir = memberDir(state.dataDir, record.id);
  let removed = 0;
  if (existsSync(dir))
    for (const name of readdirSync(dir)) {
      if (name === 'worker.log') continue;
      rmSync(join(dir, name), { recursive: true, force: true });
      removed++;
    }
  record.pid = spawnWorker(state, record);
  savePid(state.dataDir, record.id, record.pid);
  await waitHealthy(state, record);
  const fault = recordFault(
    state.dataDir,
    'wipe',
    record.id,
    `wipe ${record.id}: killed, ${removed} entries of its data folder deleted, started empty (pid ${record.pid}) ${by(source)}`,
  );
  return { message: `wiped ${record.id} and started it empty (pid ${record.pid})`, warnings: [], fault };
}

/**
 * Cut the links between sides of members (refs: numbers or ids): each member is told to drop traffic from every
 * member not on its side. Throws a CliError for fewer than two sides, an empty side or a member on two sides.
 */
export async function partitionMembers(
  state: ClusterState,
  token: string,
  sides: string[][],
  source: FaultSource,
): Promise<ActionResult> {
  const groups = sides.map((side) => side.map((ref) => findMember(state, ref).id));
  if (groups.length < 2 || groups.some((g) => g.length === 0))
    throw new CliError('partition: expected at least two non-empty groups, e.g. "1,2|3,4,5"');
  const all = groups.flat();
  if (new Set(all).size !== all.length) throw new CliError('partition: a member is in two groups');
  const warnings: string[] = [];
  for (const group of groups) {
    const blocked = all.filter((id) => !group.includes(id));
    for (const id of group) {
      const answer = await callMember(findMember(state, id), token, 'PUT', '/v1/cluster/partition', { blocked });
      if (answer.status !== 200) warnings.push(`warning: ${id} did not take the partition (status ${answer.status})`);
    }
  }
  const text = groups.map((g) => g.join(',')).join(' | ');
  writeFileSync(partitionPath(state.dataDir), JSON.stringify(groups) + '\n');
  const fault = recordFault(state.dataDir, 'partition', null, `partition ${text} ${by(source)}`);
  return { message: `partitioned ${text}`, warnings, fault };
}

/** Restore every link cut by partition, on every running member. */
export async function healMembers(state: ClusterState, token: string, source: FaultSource): Promise<ActionResult> {
  for (const m of state.members.filter((x) => !x.removed && isAlive(x.pid)))
    await callMember(m, token, 'DELETE', '/v1/cluster/partition');
  rmSync(partitionPath(state.dataDir), { force: true });
  const fault = recordFault(state.dataDir, 'heal', null, `heal ${by(source)}`);
  return { message: 'healed', warnings: [], fault };
}
