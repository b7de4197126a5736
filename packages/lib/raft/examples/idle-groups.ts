/**
 * Many idle groups: three OS processes (this script forks them), each a GroupHost holding the same 1,000 groups,
 * write one value to every group, let them go idle, then report each process's CPU over 10 s, with quiescence
 * and without. A measurement by hand, not a benchmark of the harness:
 *
 *   node packages/lib/raft/dist/examples/idle-groups.js [groups=1000]
 */
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GroupHost, type StateMachine } from '@raftkit/raft';

class Register implements StateMachine<string, string> {
  value = '';
  apply(value: string): string {
    return (this.value = value);
  }
  snapshot(): Uint8Array {
    return Buffer.from(this.value);
  }
  restore(data: Uint8Array): void {
    this.value = Buffer.from(data).toString();
  }
}

const IDS = ['h1', 'h2', 'h3'];
const BASE_PORT = 7401;

async function host(id: string, groups: number, quiesceTicks: number, dataDir: string): Promise<string> {
  const hosts = Object.fromEntries(IDS.map((h, i) => [h, `127.0.0.1:${BASE_PORT + i}`]));
  const h = await GroupHost.open({ id, listen: hosts[id]!, secret: 'idle-groups', dataDir, hosts, tickMs: 100, quiesceTicks });
  const names = Array.from({ length: groups }, (_, i) => `g${i}`);
  for (const name of names) await h.createGroup(name, { members: IDS, stateMachine: new Register() });
  await new Promise((resolve) => setTimeout(resolve, 15_000)); // every process has created every group
  if (id === 'h1') await Promise.all(names.map((name) => h.group<string, string>(name)!.propose('x').catch(() => null)));
  await new Promise((resolve) => setTimeout(resolve, 8_000)); // idle long enough to quiesce
  const before = process.cpuUsage();
  const started = Date.now();
  await new Promise((resolve) => setTimeout(resolve, 10_000));
  const used = process.cpuUsage(before);
  const percent = ((used.user + used.system) / 1000 / (Date.now() - started)) * 100;
  const quiesced = names.filter((name) => h.group(name)!.quiesced).length;
  return `${id}: ${percent.toFixed(1)}% of a core, ${quiesced} of ${groups} quiesced`;
}

const [role, groupsArg, quiesceArg, dir] = process.argv.slice(2);
if (role === undefined || role === String(Number(role))) {
  const groups = Number(role ?? 1000);
  for (const quiesceTicks of [20, 0]) {
    const dataDir = mkdtempSync(join(tmpdir(), 'idle-groups-'));
    const children = IDS.map((id) => fork(fileURLToPath(import.meta.url), [id, String(groups), String(quiesceTicks), join(dataDir, id)]));
    const lines = await Promise.all(children.map((child) => new Promise<string>((resolve) => child.once('message', (m) => resolve(String(m))))));
    console.log(`quiesceTicks ${quiesceTicks}: ${lines.join('; ')}`);
    for (const child of children) child.kill();
    await new Promise((resolve) => setTimeout(resolve, 500));
    rmSync(dataDir, { recursive: true, force: true });
  }
} else {
  process.send!(await host(role, Number(groupsArg), Number(quiesceArg), dir!));
  await new Promise(() => {}); // killed by the parent
}
