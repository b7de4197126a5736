/**
 * The object store's replication (README "Object replication"): every object, chunk and tus upload lives on the N
 * stores of its group's placement (placement.ts), recorded in the metadata machine.
 *
 * - Writes: the store a client or worker reaches is the coordinator. It writes its own copy durably (when it is one
 *   of the replicas), forwards the bytes to the other replicas in parallel (the same paths, the cluster token and
 *   `x-replica-of: <coordinator>`, which a replica takes as "store it, forward nothing"), and acknowledges once a
 *   majority of the replicas (its own copy counted) hold them. A replica that missed it is repaired later.
 * - Repair: a copy found corrupt on a read is dropped and fetched again from a replica whose copy verifies.
 * - Anti-entropy: on start and every `object_sync_ms`, the store asks each peer for its index (an unchanged index
 *   costs one small answer), reads its own placement from the members, and copies what it should hold and lacks
 *   (or holds older), at most `object_sync_batch` objects a pass; a peer's tombstones drop copies deleted while this
 *   store was away. A store wiped and restarted empty is thus a full replica again after a few passes.
 */
import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { HttpError, type Logger, type PeerAddress } from '@raftkit/http';
import { Agent, request } from 'undici';
import { MetaClient } from '../../internal-client.js';
import { groupOf, majority, storesOf } from '../../placement.js';
import type { DiskStore, IndexedObject } from './disk.js';

/** The header a forwarded write carries: the coordinator's id. */
export const REPLICA_HEADER = 'x-replica-of';
export const OBJECT_AT_HEADER = 'x-object-at';

export interface Peer {
  id: string;
  url: string;
}

interface PeerIndex {
  epoch: string;
  generation: number;
  unchanged?: boolean;
  objects?: IndexedObject[];
  tombstones?: Array<{ key: string; at: number }>;
}

interface ReplicationOptions {
  selfId: string;
  /** Every store of the cluster (this one included), in id order. */
  stores: PeerAddress[];
  members: PeerAddress[];
  token: string;
  disk: DiskStore;
  logger: Logger;
  syncEveryMs: number;
  syncBatch: number;
}

export class Replication {
  readonly peers: Peer[];
  /** Random per process: a peer that sees it change re-reads the whole index (the generation restarted). */
  readonly epoch = randomBytes(8).toString('hex');
  private readonly agent = new Agent({ connections: 8, keepAliveTimeout: 10_000 });
  private readonly meta: MetaClient | null;
  private readonly placements = new Map<string, string[]>();
  private readonly repairing = new Set<string>();
  private readonly synced = new Map<string, string>();
  private timer: NodeJS.Timeout | null = null;
  private passRunning = false;
  private stopped = false;
  readonly stats = { forwarded: 0, forwardFailures: 0, repaired: 0, corruptRefused: 0, syncCopied: 0, syncDropped: 0 };

  constructor(private readonly o: ReplicationOptions) {
    this.peers = o.stores.filter((s) => s.id !== o.selfId).map((s) => ({ id: s.id, url: `http://${s.httpAddress}` }));
    this.meta = o.members.length > 0 && this.peers.length > 0 ? new MetaClient(o.members, o.token) : null;
  }

  /** Whether this cluster has more than one store (otherwise every call here is a no-op). */
  get replicated(): boolean {
    return this.peers.length > 0;
  }

  /** The stores holding `key` by its group's recorded placement ([self] in a single-store cluster). */
  async replicasOf(key: string): Promise<string[]> {
    const group = groupOf(key);
    if (!this.replicated || group === null || this.meta === null) return [this.o.selfId];
    const cacheKey = `${group.kind}:${group.id}`;
    const known = this.placements.get(cacheKey);
    if (known !== undefined) return known;
    // A placement never changes once recorded, so a member's own copy is as good as a linearizable read when it
    // has the record (no read barrier: a write after a quiet spell costs no round of heartbeats); only a member
    // that has not applied it yet sends us to the leader.
    const path = `/internal/video/${group.kind === 'upload' ? 'uploads' : 'videos'}/${group.id}`;
    const record =
      (await this.meta.find<{ stores: string[] | null }>(`${path}?consistency=serializable`)) ??
      (await this.meta.find<{ stores: string[] | null }>(path));
    if (record === null)
      throw new HttpError(404, 'not_found', `no ${group.kind} ${group.id}: its objects have no placement`, {
        [`${group.kind}_id`]: group.id,
      });
    const stores = storesOf(record);
    // Cached for the life of the process (bounded: dropped whole past 100 000 groups).
    if (this.placements.size >= 100_000) this.placements.clear();
    this.placements.set(cacheKey, stores);
    return stores;
  }

