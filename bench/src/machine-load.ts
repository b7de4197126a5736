/**
 * How busy the machine was while one side of a run measured, and whether that makes the side's figures noisy.
 *
 * The 1-minute load average alone cannot tell: the side's own servers and load generator raise it. So beside the
 * load average (sampled before and every second during the side) the watcher measures the CPU the rest of the
 * machine used: all busy CPU time from /proc/stat minus the CPU of the side's own processes (this one, and every
 * process started during the side, found by a marker in its environment, detached ones included, since `cluster up`
 * detaches its members). What is left is other people's work competing for the same cores: that is what makes two
 * sides of one run incomparable.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { round } from './stats.js';

/** Clock ticks per second of /proc's CPU figures (USER_HZ; 100 on Linux everywhere Node runs). */
const TICKS_PER_S = 100;

/** The stated threshold: a side is noisy when other processes used more than this many cores on average. */
export const DEFAULT_NOISY_FOREIGN_CORES = 0.3;

interface LoadSample {
  atMs: number;
  /** Busy CPU ticks of the whole machine since boot. */
  machineBusyTicks: number;
  /** CPU ticks of this process and its descendants (self, reaped children, live descendants). */
  ownTicks: number;
}

export interface SideNoise {
  label: string;
  load_avg_1m_before: number;
  load_avg_1m_during_mean: number;
  load_avg_1m_during_max: number;
  /** Cores the machine's other processes used on average during the side (null where /proc cannot be read). */
  foreign_cpu_cores: number | null;
  noisy: boolean;
}

export interface RunNoise {
  /** What makes a side noisy, in words, with the figure. */
  threshold: string;
  threshold_foreign_cores: number;
  sides: SideNoise[];
  noisy: boolean;
}

/** Busy ticks from /proc/stat's first line (everything but idle and iowait), or null off Linux. */
function machineBusyTicks(statText: string): number | null {
  const line = statText.split('\n', 1)[0] ?? '';
  const fields = line.trim().split(/\s+/).slice(1).map(Number);
  if (line.startsWith('cpu ') === false || fields.length < 4 || fields.some((n) => !Number.isFinite(n))) return null;
  // user nice system idle iowait irq softirq steal (guest is already inside user)
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = fields;
  return user + nice + system + irq + softirq + steal;
}

interface ProcStat {
  pid: number;
  ppid: number;
  /** utime + stime + cutime + cstime. */
  ticks: number;
}

/** Parses /proc/PID/stat; the command name may hold spaces and parentheses, so fields count from the last ')'. */
export function parseProcStat(text: string): ProcStat | null {
  const close = text.lastIndexOf(')');
  if (close < 0) return null;
  const pid = Number(text.slice(0, text.indexOf(' ')));
  const rest = text.slice(close + 2).split(' ');
  // rest[0] is field 3 (state); ppid is field 4, utime..cstime fields 14-17.
  const ppid = Number(rest[1]);
  const ticks = [11, 12, 13, 14].reduce((sum, i) => sum + Number(rest[i]), 0);
  return Number.isFinite(pid) && Number.isFinite(ppid) && Number.isFinite(ticks) ? { pid, ppid, ticks } : null;
}

function processTable(): ProcStat[] {
  const table: ProcStat[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = parseProcStat(readFileSync(`/proc/${name}/stat`, 'utf8'));
      if (stat !== null) table.push(stat);
    } catch {
      // The process ended while we looked.
    }
  }
  return table;
}

/** CPU ticks of `root` and every live descendant (each with its reaped children's time). */
export function treeTicks(table: readonly ProcStat[], root: number): number {
  const children = new Map<number, ProcStat[]>();
  for (const p of table) {
    const list = children.get(p.ppid);
    if (list === undefined) children.set(p.ppid, [p]);
    else list.push(p);
  }
  let total = table.find((p) => p.pid === root)?.ticks ?? 0;
  const stack = [...(children.get(root) ?? [])];
  for (let p = stack.pop(); p !== undefined; p = stack.pop()) {
    total += p.ticks;
    stack.push(...(children.get(p.pid) ?? []));
  }
  return total;
}

export function sampleLoad(): LoadSample | null {
  try {
    const busy = machineBusyTicks(readFileSync('/proc/stat', 'utf8'));
    if (busy === null) return null;
    return { atMs: Date.now(), machineBusyTicks: busy, ownTicks: treeTicks(processTable(), process.pid) };
  } catch {
    return null;
  }
}

/** Cores used by everything but this process tree between two samples. */
export function foreignCores(a: LoadSample, b: LoadSample): number {
  const seconds = (b.atMs - a.atMs) / 1000;
  if (seconds <= 0) return 0;
  const foreignTicks = b.machineBusyTicks - a.machineBusyTicks - (b.ownTicks - a.ownTicks);
  return Math.max(0, foreignTicks / TICKS_PER_S / seconds);
}

export function judgeSide(
  label: string,
  before: number,
  during: readonly number[],
  foreign: number | null,
  thresholdCores: number,
): SideNoise {
  const mean = during.length > 0 ? during.reduce((s, x) => s + x, 0) / during.length : before;
  const max = during.length > 0 ? Math.max(...during) : before;
  return {
    label,
    load_avg_1m_before: round(before, 2),
    load_avg_1m_during_mean: round(mean, 2),
    load_avg_1m_during_max: round(max, 2),
    foreign_cpu_cores: foreign === null ? null : round(foreign, 2),
    noisy: foreign !== null && foreign > thresholdCores,
  };
}

