/**
 * Namespace mode (root): each member in its own network namespace, joined to a bridge by a veth pair, with its
 * own address 10.77.SLOT.(10+i). Partitions are nftables drop rules inside the members' namespaces, so they cut
 * the real network: the kernel drops the packets, TCP stalls and retransmits as it would on a real LAN.
 *
 * A cut link a→b (a's Raft messages to b are lost) drops the packets of every TCP connection from a to b's Raft
 * port, in both directions (in b's namespace: from a to that port; in a's: from that port of b). Connections
 * from b to a are untouched, so one-way cuts are really one-way for Raft's one-way connections.
 *
 * Packet faults: tc netem on the member's interface when the kernel has it; otherwise (as on machines without
 * sch_netem) a userspace proxy runs inside each member's namespace in front of its Raft port (see proxy.ts).
 *
 * Names: bridge jlSLOTbr, namespaces jlSLOT-nI, host-side veths jlSLOTvI. Everything is removed on teardown; a
 * crashed harness leaves a state file from which `jepsen-like clean` removes it all.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import type { Link } from '../nemesis/grudge.js';
import { ensureDebianTools, run, runCommand } from '../exec.js';
import type { StateFile } from '../state.js';
import type { LinkRule, MemberAddresses, Network, WorkerAddresses } from './network.js';
import type { PacketRule } from './proxy.js';

export const RAFT_PORT = 7000;
const MEMBER_RAFT_PORT_BEHIND_PROXY = 7001;
export const HTTP_PORT = 8000;
/** An isolated worker's binary protocol port (a counter store's, say): the port worker partitions cut. */
export const WORKER_TCP_PORT = 9000;
/** Isolated workers take host numbers from here up in the slot's /24 (members take 11..). */
const WORKER_HOST_BASE = 100;

interface NamespaceOptions {
  slot: number;
  ids: readonly string[];
  seed: number;
  /** Whether packet faults will be injected, and how ('auto': netem when the kernel has it, else the proxy). */
  packets: 'none' | 'auto' | 'netem' | 'proxy';
  state: StateFile;
  say: (line: string) => void;
}

function namespaceName(slot: number, index: number): string {
  return `jl${slot}-n${index}`;
}

function workerNamespaceName(slot: number, index: number): string {
  return `jl${slot}-w${index}`;
}

function workerVethName(slot: number, index: number): string {
  return `jl${slot}w${index}`;
}

function bridgeName(slot: number): string {
  return `jl${slot}br`;
}

export function vethName(slot: number, index: number): string {
  return `jl${slot}v${index}`;
}

/** The nft script that makes `rules` the whole content of our table's input chain in one namespace. */
export function nftScript(rules: readonly string[]): string {
  return [
    'table inet jepsen {',
    '  chain input {',
    '    type filter hook input priority 0; policy accept;',
    '  }',
    '}',
    'flush chain inet jepsen input',
    ...rules.map((rule) => `add rule inet jepsen input ${rule}`),
    '',
  ].join('\n');
}

/** The drop rules each member's namespace needs for the cut links (member id -> rules). */
export function dropRules(
  links: readonly Link[],
  ipOf: (id: string) => string,
  raftPort: number,
): Map<string, string[]> {
  const rules = new Map<string, string[]>();
  const add = (id: string, rule: string): void => {
    const list = rules.get(id) ?? [];
    list.push(rule);
    rules.set(id, list);
  };
  for (const l of links) {
    const [from, to] = l.split('>') as [string, string];
    add(to, `ip saddr ${ipOf(from)} tcp dport ${raftPort} drop`);
    add(from, `ip saddr ${ipOf(to)} tcp sport ${raftPort} drop`);
  }
  return rules;
}

