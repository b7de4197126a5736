/**
 * The application server's settings (`cluster up --set key=value`), with their defaults. A malformed value stops
 * the server at start with a message naming the key, rather than running with a surprise.
 */
import type { BucketLimits } from '@raftkit/http';

export interface AppSettings {
  /** Base of short_url; default http://<this server's HTTP address>. */
  publicUrl: string;
  /** Longest an edge-cache entry lives: the bound on how long another server keeps redirecting a deleted link. */
  edgeTtlMs: number;
  edgeEntries: number;
  /** How long a "no such code" answer is remembered (shields the store from scans of unknown codes). */
  negativeTtlMs: number;
  perKey: BucketLimits;
  perIp: BucketLimits;
  /** Most creates sent to the link store in one batch (one member call, one Raft entry). */
  createBatchMax: number;
}

const DEFAULTS = {
  edge_cache_ttl_ms: 5000,
  edge_cache_entries: 100_000,
  negative_cache_ttl_ms: 1000,
  create_rate_per_key: 10,
  create_burst_per_key: 100,
  create_rate_per_ip: 20,
  create_burst_per_ip: 200,
  create_batch_max: 256,
} as const;

/** The members refuse larger batches (MAX_BATCH_LINKS in members/api.ts). */
const BATCH_CAP = 1000;

/** Settings the app server reads: its own, and those its click emitter and GeoIP read (src/workers/clicks, CLICKS.md). */
const KNOWN = new Set([
  'public_url',
  ...Object.keys(DEFAULTS),
  'click_buffer',
  'click_block',
  'click_block_ms',
  'click_partitions',
  'trusted_country_header',
  'trusted_ip_header',
]);

export function appSettings(settings: Record<string, string>, httpAddress: string): AppSettings {
  const number = (key: keyof typeof DEFAULTS, min: number): number => {
    const text = settings[key];
    if (text === undefined) return DEFAULTS[key];
    const v = Number(text);
    if (text.trim() === '' || !Number.isFinite(v) || v < min)
      throw new RangeError(`setting ${key} must be a number >= ${min}, got ${JSON.stringify(text)}`);
    return v;
  };
  const publicUrl = (settings.public_url ?? `http://${httpAddress}`).replace(/\/+$/, '');
  if (!/^https?:\/\/[^/\s]+(\/\S*)?$/.test(publicUrl))
    throw new RangeError(`setting public_url must be an http(s) URL, got ${JSON.stringify(publicUrl)}`);
  return {
    publicUrl,
    edgeTtlMs: number('edge_cache_ttl_ms', 0),
    edgeEntries: number('edge_cache_entries', 1),
    negativeTtlMs: number('negative_cache_ttl_ms', 0),
    perKey: { refillRate: number('create_rate_per_key', 0.001), capacity: number('create_burst_per_key', 1) },
    perIp: { refillRate: number('create_rate_per_ip', 0.001), capacity: number('create_burst_per_ip', 1) },
    createBatchMax: batchMax(number('create_batch_max', 1)),
  };
}

function batchMax(v: number): number {
  if (!Number.isInteger(v) || v > BATCH_CAP)
    throw new RangeError(`setting create_batch_max must be an integer from 1 to ${BATCH_CAP}, got ${v}`);
  return v;
}

/** Settings this server does not know (other roles read the same map, so they are only logged). */
export function unknownSettings(settings: Record<string, string>): string[] {
  return Object.keys(settings).filter((k) => !KNOWN.has(k));
}
