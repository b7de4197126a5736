/**
 * Region sync: every interval, a store sends the counters changed since its last sync (the CounterTable's
 * snapshot) to the store of the same shard in every other region. A delta that cannot be delivered is kept for
 * that peer and merged into the next one, so a region that was unreachable learns what it missed when it returns.
 */
import type { Logger, PeerAddress } from '@raftkit/http';
import { RpcClient } from '@raftkit/rpc';
import type { CounterTable } from './counters.js';
import type { SyncEntry } from './protocol.js';

/** Counters per sync frame: keeps frames far below the wire's frame limit (an entry is ~60 to 200 bytes). */
const ENTRIES_PER_FRAME = 2_000;
/** Undelivered entries kept per peer; past this the backlog is dropped (eventual consistency, logged). */
const MAX_BACKLOG = 500_000;

interface RegionPeer {
  region: number;
  store: PeerAddress;
}

interface RegionSyncOptions {
  table: CounterTable;
  region: number;
  peers: RegionPeer[];
  token: string;
  syncMs: number;
  logger: Logger;
  onSent?(peerRegion: number, entries: number): void;
  onFailed?(peerRegion: number): void;
}

interface PeerLink {
  peer: RegionPeer;
  client: RpcClient;
  backlog: Map<string, SyncEntry>;
  busy: boolean;
}

export class RegionSync {
  private readonly links: PeerLink[];
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly options: RegionSyncOptions) {
    this.links = options.peers.map((peer) => {
      if (peer.store.tcpAddress === undefined) throw new TypeError(`store ${peer.store.id} has no tcp address`);
      return {
        peer,
        client: new RpcClient({
          address: peer.store.tcpAddress,
          token: options.token,
          timeoutMs: options.syncMs,
          maxFrameBytes: 8 << 20,
        }),
        backlog: new Map(),
        busy: false,
      };
    });
  }

  start(): void {
    this.timer = setInterval(() => this.tick(Date.now()), this.options.syncMs);
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    for (const link of this.links) link.client.close();
  }

  /** Takes the table's delta and sends it (with each peer's backlog) to every peer. */
  tick(now: number): void {
    const delta = this.options.table.snapshot(now);
    for (const link of this.links) {
      for (const entry of delta) addToBacklog(link.backlog, entry);
      if (link.backlog.size > MAX_BACKLOG) {
        this.options.logger.log('warn', 'region sync backlog dropped', {
          region: link.peer.region,
          entries: link.backlog.size,
        });
        link.backlog.clear();
      }
      // One send at a time per peer: a slow peer accumulates a backlog instead of parallel, reordered deltas.
      if (!link.busy && link.backlog.size > 0) void this.send(link);
    }
  }

  private async send(link: PeerLink): Promise<void> {
    link.busy = true;
    const entries = [...link.backlog.values()];
    link.backlog.clear();
    const frames: Promise<unknown>[] = [];
    for (let i = 0; i < entries.length; i += ENTRIES_PER_FRAME) {
      const counters = entries.slice(i, i + ENTRIES_PER_FRAME);
      frames.push(
        link.client.call({ t: 'sync', region: this.options.region, counters }).catch((error: unknown) => {
          // Entries that reached the backlog again since hold newer state: keep theirs, add our undelivered taken.
          for (const entry of counters) addToBacklog(link.backlog, entry, true);
          throw error;
        }),
      );
    }
    const results = await Promise.allSettled(frames);
    link.busy = false;
    if (results.some((r) => r.status === 'rejected')) this.options.onFailed?.(link.peer.region);
    else this.options.onSent?.(link.peer.region, entries.length);
  }
}

/** Merges an entry into a backlog: the newer state wins, the tokens taken add up (both were taken here). */
function addToBacklog(backlog: Map<string, SyncEntry>, entry: SyncEntry, older = false): void {
  const held = backlog.get(entry[0]);
  if (held === undefined) {
    backlog.set(entry[0], entry);
    return;
  }
  const newer = older ? held : entry;
  backlog.set(entry[0], [newer[0], newer[1], newer[2], newer[3], newer[4], held[5] + entry[5], newer[6], newer[7]]);
}
