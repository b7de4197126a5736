/**
 * Where things live. State groups `notify.state.0..N-1` (NotifyMachine) hold users (by hash of user_id),
 * idempotency keys and segments (by hash of their id); templates are copied to every group. Queues are event-log
 * topics hosted by the same members: the ingestion topic partitioned by user_id (one user's events in order), and
 * one topic per (priority, channel), so a channel worker can always read critical before anything else.
 */
import { createHash } from 'node:crypto';
import { SlotGroups } from '@raftkit/http';
import type { LogClient } from '@raftkit/log';
import type { Channel, Priority } from './workers/delivery/channels/channel.js';

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

/** The topic of one (priority, channel): the design's queues, which the members create at setup. */
export function channelTopic(priority: Priority, channel: Channel): string {
  return `notify-${priority}-${channel}`;
}

/**
 * Where the router queues a channel's messages and how a channel worker reads them. The service runs one layout,
 * PRIORITY_LAYOUT; the interface exists so a program comparing designs (the benchmark's one-FIFO-per-channel
 * baseline, bench/src/peers/notify-fifo.ts) can start the same router and worker on another (startRouter,
 * startDelivery).
 */
export interface QueueLayout {
  /** The topic a message of this priority for this channel is queued on. */
  topic(priority: Priority, channel: Channel): string;
  /**
   * A channel worker's lanes, run side by side, sharing the provider's bucket: each asks its priorities' topics in
   * that order before every batch; a long-polling lane takes a message the moment it is queued.
   */
  readonly lanes: ReadonlyArray<{ priorities: readonly Priority[]; longPoll: boolean }>;
  /** Creates the layout's topics, if the members' setup does not (the router calls it once the setup is done). */
  setup?(log: LogClient): Promise<void>;
}

/**
 * The design: one topic per (priority, channel); a critical lane long-polls the critical topic (a critical message
 * never waits for a bulk batch) and a lane for the rest asks high, normal, low in that order.
 */
export const PRIORITY_LAYOUT: QueueLayout = {
  topic: channelTopic,
  lanes: [
    { priorities: ['critical'], longPoll: true },
    { priorities: ['high', 'normal', 'low'], longPoll: false },
  ],
};

/**
 * The delivery workers' membership group (coordinated by the first channel's critical topic): it spreads the
 * channels over the live workers. Each channel's offsets stay under deliveryGroup(channel).
 */
export const DELIVERY_MEMBERS_GROUP = 'notify-delivery';

/** The consumer group of a channel's workers on its topics (its committed offsets). */
export function deliveryGroup(channel: Channel): string {
  return `notify-delivery-${channel}`;
}
