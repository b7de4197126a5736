/**
 * Port ranges for test clusters. A cluster on base B uses B+1.. (raft), B+41..B+60 and B+161..B+180 (workers) and
 * B+101.. (member HTTP). Bases lie below the kernel's ephemeral range (32768+), so outgoing connections never sit
 * on them, and each is reserved with an exclusive lock file, so test files running side by side never pick the
 * same one. A reservation whose process died is taken over.
 */
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const FIRST_BASE = 20_000;
const LAST_BASE = 32_400;
const STEP = 200;
const LOCKS = join(tmpdir(), 'raftkit-test-ports');

export interface PortRange {
  base: number;
  release(): void;
}

const OFFSETS = [...range(1, 15), ...range(41, 60), ...range(101, 115), ...range(161, 180)];

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Take the lock file of `base`, or take over one left by a dead process. */
function lock(base: number): boolean {
  const path = join(LOCKS, `${base}.lock`);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return true;
    } catch {
      let owner = NaN;
      try {
        owner = Number(readFileSync(path, 'utf8'));
      } catch {
        // removed meanwhile: try again
      }
      if (Number.isInteger(owner) && alive(owner)) return false;
      rmSync(path, { force: true });
    }
  }
  return false;
}

/** A base whose every port is free now, reserved for this process until `release()` (or its exit). */
export async function reservePorts(): Promise<PortRange> {
  mkdirSync(LOCKS, { recursive: true });
  const count = (LAST_BASE - FIRST_BASE) / STEP + 1;
  const start = Math.floor(Math.random() * count);
  for (let i = 0; i < count; i++) {
    const base = FIRST_BASE + ((start + i) % count) * STEP;
    if (!lock(base)) continue;
    const release = (): void => rmSync(join(LOCKS, `${base}.lock`), { force: true });
    if ((await Promise.all(OFFSETS.map((o) => isFree(base + o)))).every(Boolean)) {
      process.once('exit', release);
      return { base, release };
    }
    release();
  }
  throw new Error(`no free port range between ${FIRST_BASE} and ${LAST_BASE + 180}`);
}

/**
 * Blocks at the given bases shifted by one offset (a multiple of 200), each reserved as reservePorts does: for a
 * script that places several clusters at their default bases plus an offset (scripts/up-all.sh's PORT_OFFSET).
 */
export async function reserveShiftedPorts(bases: readonly number[]): Promise<{ offset: number; release(): void }> {
  mkdirSync(LOCKS, { recursive: true });
  const low = Math.ceil((FIRST_BASE - Math.min(...bases)) / STEP) * STEP;
  const high = LAST_BASE - Math.max(...bases);
  const offsets: number[] = [];
  for (let o = low; o <= high; o += STEP) if (bases.every((b) => (b + o - FIRST_BASE) % STEP === 0)) offsets.push(o);
  const start = Math.floor(Math.random() * offsets.length);
  for (let i = 0; i < offsets.length; i++) {
    const offset = offsets[(start + i) % offsets.length]!;
    const held: number[] = [];
    const release = (): void => {
      for (const b of held) rmSync(join(LOCKS, `${b}.lock`), { force: true });
    };
    let ok = true;
    for (const b of bases) {
      if (!lock(b + offset)) {
        ok = false;
        break;
      }
      held.push(b + offset);
    }
    if (ok) ok = (await Promise.all(bases.flatMap((b) => OFFSETS.map((o) => isFree(b + offset + o))))).every(Boolean);
    if (ok) {
      process.once('exit', release);
      return { offset, release };
    }
    release();
  }
  throw new Error(`no free offset for port blocks at ${bases.join(', ')} between ${FIRST_BASE} and ${LAST_BASE + 180}`);
}

/**
 * A port the kernel just handed out on 127.0.0.1 (for in-process servers a test starts itself). The one copy in the
 * repository: raft's tests and the jepsen-like harness import it too (testkit stands on no workspace package, so
 * even the bottom layer may use it as a dev dependency).
 */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve, reject) => {
    s.once('error', reject);
    s.listen(0, '127.0.0.1', resolve);
  });
  const port = (s.address() as { port: number }).port;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

/** `count` distinct free ports (the kernel may hand the same one out twice once it is released). */
export async function freePorts(count: number): Promise<number[]> {
  const ports: number[] = [];
  while (ports.length < count) {
    const port = await freePort();
    if (!ports.includes(port)) ports.push(port);
  }
  return ports;
}