  /**
   * Waits until `send` succeeded for a majority of `replicas` (`localDone`: this store's own copy is one of them);
   * the rest keep going in the background and a failure there is left to anti-entropy. 503 `replicas_unavailable`
   * once a majority can no longer be reached.
   */
  async toMajority(
    replicas: string[],
    localDone: boolean,
    send: (peer: Peer) => Promise<void>,
    what: string,
  ): Promise<{ acked: string[]; settled: Promise<void> }> {
    const need = majority(replicas.length);
    const acked: string[] = localDone ? [this.o.selfId] : [];
    const targets = replicas
      .filter((id) => id !== this.o.selfId)
      .map((id) => this.peers.find((p) => p.id === id) ?? { id, url: '' });
    let failed = 0;
    const errors: string[] = [];
    let resolve!: () => void;
    let reject!: (e: Error) => void;
    const enough = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
    const check = (): void => {
      if (acked.length >= need) resolve();
      else if (replicas.length - failed < need)
        reject(
          new HttpError(
            503,
            'replicas_unavailable',
            `${what}: only ${acked.length} of ${replicas.length} replicas hold it, ${need} needed (${errors.join('; ')})`,
            { acked: [...acked] },
            { 'retry-after': '1' },
          ),
        );
    };
    check();
    const settled = Promise.all(
      targets.map(async (peer) => {
        try {
          if (peer.url === '') throw new Error(`${peer.id} is not a store of this cluster`);
          await send(peer);
          this.stats.forwarded++;
          acked.push(peer.id);
        } catch (error) {
          failed++;
          this.stats.forwardFailures++;
          errors.push(`${peer.id}: ${(error as Error).message}`);
          this.o.logger.log('warn', 'replica write failed (anti-entropy repairs it)', {
            what,
            peer: peer.id,
            error: (error as Error).message,
          });
        }
        check();
      }),
    ).then(() => undefined);
    await enough;
    return { acked, settled };
  }

