/**
 * What a run has created on this machine, on disk, so that `jepsen-like clean` can remove it after the harness
 * crashed: namespaces, bridge, member and helper processes. One JSON file per run in the state directory, plus
 * one claim file per namespace slot (the slot picks the subnet 10.77.SLOT.0/24 and the names jlSLOT...).
 */
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const MAX_SLOT = 200;

export function stateDir(): string {
  // One directory per user, so that runs without root (proxy mode) never need a directory root created.
  const uid = typeof process.getuid === 'function' ? process.getuid() : 'user';
  const dir = process.env.JEPSEN_LIKE_STATE_DIR ?? join(tmpdir(), `jepsen-like-state-${uid}`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

interface RunState {
  runId: string;
  harnessPid: number;
  startedAt: string;
  mode: 'namespace' | 'proxy';
  outDir: string;
  slot: number | null;
  namespaces: string[];
  links: string[];
  /** Member id -> pid of the running process (null when stopped). */
  members: Record<string, number | null>;
  /** Helper processes (namespace proxies). */
  helpers: number[];
}

export class StateFile {
  readonly path: string;

  constructor(readonly state: RunState) {
    this.path = join(stateDir(), `run-${state.runId}.json`);
    this.save();
  }

  save(): void {
    const tmp = `${this.path}.tmp`;
    writeFileSync(tmp, JSON.stringify(this.state, null, 2));
    renameSync(tmp, this.path);
  }

  remove(): void {
    try {
      unlinkSync(this.path);
    } catch {
      // already gone
    }
  }
}

export function readRunStates(): { path: string; state: RunState }[] {
  const dir = stateDir();
  return readdirSync(dir)
    .filter((f) => /^run-.*\.json$/.test(f))
    .flatMap((f) => {
      try {
        return [{ path: join(dir, f), state: JSON.parse(readFileSync(join(dir, f), 'utf8')) as RunState }];
      } catch {
        return [];
      }
    });
}

export function pidAlive(pid: number | null | undefined): boolean {
  if (pid === null || pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Claims a free namespace slot for this process (a stale claim by a dead harness is taken over). */
export function claimSlot(preferred?: number): number {
  const dir = stateDir();
  const order = preferred !== undefined ? [preferred] : Array.from({ length: MAX_SLOT }, (_, i) => i + 1);
  for (const slot of order) {
    const path = join(dir, `slot-${slot}`);
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const fd = openSync(path, 'wx');
        writeSync(fd, String(process.pid));
        closeSync(fd);
        return slot;
      } catch {
        const owner = Number(readFileSync(path, 'utf8').trim());
        if (pidAlive(owner)) break;
        try {
          unlinkSync(path);
        } catch {
          // raced with another claimer
        }
      }
    }
  }
  throw new Error(
    preferred !== undefined
      ? `namespace slot ${preferred} is in use by a running harness`
      : 'no free namespace slot (run jepsen-like clean?)',
  );
}

export function releaseSlot(slot: number): void {
  const path = join(stateDir(), `slot-${slot}`);
  try {
    if (existsSync(path) && Number(readFileSync(path, 'utf8').trim()) === process.pid) unlinkSync(path);
  } catch {
    // nothing to release
  }
}

/** Slots whose claim belongs to a live harness other than this process. */
export function liveSlots(): Set<number> {
  const dir = stateDir();
  const live = new Set<number>();
  for (const f of readdirSync(dir)) {
    const m = /^slot-(\d+)$/.exec(f);
    if (m === null) continue;
    try {
      const owner = Number(readFileSync(join(dir, f), 'utf8').trim());
      if (pidAlive(owner) && owner !== process.pid) live.add(Number(m[1]));
    } catch {
      // unreadable claim: treat as stale
    }
  }
  return live;
}
