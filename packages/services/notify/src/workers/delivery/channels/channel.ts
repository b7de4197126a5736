/**
 * The contract between the channel workers (which own queues, ordering, rate limits, retries, fallback and the
 * delivery log) and the code that talks to one provider (SMTP, Web Push, an SMS API, the in-app centre). A sender
 * knows nothing of queues: it gets a batch, tries it once, and says what happened to each message, in order.
 */
import type { Logger } from '@raftkit/http';

export const CHANNELS = ['sms', 'push', 'email', 'in_app'] as const;
export type Channel = (typeof CHANNELS)[number];

/** Drain order: every channel worker polls these sub-queues in this order between every batch. */
export const PRIORITIES = ['critical', 'high', 'normal', 'low'] as const;
export type Priority = (typeof PRIORITIES)[number];

/** A Web Push subscription as a browser's PushManager.subscribe() gives it (PushSubscription.toJSON()). */
export interface PushSubscription {
  endpoint: string;
  keys: { p256dh: string; auth: string };
}

/** Where a message goes, per channel; taken from the user's contact preferences at send time. */
export type Address =
  | { channel: 'email'; email: string }
  | { channel: 'sms'; phone: string }
  /** Every subscription the user has; the sender fans out and reports the ones the push service rejected. */
  | { channel: 'push'; subscriptions: PushSubscription[] }
  | { channel: 'in_app'; user_id: string };

/** The per-channel template, rendered by the router ({{variables}} from the event's data already substituted). */
export interface RenderedContent {
  /** Email subject, push title, in-app title. */
  title: string;
  body: string;
  /** The event's data, for senders that pass structured data on (push payload, in-app item). */
  data: Record<string, unknown>;
}

export interface OutboundMessage {
  /**
   * `${notification_id}:${user_id}:${channel}`: unique per delivery_log row. Senders give it to providers that
   * de-duplicate on a key (an SMTP Message-ID, an SMS API's idempotency key, a push topic).
   */
  message_id: string;
  notification_id: string;
  user_id: string;
  event_type: string;
  priority: Priority;
  channel: Channel;
  address: Address;
  content: RenderedContent;
  /** 1 on the first try; the worker counts. */
  attempt: number;
  /** Epoch ms at which the API accepted the event (for end-to-end latency). */
  accepted_at: number;
  /**
   * Where the provider posts delivery receipts later (SMS status callbacks, asynchronous email bounces):
   * POST {receipt_url} with a ReceiptUpdate body, bearer token of the cluster. Absent when no member is known.
   */
  receipt_url?: string;
}

/** What happened to one message of a batch, in the batch's order. */
export type SendOutcome =
  /** The provider acknowledged it (the delivery_log goes to `sent`, with provider_message_id). */
  | { kind: 'sent'; provider_message_id: string; invalid_subscriptions?: string[] }
  /** The provider confirmed delivery on the spot (in-app, a push service answering 201 to a delivered message). */
  | { kind: 'delivered'; provider_message_id: string; delivered_at: number; invalid_subscriptions?: string[] }
  /** A hard bounce: permanent; email is disabled for the user (the spec's transition). */
  | { kind: 'bounced'; reason: string; provider_message_id?: string }
  /**
   * The address is permanently unusable (every push subscription gone, a number the SMS provider rejects). The
   * listed push endpoints (410/404 from the push service) are removed from the user's contact.
   */
  | { kind: 'invalid_address'; reason: string; invalid_subscriptions?: string[] }
  /** A provider failure worth retrying (5xx, timeout, connection refused, 429); the worker backs off exponentially. */
  | { kind: 'retry'; reason: string; retry_after_ms?: number };

export interface ChannelSender {
  readonly channel: Channel;
  /** Most messages one send() takes (push: 500, the example provider's batch). */
  readonly maxBatch: number;
  /** The provider's limit; the worker's token bucket waits on it (backpressure, never drops). */
  readonly ratePerSecond: number;
  /** Never throws for a provider failure: that is a `retry` outcome. Returns exactly batch.length outcomes. */
  send(batch: readonly OutboundMessage[]): Promise<SendOutcome[]>;
  close?(): Promise<void>;
}

/** A delivery receipt a provider posts later to POST /v1/receipts (the member updates delivery_log). */
export interface ReceiptUpdate {
  message_id: string;
  provider_message_id?: string;
  status: 'delivered' | 'failed' | 'bounced';
  /** Epoch ms of the delivery (or of the failure). */
  at: number;
  reason?: string;
}

/** What a channel worker hands a sender factory: settings from `cluster up --set` and the processes of the cluster. */
export interface SenderContext {
  settings: Record<string, string>;
  /** Every worker of the cluster (the stand-in providers among them, by role). */
  workers: ReadonlyArray<{ id: string; role: string; httpAddress: string; tcpAddress?: string }>;
  /** The members' HTTP addresses (host:port), for senders that call the service back. */
  members: readonly string[];
  /** The cluster's bearer token. */
  token: string;
  dataDir: string;
  logger: Logger;
}

export type ChannelSenderFactory = (context: SenderContext) => Promise<ChannelSender>;

/** The message a WebSocket client of the in-app centre receives for each new item. */
export interface InAppItem {
  item_id: string;
  notification_id: string;
  user_id: string;
  event_type: string;
  priority: Priority;
  title: string;
  body: string;
  data: Record<string, unknown>;
  created_at: number;
  read: boolean;
}