  /** PUTs a file to a peer at `path` (a forwarded write), with extra headers; throws on any non-2xx. */
  async sendFile(
    peer: Peer,
    method: 'PUT' | 'PATCH' | 'POST',
    path: string,
    body: (() => Readable) | null,
    headers: Record<string, string>,
  ): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }> {
    const res = await request(peer.url + path, {
      method,
      headers: { authorization: `Bearer ${this.o.token}`, [REPLICA_HEADER]: this.o.selfId, ...headers },
      body: body === null ? null : body(),
      dispatcher: this.agent,
      headersTimeout: 120_000,
      bodyTimeout: 120_000,
    });
    const text = await res.body.text();
    return { status: res.statusCode, headers: res.headers, text };
  }

  /** Forwards the committed object `key` (file `file`) to a peer. */
  async sendObject(peer: Peer, key: string, file: string, info: { sha256: string }, at: number): Promise<void> {
    const r = await this.sendFile(peer, 'PUT', `/objects/${encodeKey(key)}`, () => createReadStream(file), {
      'x-content-sha256': info.sha256,
      [OBJECT_AT_HEADER]: String(at),
    });
    if (r.status !== 200) throw new Error(`answered ${r.status} ${r.text.slice(0, 200)}`);
  }

  /** Sends a JSON call (deletes) to every peer, best effort: a peer that misses it learns it from the tombstones. */
  async broadcast(method: 'DELETE' | 'POST', path: string, body?: object): Promise<void> {
    await Promise.all(
      this.peers.map(async (peer) => {
        try {
          const res = await request(peer.url + path, {
            method,
            headers: {
              authorization: `Bearer ${this.o.token}`,
              [REPLICA_HEADER]: this.o.selfId,
              ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
            },
            body: body === undefined ? null : JSON.stringify(body),
            dispatcher: this.agent,
            // Short: a peer that does not answer (paused, partitioned) learns the delete from the tombstones.
            headersTimeout: 5_000,
            bodyTimeout: 5_000,
          });
          await res.body.dump();
        } catch (error) {
          this.o.logger.log('warn', 'replica delete not delivered', { peer: peer.id, error: String(error) });
        }
      }),
    );
  }

  /**
   * Copies `key` from the first peer (of `from`, else any) whose copy verifies against `sha256` (when given) and
   * stores it with its original write time. True when a good copy was stored.
   */
  async fetchFrom(key: string, from: Peer[], expect: { sha256: string; at: number } | null): Promise<boolean> {
    for (const peer of from) {
      try {
        const res = await request(`${peer.url}/objects/${encodeKey(key)}`, {
          headers: { authorization: `Bearer ${this.o.token}`, [REPLICA_HEADER]: this.o.selfId },
          dispatcher: this.agent,
          headersTimeout: 60_000,
          bodyTimeout: 300_000,
        });
        if (res.statusCode !== 200) {
          await res.body.dump();
          continue;
        }
        const sha = String(res.headers['x-content-sha256'] ?? '');
        const at = Number(res.headers[OBJECT_AT_HEADER] ?? expect?.at ?? Date.now());
        const r = await this.o.disk.receive(res.body, 1024 ** 4);
        if (r.sha256 !== (expect?.sha256 ?? sha)) {
          await rm(r.tmp, { force: true });
          continue;
        }
        await this.o.disk.commitObject(key, r, Number.isSafeInteger(at) ? at : Date.now());
        return true;
      } catch (error) {
        this.o.logger.log('warn', 'replica fetch failed', { key, peer: peer.id, error: String(error) });
      }
    }
    return false;
  }

  /** A copy of `key` here failed its check: drop it and fetch a good one from the other replicas (in the background). */
  queueRepair(key: string): void {
    this.stats.corruptRefused++;
    if (this.repairing.has(key) || !this.replicated) return;
    this.repairing.add(key);
    const info = this.o.disk.indexed(key);
    void (async () => {
      const replicas = await this.replicasOf(key).catch(() => this.peers.map((p) => p.id));
      const from = this.peers.filter((p) => replicas.includes(p.id));
      await this.o.disk.deleteObject(key);
      if (await this.fetchFrom(key, from.length > 0 ? from : this.peers, null)) {
        this.stats.repaired++;
        this.o.logger.log('warn', 'corrupt object repaired from a replica', { key });
      } else if (info !== null) {
        this.o.logger.log('warn', 'corrupt object dropped; anti-entropy will copy it back', { key });
      }
    })()
      .catch((error: unknown) => this.o.logger.log('warn', 'repair failed', { key, error: String(error) }))
      .finally(() => this.repairing.delete(key));
  }

  // ---------------------------------------------------------------- anti-entropy

  start(): void {
    if (!this.replicated) return;
    const schedule = (ms: number): void => {
      if (this.stopped) return;
      this.timer = setTimeout(() => {
        void this.pass()
          .then((more) => schedule(more ? 200 : this.o.syncEveryMs))
          .catch((error: unknown) => {
            this.o.logger.log('warn', 'anti-entropy pass failed', { error: String(error) });
            schedule(this.o.syncEveryMs);
          });
      }, ms);
      this.timer.unref();
    };
    schedule(500);
  }

  /** One pass; true when it stopped at its batch limit (the next one follows at once). */
  async pass(): Promise<boolean> {
    if (this.passRunning || this.meta === null) return false;
    this.passRunning = true;
    try {
      const changed: Array<{ peer: Peer; index: PeerIndex }> = [];
      for (const peer of this.peers) {
        const index = await this.peerIndex(peer).catch(() => null);
        if (index !== null && index.unchanged !== true) changed.push({ peer, index });
      }
      if (changed.length === 0) return false;
      const mine = await this.meta.get<{ uploads: string[]; videos: string[] }>(
        `/internal/video/placement/${this.o.selfId}`,
      );
      const groups = new Set([...mine.uploads.map((id) => `upload:${id}`), ...mine.videos.map((id) => `video:${id}`)]);
      let budget = this.o.syncBatch;
      let more = false;
      for (const { peer, index } of changed) {
        let complete = true;
        for (const t of index.tombstones ?? []) {
          const have = this.o.disk.indexed(t.key);
          if (have !== null && have.at < t.at) {
            await this.o.disk.deleteObject(t.key, true, t.at);
            this.stats.syncDropped++;
          }
        }
        for (const obj of index.objects ?? []) {
          const g = groupOf(obj.key);
          if (g === null || !groups.has(`${g.kind}:${g.id}`)) continue;
          if ((this.o.disk.tombstoneOf(obj.key) ?? -1) >= obj.at) continue;
          const have = this.o.disk.indexed(obj.key);
          if (have !== null && (have.sha256 === obj.sha256 || have.at >= obj.at)) continue;
          // A video packed here keeps no warm copies: its archive holds them.
          if (g.kind === 'video' && (await this.o.disk.coldArchiveExists(g.id))) continue;
          if (budget <= 0) {
            complete = false;
            more = true;
            break;
          }
          budget--;
          if (await this.fetchFrom(obj.key, [peer], { sha256: obj.sha256, at: obj.at })) this.stats.syncCopied++;
          else complete = false;
        }
        if (complete) this.synced.set(peer.id, `${index.epoch}:${index.generation}`);
      }
      return more;
    } finally {
      this.passRunning = false;
    }
  }

  private async peerIndex(peer: Peer): Promise<PeerIndex> {
    const since = this.synced.get(peer.id) ?? '';
    const res = await request(`${peer.url}/internal/replica/index?since=${encodeURIComponent(since)}`, {
      headers: { authorization: `Bearer ${this.o.token}` },
      dispatcher: this.agent,
      headersTimeout: 10_000,
      bodyTimeout: 60_000,
    });
    const text = await res.body.text();
    if (res.statusCode !== 200) throw new Error(`${peer.id} answered ${res.statusCode}`);
    return JSON.parse(text) as PeerIndex;
  }

  /** The index answer for a peer: "unchanged" when `since` is this process's current epoch and generation. */
  indexAnswer(since: string | null): PeerIndex {
    const generation = this.o.disk.generation;
    if (since === `${this.epoch}:${generation}`) return { epoch: this.epoch, generation, unchanged: true };
    return { epoch: this.epoch, generation, ...this.o.disk.listing() };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    await this.meta?.close();
    await this.agent.close();
  }
}

export function encodeKey(key: string): string {
  return key.split('/').map(encodeURIComponent).join('/');
}