/** The tc arguments for a netem rule (applied to all traffic leaving a member). */
export function netemArgs(rule: PacketRule): string[] {
  const args = ['delay', `${Math.max(rule.delayMs, rule.reorder > 0 ? Math.max(rule.reorderDelayMs, 1) : 0)}ms`];
  if (rule.jitterMs > 0) args.push(`${rule.jitterMs}ms`);
  if (rule.loss > 0) args.push('loss', `${(rule.loss * 100).toFixed(1)}%`);
  if (rule.reorder > 0) args.push('reorder', `${((1 - rule.reorder) * 100).toFixed(1)}%`);
  return args;
}

class ProxyChild {
  private queue: Promise<void> = Promise.resolve();
  private readonly waiting: Array<(line: string) => void> = [];

  constructor(readonly child: ChildProcess) {
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => this.waiting.shift()?.(line));
  }

  nextLine(timeoutMs = 10_000): Promise<string> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('proxy did not answer')), timeoutMs);
      this.waiting.push((line) => {
        clearTimeout(timer);
        resolve(line);
      });
    });
  }

  send(command: unknown): Promise<void> {
    this.queue = this.queue.then(async () => {
      const answer = this.nextLine();
      this.child.stdin!.write(JSON.stringify(command) + '\n');
      const line = await answer;
      if (line !== 'ok') throw new Error(`proxy: ${line}`);
    });
    return this.queue;
  }
}

export class NamespaceNetwork implements Network {
  readonly mode = 'namespace' as const;
  packetFaults: 'netem' | 'proxy' | 'none' = 'none';
  readonly notes: string[] = [];
  private readonly indexOf = new Map<string, number>();
  private readonly workerIndexOf = new Map<string, number>();
  private readonly proxies = new Map<string, ProxyChild>();
  private readonly appliedRules = new Map<string, string>();
  private readonly netemOn = new Set<string>();
  private created = false;
  private tornDown = false;

  constructor(private readonly options: NamespaceOptions) {
    options.ids.forEach((id, i) => this.indexOf.set(id, i + 1));
  }

  private ns(id: string): string {
    return namespaceName(this.options.slot, this.indexOf.get(id)!);
  }

  ip(id: string): string {
    return `10.77.${this.options.slot}.${10 + this.indexOf.get(id)!}`;
  }

  get bridgeIp(): string {
    return `10.77.${this.options.slot}.1`;
  }

  async prepare(): Promise<void> {
    const { slot, ids, state, say } = this.options;
    await ensureDebianTools({ ip: 'iproute2', nft: 'nftables', tc: 'iproute2' }, say);
    const bridge = bridgeName(slot);
    // Leftovers of a crashed run in this slot go first (createNamespace drops a namespace of the same name).
    await runCommand('ip', ['link', 'del', bridge]);
    this.created = true;
    state.state.links.push(bridge);
    state.save();
    await run('ip', ['link', 'add', bridge, 'type', 'bridge']);
    await run('ip', ['addr', 'add', `${this.bridgeIp}/24`, 'dev', bridge]);
    await run('ip', ['link', 'set', bridge, 'up']);
    for (const id of ids) {
      const i = this.indexOf.get(id)!;
      await this.createNamespace(namespaceName(slot, i), vethName(slot, i), `jl${slot}p${i}`, this.ip(id));
    }
    if (this.options.packets !== 'none') await this.choosePacketFaults();
  }

