/**
 * Placeholder of the channel interface, as the brief gives it, until s30-notify-svc commits the real one (this
 * file is theirs: on merge, theirs wins and the senders adapt).
 */
export type ChannelName = 'email' | 'push' | 'sms' | 'in_app';

/** A web push subscription as a browser's PushSubscription.toJSON() gives it. */
export interface PushSubscriptionJson {
  endpoint: string;
  keys: { p256dh: string; auth: string };
}

export interface OutboundMessage {
  notification_id: string;
  user_id: string;
  channel: ChannelName;
  priority: 'critical' | 'high' | 'normal' | 'low';
  /** The address: an email address, a phone number (E.164), or a push subscription. */
  to: string | PushSubscriptionJson;
  /** Rendered by the template (email: first line as subject when `subject` is absent). */
  subject?: string;
  body: string;
  data?: Record<string, unknown>;
}

export type SendOutcome =
  | { kind: 'sent'; provider_message_id: string }
  | { kind: 'delivered'; provider_message_id?: string }
  | { kind: 'bounced'; reason: string }
  | { kind: 'invalid_address'; reason: string }
  | { kind: 'retry'; reason: string };

export interface ChannelSender {
  channel: ChannelName;
  maxBatch: number;
  ratePerSecond: number;
  /** One outcome per message, in order; never throws for a provider failure (that is a `retry` outcome). */
  send(batch: OutboundMessage[]): Promise<SendOutcome[]>;
  close(): Promise<void>;
}
