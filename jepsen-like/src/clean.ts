/**
 * `jepsen-like clean`: removes what crashed runs left behind: member and helper processes (found through the
 * state files and, as a sweep, through the JEPSEN_LIKE_RUN variable in their environment), network namespaces
 * and links with our prefix (jlSLOT...), slot claims and state files. Runs of live harnesses are left alone
 * unless --force.
 */
import { readdirSync, readFileSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { commandExists, isRoot, runCommand } from './exec.js';
import { liveSlots, pidAlive, readRunStates, stateDir } from './state.js';

function environOf(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8');
  } catch {
    return null;
  }
}

function runIdOf(pid: number): string | null {
  const env = environOf(pid);
  if (env === null) return null;
  const entry = env.split('\0').find((e) => e.startsWith('JEPSEN_LIKE_RUN='));
  return entry === undefined ? null : entry.slice('JEPSEN_LIKE_RUN='.length);
}

function killHard(pid: number): boolean {
  try {
    process.kill(pid, 'SIGCONT');
    process.kill(pid, 'SIGKILL');
    return true;
  } catch {
    return false;
  }
}

export async function clean(options: { force: boolean; say: (line: string) => void }): Promise<number> {
  const { say } = options;
  let removed = 0;
  const live = new Set<string>();
  for (const { path, state } of readRunStates()) {
    const harnessAlive = pidAlive(state.harnessPid) && state.harnessPid !== process.pid;
    if (harnessAlive && !options.force) {
      live.add(state.runId);
      say(
        `run ${state.runId} (pid ${state.harnessPid}) is still running: left alone (use --force to remove it anyway)`,
      );
      continue;
    }
    for (const [id, pid] of Object.entries(state.members)) {
      if (pid !== null && runIdOf(pid) === state.runId && killHard(pid)) {
        say(`killed member ${id} (pid ${pid}) of run ${state.runId}`);
        removed++;
      }
    }
    for (const pid of state.helpers) {
      if (pidAlive(pid) && killHard(pid)) {
        say(`killed helper pid ${pid} of run ${state.runId}`);
        removed++;
      }
    }
    for (const ns of state.namespaces)
      if ((await runCommand('ip', ['netns', 'del', ns])).code === 0) removed++, say(`removed namespace ${ns}`);
    for (const link of state.links)
      if ((await runCommand('ip', ['link', 'del', link])).code === 0) removed++, say(`removed link ${link}`);
    if (state.slot !== null) {
      try {
        unlinkSync(join(stateDir(), `slot-${state.slot}`));
      } catch {
        // no claim
      }
    }
    unlinkSync(path);
    say(`removed state of run ${state.runId}`);
  }

  // Host-side veths vanish a moment after their namespace: give them that moment before sweeping.
  if (removed > 0) await new Promise((r) => setTimeout(r, 1_500));
  // Sweep: anything with our prefix whose slot no live harness holds.
  const held = options.force ? new Set<number>() : liveSlots();
  if (isRoot() && (await commandExists('ip'))) {
    const netns = await runCommand('ip', ['netns', 'list']);
    for (const line of netns.stdout.split('\n')) {
      const name = line.trim().split(/\s+/)[0] ?? '';
      const m = /^jl(\d+)-n\d+$/.exec(name) ?? /^jlprobe\d+$/.exec(name);
      if (m === null || (m[1] !== undefined && held.has(Number(m[1])))) continue;
      if ((await runCommand('ip', ['netns', 'del', name])).code === 0) removed++, say(`removed namespace ${name}`);
    }
    const links = await runCommand('ip', ['-o', 'link', 'show']);
    for (const line of links.stdout.split('\n')) {
      const name = /^\d+:\s+([^:@\s]+)/.exec(line)?.[1] ?? '';
      const m = /^jl(\d+)(?:br|v\d+|p\d+)$/.exec(name);
      if (m === null || held.has(Number(m[1]))) continue;
      if ((await runCommand('ip', ['link', 'del', name])).code === 0) removed++, say(`removed link ${name}`);
    }
  }
  if (process.platform === 'linux') {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      const pid = Number(entry);
      if (pid === process.pid) continue;
      const runId = runIdOf(pid);
      if (runId === null || live.has(runId)) continue;
      if (killHard(pid)) {
        say(`killed stray process ${pid} (run ${runId})`);
        removed++;
      }
    }
  }
  for (const f of readdirSync(stateDir())) {
    const m = /^slot-(\d+)$/.exec(f);
    if (m === null || held.has(Number(m[1]))) continue;
    try {
      const owner = Number(readFileSync(join(stateDir(), f), 'utf8').trim());
      if (!pidAlive(owner) || options.force) {
        unlinkSync(join(stateDir(), f));
        say(`removed stale slot claim ${f}`);
      }
    } catch {
      // gone
    }
  }
  say(removed === 0 ? 'clean: nothing to remove' : `clean: removed ${removed} leftover(s)`);
  return removed;
}
