/**
 * The "store" worker: one in-memory counter shard. Serves the store protocol (take, debit, ping, sync) on its tcp
 * address for holders of the cluster token, /healthz and /metrics on HTTP, sweeps idle counters, and with more
 * than one region syncs its changes to the same shard of every other region.
 */
import type { RunningWorker, WorkerOptions, WorkerRole } from '@raftkit/http';
import { MetricsRegistry, serveWorkerHttp } from '@raftkit/http';
import { serveRpc } from '@raftkit/rpc';
import { storeTopology } from './client.js';
import { StoreShard } from './shard.js';
import { RegionSync } from './sync.js';

/** `settings.region_sync_ms`: 1000 to 5000 (the spec's 1 to 5 s), default 1000. */
export function regionSyncMs(settings: Record<string, string>): number {
  const raw = settings.region_sync_ms ?? '1000';
  const ms = Number(raw);
  if (!/^\d+$/.test(raw) || ms < 1000 || ms > 5000)
    throw new TypeError(`region_sync_ms must be an integer from 1000 to 5000, got ${JSON.stringify(raw)}`);
  return ms;
}

async function startStore(options: WorkerOptions): Promise<RunningWorker> {
  const topology = storeTopology(options.workers, options.settings);
  const syncMs = regionSyncMs(options.settings);
  const region = ((options.index - 1) % topology.regions) + 1;
  const shardIndex = Math.floor((options.index - 1) / topology.regions);
  const metrics = new MetricsRegistry();
  const shard = new StoreShard({ regions: topology.regions, syncMs, region, metrics });
  const table = shard.table;
  const http = await serveWorkerHttp(options, {
    metrics,
    health: () => ({ region, shard: shardIndex, counters: table.size }),
  });
  const syncsSent = http.metrics.counter(
    'ratelimit_store_region_syncs_sent_total',
    'Region syncs delivered, by peer region',
  );
  const syncsFailed = http.metrics.counter(
    'ratelimit_store_region_syncs_failed_total',
    'Region syncs not delivered (kept for the next), by peer region',
  );

  const wire = await serveRpc({
    address: options.tcpAddress,
    tokens: options.tokens,
    logger: options.logger,
    name: 'ratelimit_store',
    metrics: http.metrics,
    // Region sync sends up to 8 MiB a frame (RegionSync's client); the check instances' takes stay far below.
    maxFrameBytes: 8 << 20,
    handler: (raw, { principal }) => shard.handle(raw, principal),
  });

  shard.start();
  let sync: RegionSync | null = null;
  if (topology.regions > 1) {
    const peers = [];
    for (let r = 1; r <= topology.regions; r++)
      if (r !== region) peers.push({ region: r, store: topology.storesOf(r)[shardIndex]! });
    sync = new RegionSync({
      table,
      region,
      peers,
      token: options.tokens[0]!,
      syncMs,
      logger: options.logger,
      onSent: (peer, entries) => {
        syncsSent.inc(1, { region: String(peer) });
        shard.syncEntries.inc(entries, { direction: 'sent' });
      },
      onFailed: (peer) => syncsFailed.inc(1, { region: String(peer) }),
    });
    sync.start();
  }
  options.logger.log('info', 'counter store ready', {
    region,
    shard: shardIndex,
    regions: topology.regions,
    syncMs,
    tcp: `${options.tcpAddress.slice(0, options.tcpAddress.lastIndexOf(':'))}:${wire.port}`,
  });

  return {
    httpPort: http.port,
    stop: async () => {
      shard.stop();
      sync?.stop();
      await Promise.all([wire.close(), http.close()]);
    },
  };
}

export const storeRole: WorkerRole = { role: 'store', count: 2, start: startStore };