export function judgeRun(sides: SideNoise[], thresholdCores: number): RunNoise {
  return {
    threshold:
      `a side is noisy when the machine's other processes used more than ${thresholdCores} of its ${cpus().length} cores ` +
      "on average while it ran (all busy CPU from /proc/stat minus the benchmark's own process tree)",
    threshold_foreign_cores: thresholdCores,
    sides,
    noisy: sides.some((s) => s.noisy),
  };
}

/** "" when quiet, else the sentence the verdict carries. */
export function noiseVerdict(noise: RunNoise): string {
  const loud = noise.sides.filter((s) => s.noisy);
  if (loud.length === 0) return '';
  const list = loud.map((s) => `${s.label} ${s.foreign_cpu_cores} cores`).join(', ');
  return `NOISY RUN: other processes used more than ${noise.threshold_foreign_cores} cores during ${list}; compare with care`;
}

/** Marks every process a side starts (inherited through the environment), detached ones included. */
const SIDE_MARKER_VAR = 'RAFTKIT_BENCH_SIDE';
let sides = 0;

function ownTicksOf(pid: number): number | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
    // utime + stime only: a reaped child's time is counted from its own samples, not again through cutime.
    return Number(rest[11]) + Number(rest[12]);
  } catch {
    return null;
  }
}

/** The shortest side whose foreign CPU is judged at all. */
export const MIN_WINDOW_MS = 1_000;

/**
 * Watches one side: the load average before and every second during it, and the foreign CPU across it. The side's
 * own processes are this one and every process started while it runs, found by a marker in their environment:
 * `cluster up` detaches its members (init adopts them), so the process tree alone would count them as foreign.
 * Each is sampled every second; a process that ends loses at most its last second.
 */
export class SideWatcher {
  readonly #before = loadavg()[0] ?? 0;
  readonly #during: number[] = [];
  readonly #marker = `${process.pid}.${++sides}.${Date.now()}`;
  readonly #marked = new Map<number, { first: number; last: number }>();
  readonly #unmarked = new Set<number>();
  readonly #startBusy: number | null;
  readonly #startSelf: number;
  readonly #startAt = Date.now();
  readonly #timer: NodeJS.Timeout;

  constructor(readonly label: string) {
    process.env[SIDE_MARKER_VAR] = this.#marker;
    this.#startBusy = this.#busy();
    this.#startSelf = ownTicksOf(process.pid) ?? 0;
    this.#timer = setInterval(() => {
      this.#during.push(loadavg()[0] ?? 0);
      this.#scan();
    }, 1_000);
    this.#timer.unref();
  }

  get loadBefore(): number {
    return this.#before;
  }

  #busy(): number | null {
    try {
      return machineBusyTicks(readFileSync('/proc/stat', 'utf8'));
    } catch {
      return null;
    }
  }

  /** Every process carrying this side's marker, and its CPU now. */
  #scan(): void {
    let names: string[];
    try {
      names = readdirSync('/proc');
    } catch {
      return;
    }
    for (const name of names) {
      if (!/^\d+$/.test(name)) continue;
      const pid = Number(name);
      if (pid === process.pid || this.#unmarked.has(pid)) continue;
      const known = this.#marked.get(pid);
      if (known === undefined) {
        let environ: string;
        try {
          environ = readFileSync(`/proc/${pid}/environ`, 'latin1');
        } catch {
          continue;
        }
        if (
          !environ.includes(`${SIDE_MARKER_VAR}=${this.#marker}\0`) &&
          !environ.endsWith(`${SIDE_MARKER_VAR}=${this.#marker}`)
        ) {
          this.#unmarked.add(pid);
          continue;
        }
      }
      const ticks = ownTicksOf(pid);
      if (ticks === null) continue;
      // Started during the side (the marker is new), so everything it used is the side's.
      if (known === undefined) this.#marked.set(pid, { first: 0, last: ticks });
      else known.last = ticks;
    }
  }

  /** CPU ticks of this side's processes so far. */
  ownTicks(): number {
    let total = (ownTicksOf(process.pid) ?? this.#startSelf) - this.#startSelf;
    for (const p of this.#marked.values()) total += p.last - p.first;
    return total;
  }

  finish(thresholdCores: number): SideNoise {
    clearInterval(this.#timer);
    this.#scan();
    if (process.env[SIDE_MARKER_VAR] === this.#marker) delete process.env[SIDE_MARKER_VAR];
    const endBusy = this.#busy();
    let foreign: number | null = null;
    // CPU is counted in ticks of 10 ms: over a side shorter than a second (a lock sweep's peer side, whose steps
    // already ran inside ours) one stray tick reads as whole cores, so such a side says nothing (null, not noisy).
    if (this.#startBusy !== null && endBusy !== null && Date.now() - this.#startAt >= MIN_WINDOW_MS) {
      foreign = foreignCores(
        { atMs: this.#startAt, machineBusyTicks: this.#startBusy, ownTicks: 0 },
        { atMs: Date.now(), machineBusyTicks: endBusy, ownTicks: this.ownTicks() },
      );
    }
    return judgeSide(this.label, this.#before, this.#during, foreign, thresholdCores);
  }
}
