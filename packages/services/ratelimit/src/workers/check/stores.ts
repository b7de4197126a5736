/**
 * The stores one check instance talks to: its region's shards, and the global stores (region 1) for strict rules.
 * One StoreClient (one pipelined connection) and one health state per store; a tenant's store is found once.
 *
 * Embedded stores (a cluster with no `store` workers): every check instance holds one counter shard in its own
 * process (shard i on check instance i, one region only). A check instance answers checks of the tenants its shard
 * holds with no store call on the wire, and reaches the other shards on the other check instances' binary
 * listeners, which serve the store protocol beside the check protocol.
 */
import type { PeerAddress, WorkerOptions } from '@raftkit/http';
import { shardFor, StoreClient, storeTopology } from '../store/client.js';
import { LocalStore, type StoreShard } from '../store/shard.js';
import type { Rule } from '../../rules.js';
import type { StoreLink } from './engine.js';
import { StoreHealth } from './health.js';
import { LocalBuckets } from './local-buckets.js';

/** True when the cluster has no store workers: the check instances hold the counters (see the module comment). */
export function embeddedStores(options: WorkerOptions): boolean {
  return !options.workers.some((w) => w.role === 'store');
}

export class StoreLinks {
  readonly region: number;
  private readonly links = new Map<string, StoreLink>();
  private readonly clients: { close(): void }[] = [];
  private readonly regional: PeerAddress[];
  private readonly global: PeerAddress[];
  private readonly regionalOf = new Map<string, StoreLink>();
  private readonly globalOf = new Map<string, StoreLink>();
  private readonly checks: number;
  private readonly checksInRegion: number;

  /** `shard`: this process's own counter shard, with embedded stores (null otherwise). */
  constructor(options: WorkerOptions, timeoutMs: number, shard: StoreShard | null = null) {
    const checks = options.workers.filter((w) => w.role === 'check');
    this.checks = Math.max(1, checks.length);
    if (shard !== null) {
      if ((options.settings.regions ?? '1') !== '1')
        throw new TypeError(
          'embedded stores (no store workers) serve one region only: add --workers store=S*R for regions',
        );
      this.region = 1;
      this.regional = checks;
      this.global = checks;
      this.checksInRegion = this.checks;
    } else {
      const topology = storeTopology(options.workers, options.settings);
      this.region = topology.regionOfCheck(options.index);
      this.regional = topology.storesOf(this.region);
      this.global = topology.globalStores;
      this.checksInRegion = Math.max(1, checks.filter((_, i) => topology.regionOfCheck(i + 1) === this.region).length);
    }
    const self = shard !== null ? checks[options.index - 1] : undefined;
    for (const peer of [...this.regional, ...this.global]) {
      if (this.links.has(peer.id)) continue;
      let store: StoreLink['store'] & { close(): void };
      if (shard !== null && peer.id === self?.id) {
        store = new LocalStore(shard);
      } else {
        if (peer.tcpAddress === undefined) throw new TypeError(`store ${peer.id} has no tcp address`);
        store = new StoreClient({ address: peer.tcpAddress, token: options.tokens[0]!, timeoutMs });
      }
      this.clients.push(store);
      this.links.set(peer.id, {
        id: peer.id,
        store,
        health: new StoreHealth(),
        fallback: new LocalBuckets(),
        inFlight: 0,
      });
    }
  }

  get all(): StoreLink[] {
    return [...this.links.values()];
  }

  /** The store holding `rule`'s counters: its tenant's shard, in this region or (strict rules) the global group. */
  storeFor(rule: Rule): StoreLink {
    const strict = rule.regionMode === 'strict';
    const memo = strict ? this.globalOf : this.regionalOf;
    let link = memo.get(rule.serviceId);
    if (link === undefined) {
      link = this.links.get(shardFor(strict ? this.global : this.regional, rule.serviceId).id)!;
      memo.set(rule.serviceId, link);
    }
    return link;
  }

  /** Check instances sharing `rule`'s counters: the region's, or every region's for strict rules. */
  instances(rule: Rule): number {
    return rule.regionMode === 'strict' ? this.checks : this.checksInRegion;
  }

  close(): void {
    for (const client of this.clients) client.close();
  }
}
