/**
 * Proxy mode (no root needed): every member on 127.0.0.1, and in front of each member's Raft port a
 * {@link LinkProxy} owned by the harness. The address book every member bootstraps with (--peers) names the
 * proxies, so all Raft traffic between members passes through them; each proxy knows which member is sending
 * on a connection from the transport's hello frame, and so can cut or disturb each directed link separately.
 * The members' HTTP ports are reached directly by the clients.
 */
import { freePort } from '@raftkit/testkit';
import type { Link } from '../nemesis/grudge.js';
import type { LinkRule, MemberAddresses, Network, WorkerAddresses } from './network.js';
import { LinkProxy } from './proxy.js';

export class ProxyNetwork implements Network {
  readonly mode = 'proxy' as const;
  readonly packetFaults: 'proxy' | 'none';
  readonly notes: string[] = [];
  private readonly proxies = new Map<string, LinkProxy>();
  private readonly ports = new Map<string, { raft: number; http: number; proxy: number }>();

  constructor(
    private readonly ids: readonly string[],
    private readonly seed: number,
    packets: boolean,
  ) {
    this.packetFaults = packets ? 'proxy' : 'none';
  }

  async prepare(): Promise<void> {
    const taken = new Set<number>();
    const fresh = async (): Promise<number> => {
      for (;;) {
        const port = await freePort();
        if (!taken.has(port)) {
          taken.add(port);
          return port;
        }
      }
    };
    for (const id of this.ids) {
      const raft = await fresh();
      const http = await fresh();
      const proxy = new LinkProxy({
        targetId: id,
        listen: { host: '127.0.0.1', port: 0 },
        target: { host: '127.0.0.1', port: raft },
        seed: this.seed,
      });
      const proxyPort = await proxy.start();
      taken.add(proxyPort);
      this.proxies.set(id, proxy);
      this.ports.set(id, { raft, http, proxy: proxyPort });
    }
    this.notes.push(
      "proxy mode: partitions and packet faults are done by userspace proxies in front of each member's Raft port (no root, no kernel changes)",
    );
  }

  addresses(id: string): MemberAddresses {
    const p = this.ports.get(id)!;
    return {
      id,
      raftListen: `127.0.0.1:${p.raft}`,
      raftAdvertised: `127.0.0.1:${p.proxy}`,
      httpListen: `127.0.0.1:${p.http}`,
      httpUrl: `http://127.0.0.1:${p.http}`,
    };
  }

  wrap(_id: string, command: string, args: string[]): { command: string; args: string[] } {
    return { command, args };
  }

  async isolateWorkers(): Promise<boolean> {
    this.notes.push('proxy mode: the workers share the host loopback, so partitions never cut links between them');
    return false;
  }

  workerAddresses(): WorkerAddresses | null {
    return null;
  }

  wrapWorker(_id: string, command: string, args: string[]): { command: string; args: string[] } {
    return { command, args };
  }

  async setWorkerCuts(): Promise<void> {
    // Workers are never isolated here (isolateWorkers answers false), so there is no link between them to cut.
  }

  async setCuts(links: readonly Link[]): Promise<void> {
    for (const [id, proxy] of this.proxies) {
      proxy.setCut(links.filter((l) => l.endsWith(`>${id}`)).map((l) => l.slice(0, l.indexOf('>'))));
    }
  }

  async setPacketRules(rules: readonly LinkRule[]): Promise<void> {
    for (const [id, proxy] of this.proxies) {
      proxy.clearRules();
      for (const r of rules) if (r.to === id) proxy.setRule(r.from, r.rule);
    }
  }

  stats(): Record<string, LinkProxy['stats']> {
    return Object.fromEntries([...this.proxies].map(([id, p]) => [id, { ...p.stats }]));
  }

  async teardown(): Promise<void> {
    await Promise.all([...this.proxies.values()].map((p) => p.close()));
    this.proxies.clear();
  }
}
