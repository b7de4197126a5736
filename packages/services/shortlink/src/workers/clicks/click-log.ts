/**
 * Where clicks live: the internal topic `shortlink-clicks` of the replicated event log (packages/platform/log),
 * hosted by the service's `clicklog` workers (three by default, each partition a Raft group on three of them), so
 * an acknowledged click survives the loss of any one process and its disk. A record is one block of clicks
 * (wire.ts), its msgpack bytes in base64 (the log's values are text).
 */
import type { PeerAddress } from '@raftkit/http';
import { LogClient, type TopicSettings } from '@raftkit/log';
import { workersOf } from './partition.js';
import { positiveIntSetting } from './settings.js';

/** The worker role hosting the click log, and how many `cluster up` starts (a partition's replicas are on 3). */
export const CLICK_LOG_ROLE = 'clicklog';
export const CLICK_LOG_HOSTS = 3;
export const CLICK_TOPIC = 'shortlink-clicks';

/**
 * The topic's partitions: `click_partitions` (default 1), fixed when the cluster is created (a link's clicks must
 * stay in one partition, see partition.ts). One is the default for the reasons in CLICKS.md "Partitions".
 */
export function clickPartitions(settings: Record<string, string>): number {
  return positiveIntSetting(settings, 'click_partitions', 1);
}

/**
 * How many analytics workers count each partition (`analytics_replicas`, default 1, at most the analytics workers):
 * with 2, a dead worker's links keep their stats, answered by the other copy, with no takeover to wait for; each copy
 * costs the counting CPU again.
 */
export function analyticsReplicas(settings: Record<string, string>): number {
  return positiveIntSetting(settings, 'analytics_replicas', 1);
}

/**
 * Retention: the log holds a partition's records in memory (on every replica), so it is bounded; 7 days or 256 MiB
 * (the log's largest) per partition. Analytics consumes within a moment, so retention only bounds a replay
 * (CLICKS.md "Replay").
 */
const CLICK_RETENTION = { max_age_ms: 7 * 24 * 3600 * 1000, max_bytes: 256 * 1024 * 1024 } as const;

function clickTopicSettings(partitions: number): TopicSettings {
  return { partitions, replicas: 3, retention: { ...CLICK_RETENTION }, access: 'internal' };
}

/** The click log's HTTP endpoints, from the cluster's workers. */
export function clickLogEndpoints(workers: readonly PeerAddress[]): string[] {
  return workersOf(workers, CLICK_LOG_ROLE).map((w) => `http://${w.httpAddress}`);
}

export function clickLogClient(workers: readonly PeerAddress[], token: string, timeoutMs = 5_000): LogClient {
  return new LogClient({ endpoints: clickLogEndpoints(workers), token, timeoutMs });
}

/** Creates the click topic (the same settings again are not an error; different ones are a 409, thrown). */
export async function ensureClickTopic(log: LogClient, partitions: number): Promise<void> {
  await log.createTopic(CLICK_TOPIC, clickTopicSettings(partitions));
}

export function encodeValue(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

export function decodeValue(value: string): Uint8Array {
  return Buffer.from(value, 'base64');
}