  /** A namespace joined to the slot's bridge by a veth pair, with `ip` on its eth0 and an empty nft table. */
  private async createNamespace(ns: string, veth: string, peer: string, ip: string): Promise<void> {
    const { slot, state } = this.options;
    state.state.namespaces.push(ns);
    state.state.links.push(veth);
    state.save();
    await runCommand('ip', ['netns', 'del', ns]);
    await run('ip', ['netns', 'add', ns]);
    await run('ip', ['link', 'add', veth, 'type', 'veth', 'peer', 'name', peer]);
    await run('ip', ['link', 'set', peer, 'netns', ns]);
    await run('ip', ['-n', ns, 'link', 'set', peer, 'name', 'eth0']);
    await run('ip', ['-n', ns, 'addr', 'add', `${ip}/24`, 'dev', 'eth0']);
    await run('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
    await run('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    await run('ip', ['link', 'set', veth, 'master', bridgeName(slot)]);
    await run('ip', ['link', 'set', veth, 'up']);
    await run('ip', ['netns', 'exec', ns, 'nft', '-f', '-'], { input: nftScript([]) });
  }

  async isolateWorkers(ids: readonly string[]): Promise<boolean> {
    const { slot } = this.options;
    for (const id of ids) {
      if (this.workerIndexOf.has(id)) continue;
      const i = this.workerIndexOf.size + 1;
      this.workerIndexOf.set(id, i);
      await this.createNamespace(
        workerNamespaceName(slot, i),
        workerVethName(slot, i),
        `jl${slot}q${i}`,
        this.workerIp(id)!,
      );
    }
    return true;
  }

  private workerIp(id: string): string | null {
    const i = this.workerIndexOf.get(id);
    return i === undefined ? null : `10.77.${this.options.slot}.${WORKER_HOST_BASE + i}`;
  }

  workerAddresses(id: string): WorkerAddresses | null {
    const ip = this.workerIp(id);
    return ip === null ? null : { http: `${ip}:${HTTP_PORT}`, tcp: `${ip}:${WORKER_TCP_PORT}` };
  }

  wrapWorker(id: string, command: string, args: string[]): { command: string; args: string[] } {
    const i = this.workerIndexOf.get(id);
    if (i === undefined) return { command, args };
    return { command: 'ip', args: ['netns', 'exec', workerNamespaceName(this.options.slot, i), command, ...args] };
  }

  async setWorkerCuts(links: readonly Link[]): Promise<void> {
    const rules = dropRules(links, (id) => this.workerIp(id)!, WORKER_TCP_PORT);
    await Promise.all(
      [...this.workerIndexOf].map(async ([id, i]) => {
        const ns = workerNamespaceName(this.options.slot, i);
        const script = nftScript(rules.get(id) ?? []);
        if (this.appliedRules.get(ns) === script) return;
        await run('ip', ['netns', 'exec', ns, 'nft', '-f', '-'], { input: script });
        this.appliedRules.set(ns, script);
      }),
    );
  }

  private async choosePacketFaults(): Promise<void> {
    const first = this.ns(this.options.ids[0]!);
    let netem = false;
    if (this.options.packets !== 'proxy') {
      const probe = await runCommand('ip', [
        'netns',
        'exec',
        first,
        'tc',
        'qdisc',
        'add',
        'dev',
        'eth0',
        'root',
        'netem',
        'delay',
        '1ms',
      ]);
      netem = probe.code === 0;
      if (netem) await runCommand('ip', ['netns', 'exec', first, 'tc', 'qdisc', 'del', 'dev', 'eth0', 'root']);
      else {
        const why = probe.stderr.trim().split('\n')[0] ?? '';
        if (this.options.packets === 'netem') throw new Error(`tc netem is not available in this kernel (${why})`);
        this.notes.push(
          `tc netem is not available (${why}): packet faults (latency, loss, reordering) go through userspace proxies inside the namespaces`,
        );
      }
    }
    this.packetFaults = netem ? 'netem' : 'proxy';
    if (netem) {
      this.notes.push("packet faults through tc netem on each member's interface (all traffic leaving the member)");
      return;
    }
    const script = fileURLToPath(new URL('./proxy-main.js', import.meta.url));
    for (const id of this.options.ids) {
      const child = spawn(
        'ip',
        [
          'netns',
          'exec',
          this.ns(id),
          process.execPath,
          script,
          '--target-id',
          id,
          '--listen',
          `${this.ip(id)}:${RAFT_PORT}`,
          '--target',
          `127.0.0.1:${MEMBER_RAFT_PORT_BEHIND_PROXY}`,
          '--seed',
          String(this.options.seed),
        ],
        { stdio: ['pipe', 'pipe', 'inherit'] },
      );
      const proxy = new ProxyChild(child);
      const ready = await proxy.nextLine(15_000);
      if (!ready.startsWith('ready')) throw new Error(`proxy for ${id} did not start: ${ready}`);
      this.proxies.set(id, proxy);
      if (child.pid !== undefined) this.options.state.state.helpers.push(child.pid);
      this.options.state.save();
    }
  }

  addresses(id: string): MemberAddresses {
    const ip = this.ip(id);
    const behindProxy = this.packetFaults === 'proxy';
    return {
      id,
      raftListen: behindProxy ? `127.0.0.1:${MEMBER_RAFT_PORT_BEHIND_PROXY}` : `${ip}:${RAFT_PORT}`,
      raftAdvertised: `${ip}:${RAFT_PORT}`,
      httpListen: `${ip}:${HTTP_PORT}`,
      httpUrl: `http://${ip}:${HTTP_PORT}`,
    };
  }

  wrap(id: string, command: string, args: string[]): { command: string; args: string[] } {
    return { command: 'ip', args: ['netns', 'exec', this.ns(id), command, ...args] };
  }

  async setCuts(links: readonly Link[]): Promise<void> {
    const rules = dropRules(links, (id) => this.ip(id), RAFT_PORT);
    await Promise.all(
      this.options.ids.map(async (id) => {
        const script = nftScript(rules.get(id) ?? []);
        if (this.appliedRules.get(id) === script) return;
        await run('ip', ['netns', 'exec', this.ns(id), 'nft', '-f', '-'], { input: script });
        this.appliedRules.set(id, script);
      }),
    );
  }

  async setPacketRules(rules: readonly LinkRule[]): Promise<void> {
    if (this.packetFaults === 'proxy') {
      await Promise.all(
        [...this.proxies].map(async ([id, proxy]) => {
          await proxy.send({ clear: true });
          for (const r of rules.filter((x) => x.to === id))
            await proxy.send({ rule: { source: r.from, rule: r.rule } });
        }),
      );
      return;
    }
    if (this.packetFaults === 'netem') {
      // netem shapes a member's outgoing traffic as a whole: one rule per sending member.
      const bySource = new Map<string, PacketRule>();
      for (const r of rules) if (!bySource.has(r.from)) bySource.set(r.from, r.rule);
      for (const id of this.options.ids) {
        const rule = bySource.get(id);
        if (rule !== undefined) {
          await run('ip', [
            'netns',
            'exec',
            this.ns(id),
            'tc',
            'qdisc',
            'replace',
            'dev',
            'eth0',
            'root',
            'netem',
            ...netemArgs(rule),
          ]);
          this.netemOn.add(id);
        } else if (this.netemOn.has(id)) {
          await runCommand('ip', ['netns', 'exec', this.ns(id), 'tc', 'qdisc', 'del', 'dev', 'eth0', 'root']);
          this.netemOn.delete(id);
        }
      }
    }
  }

  async teardown(): Promise<void> {
    if (this.tornDown || !this.created) return;
    this.tornDown = true;
    for (const proxy of this.proxies.values()) {
      proxy.child.stdin?.end();
      proxy.child.kill('SIGTERM');
    }
    this.proxies.clear();
    const { slot, ids } = this.options;
    for (let i = 1; i <= ids.length; i++) await runCommand('ip', ['netns', 'del', namespaceName(slot, i)]);
    for (let i = 1; i <= ids.length; i++) await runCommand('ip', ['link', 'del', vethName(slot, i)]);
    for (const i of this.workerIndexOf.values()) {
      await runCommand('ip', ['netns', 'del', workerNamespaceName(slot, i)]);
      await runCommand('ip', ['link', 'del', workerVethName(slot, i)]);
    }
    await runCommand('ip', ['link', 'del', bridgeName(slot)]);
  }
}
