/**
 * Running a peer's server processes: Debian packages installed on demand, processes started with their output in
 * a log file and waited for until they listen, and stopped by pid.
 *
 * When a peer's binary is missing the harness installs its package with apt-get, as root, and says so on stderr;
 * it never installs anything silently or without root.
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onCleanup, removeLater, trackPid, untrackPid } from '../cleanup.js';
import { BenchError, freePortBlock, isAlive, portFree, runCommand, sleep, stopPid } from '../procs.js';

export async function ensureDebianPackage(binary: string, aptPackage: string): Promise<void> {
  if (existsSync(binary)) return;
  if (process.getuid?.() !== 0) {
    throw new BenchError(
      `${binary} is missing and installing it needs root: run \`apt-get install -y ${aptPackage}\` as root, then retry`,
    );
  }
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  process.stderr.write(`bench: ${binary} is missing; installing the Debian package ${aptPackage}\n`);
  process.stderr.write('bench: running apt-get update\n');
  const update = await runCommand('apt-get', ['update'], { timeoutMs: 10 * 60_000, env, echo: '  [apt] ' });
  if (update.code !== 0) throw new BenchError(`apt-get update failed (exit ${update.code})`);
  process.stderr.write(`bench: running apt-get install -y --no-install-recommends ${aptPackage}\n`);
  const install = await runCommand('apt-get', ['install', '-y', '--no-install-recommends', aptPackage], {
    timeoutMs: 15 * 60_000,
    env,
    echo: '  [apt] ',
  });
  if (install.code !== 0 || !existsSync(binary))
    throw new BenchError(`apt-get install ${aptPackage} failed (exit ${install.code})`);
  process.stderr.write(`bench: installed ${aptPackage}\n`);
}

export interface Daemon {
  name: string;
  pid: number;
  log: string;
}

/**
 * Start a server process with its output in `log` and track its pid for the exit-time SIGKILL. The caller keeps
 * the Daemon where its registered cleanup finds it before waiting for it (waitListening).
 */
export function spawnDaemon(
  name: string,
  cmd: string,
  args: string[],
  o: { log: string; env?: NodeJS.ProcessEnv },
): Daemon {
  const out = openSync(o.log, 'a');
  const child = spawn(cmd, args, { stdio: ['ignore', out, out], env: o.env ?? process.env });
  closeSync(out);
  if (child.pid === undefined) throw new BenchError(`could not start ${name} (${cmd})`);
  trackPid(child.pid);
  child.unref();
  return { name, pid: child.pid, log: o.log };
}

/** Wait until `daemon` listens on 127.0.0.1:`port`; fail naming its log when it exits first or takes too long. */
export async function waitListening(daemon: Daemon, port: number, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (!isAlive(daemon.pid)) throw new BenchError(`${daemon.name} exited at start; see ${daemon.log}`);
    if (!(await portFree(port))) return;
    if (Date.now() > deadline)
      throw new BenchError(
        `${daemon.name} did not listen on 127.0.0.1:${port} within ${timeoutMs / 1000} s; see ${daemon.log}`,
      );
    await sleep(50);
  }
}

/** Stop daemons started with spawnDaemon (SIGTERM, then SIGKILL) and forget their pids. */
export async function stopDaemons(daemons: Daemon[]): Promise<void> {
  await Promise.all(daemons.map((d) => stopPid(d.pid)));
  for (const d of daemons) untrackPid(d.pid);
}

/** `processes` Node servers of one script, each on its own loopback port, as the bare peers run them. */
export interface NodeServers {
  pids: number[];
  origins: string[];
  stop(): Promise<void>;
}

/**
 * Starts `processes` copies of `script` (a Node server taking its port as first argument, then `args`), each on its
 * own port, logs and cleanup in a temporary folder; `label` names them in messages ("bare node:http 302 servers").
 */
export async function startNodeServers(
  label: string,
  script: string,
  processes: number,
  args: string[] = [],
): Promise<NodeServers> {
  const dir = mkdtempSync(join(tmpdir(), 'raftkit-bench-servers-'));
  const removeDir = removeLater(dir);
  const daemons: Daemon[] = [];
  const stop = onCleanup(`stop the ${label}`, async () => {
    await stopDaemons(daemons);
    await removeDir();
  });
  const base = await freePortBlock(Array.from({ length: processes }, (_, i) => 1 + i));
  const origins = Array.from({ length: processes }, (_, i) => `http://127.0.0.1:${base + 1 + i}`);
  process.stderr.write(`bench: starting ${processes} ${label} on 127.0.0.1:${base + 1}-${base + processes}\n`);
  try {
    for (let i = 0; i < processes; i++) {
      const port = base + 1 + i;
      const daemon = spawnDaemon(`${label} ${i + 1}`, process.execPath, [script, String(port), ...args], {
        log: join(dir, `server-${i + 1}.log`),
      });
      daemons.push(daemon);
      await waitListening(daemon, port);
    }
  } catch (e) {
    await stop();
    throw e;
  }
  return { pids: daemons.map((d) => d.pid), origins, stop };
}
