/** Topic names, their partitions' group names, and the partitioner that clients and members share. */
import type { GroupRecord } from '@raftkit/raft';
import type { Retention } from './machine.js';

/** Topic names: no dots, so a partition's group name `log.<topic>.<partition>` reads back unambiguously. */
export const TOPIC_NAME = /^[A-Za-z0-9_-]{1,100}$/;
export const GROUP_PREFIX = 'log.';
export const MAX_PARTITIONS = 1024;

/**
 * Who besides the service's internal callers (the cluster token, the service's own workers) may use a topic:
 * - `internal`: nobody else; a client token is refused every append, fetch, offset and description (403);
 * - `client_read`: clients fetch records, read consumer offsets and describe it; they append and commit nothing;
 * - `client_write`: clients also append and commit consumer offsets.
 */
export type TopicAccess = 'internal' | 'client_read' | 'client_write';
export const TOPIC_ACCESS: readonly TopicAccess[] = ['internal', 'client_read', 'client_write'];

export interface TopicInfo {
  name: string;
  partitions: number;
  replicas: number;
  retention: Retention;
  access: TopicAccess;
}

/** What the meta group records about each partition's group. */
export interface PartitionData extends TopicInfo {
  partition: number;
}

export function partitionGroup(topic: string, partition: number): string {
  return `${GROUP_PREFIX}${topic}.${partition}`;
}

/** The topic and partition of a partition group's name, or null when the name is not one. */
export function parsePartitionGroup(name: string): { topic: string; partition: number } | null {
  if (!name.startsWith(GROUP_PREFIX)) return null;
  const dot = name.lastIndexOf('.');
  const topic = name.slice(GROUP_PREFIX.length, dot);
  const partition = Number(name.slice(dot + 1));
  if (!TOPIC_NAME.test(topic) || !Number.isInteger(partition) || partition < 0) return null;
  return { topic, partition };
}

/** The partition data of a meta record, or null when the record is not a partition of the log. */
export function partitionData(record: GroupRecord): PartitionData | null {
  const d = record.data as Partial<PartitionData>;
  if (parsePartitionGroup(record.name) === null || typeof d.name !== 'string' || typeof d.partition !== 'number')
    return null;
  return d as PartitionData;
}

/**
 * The topics recorded in the meta group's groups. A topic recorded before topics had an access rule has
 * `defaultAccess`, the rule of the service that hosts the log (internal on notify and feed).
 */
export function topicsOf(
  records: readonly GroupRecord[],
  defaultAccess: TopicAccess,
): Map<string, { info: TopicInfo; partitions: GroupRecord[] }> {
  const topics = new Map<string, { info: TopicInfo; partitions: GroupRecord[] }>();
  for (const record of records) {
    const data = partitionData(record);
    if (data === null) continue;
    let topic = topics.get(data.name);
    if (topic === undefined) {
      const access = TOPIC_ACCESS.includes(data.access) ? data.access : defaultAccess;
      topic = {
        info: {
          name: data.name,
          partitions: data.partitions,
          replicas: data.replicas,
          retention: data.retention,
          access,
        },
        partitions: [],
      };
      topics.set(data.name, topic);
    }
    topic.partitions[data.partition] = record;
  }
  return topics;
}

/**
 * The partition of a key: FNV-1a (32 bits) of its UTF-8 bytes, modulo the partition count. Clients and members
 * use this one function, so records of one key stay in one partition, in order.
 */
export function partitionOf(key: string, partitions: number): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(key, 'utf8')) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % partitions;
}
