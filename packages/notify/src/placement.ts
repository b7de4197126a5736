/**
 * Where things live. State groups `notify.state.0..N-1` (NotifyMachine) hold users (by hash of user_id),
 * idempotency keys and segments (by hash of their id); templates are copied to every group. Queues are event-log
 * topics hosted by the same members: the ingestion topic partitioned by user_id (one user's events in order), and
 * one topic per (priority, channel), so a channel worker can always read critical before anything else.
 */
import { createHash } from 'node:crypto';
import { SlotGroups } from '@raftkit/http';
import type { Channel, Priority } from './channels/channel.js';

/** The service's name: its workers call the members with the `service.notify` token (deriveServiceToken). */
export const NOTIFY = 'notify';

/** Few groups: each costs Raft traffic on a small machine; users spread over them by hash. */
export const STATE_GROUPS = 4;
export const STATE_PREFIX = 'notify.state.';
const STATE = new SlotGroups(STATE_PREFIX);
/**
 * The ingestion queue, one topic per priority (each partitioned by user_id, so one user's events of a priority are
 * routed in order): a million-user bulk blast waiting in the low topic never delays the routing of a one-time code.
 */
export const INGEST_PARTITIONS = 2;
export function ingestTopic(priority: Priority): string {
  return `notify-ingest-${priority}`;
}
/**
 * Records of any notify topic that are not what the topic carries (not JSON, a wrong shape), with their reason and
 * where they were: one partition, created with the other topics at setup (so the same rules apply to it).
 */
export const DEAD_LETTER_TOPIC = 'notify-dead-letter';
/** The router's consumer group on the ingestion topic. */
export const ROUTER_GROUP = 'notify-router';

export function stateGroup(index: number): string {
  return STATE.name(index);
}

export function allStateGroups(): string[] {
  return Array.from({ length: STATE_GROUPS }, (_, i) => stateGroup(i));
}

/** The index of one of the state groups by its exact name (`notify.state.03` is none), else null. */
export function parseStateGroup(name: string): number | null {
  if (!STATE.includes(name)) return null;
  const index = Number(name.slice(STATE_PREFIX.length));
  return index < STATE_GROUPS && STATE.name(index) === name ? index : null;
}

/** The state group of a user, an idempotency key or a segment (namespaced so they spread independently). */
export function groupOf(kind: 'user' | 'key' | 'segment', id: string): string {
  const digest = createHash('sha256').update(`${kind}:${id}`).digest();
  return stateGroup(digest.readUInt32BE(0) % STATE_GROUPS);
}

/**
 * `priority` (the design): one topic per (priority, channel). `fifo` (the naive design, only for the benchmark's
 * comparison, `--set queue_layout=fifo`): one topic per channel carrying every priority in arrival order.
 */
export type QueueLayout = 'priority' | 'fifo';

export function parseLayout(text: string | undefined): QueueLayout {
  return text === 'fifo' ? 'fifo' : 'priority';
}

export function channelTopic(priority: Priority, channel: Channel, layout: QueueLayout = 'priority'): string {
  return layout === 'fifo' ? `notify-fifo-${channel}` : `notify-${priority}-${channel}`;
}

/** The consumer group of a channel's workers on its topics. */
export function deliveryGroup(channel: Channel): string {
  return `notify-delivery-${channel}`;
}
