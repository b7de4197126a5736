/**
 * The SMS channel, reserved for critical notifications (the router and the fallback chain decide that; this sender
 * sends what it is given). One JSON POST /messages {to, body, reference, callback_url} per message to the provider's
 * HTTP API with the account's bearer token, the batch's requests at once on a keep-alive pool. 202 -> sent (the
 * provider id); the handset receipt arrives later at `callbackUrl` (the notify service's receipt endpoint), which
 * moves the delivery_log entry to delivered or failed. 400 for the number -> invalid_address; 429, 5xx, timeouts
 * -> retry.
 */
import { Pool } from 'undici';
import type { ChannelSender, OutboundMessage, SendOutcome } from './channel.js';

export interface SmsSenderOptions {
  /** The provider's base URL, e.g. http://127.0.0.1:9241. */
  baseUrl: string;
  token: string;
  /** Where the provider POSTs delivery receipts. */
  callbackUrl?: string;
  ratePerSecond?: number;
  maxBatch?: number;
  connections?: number;
  timeoutMs?: number;
}

export class SmsSender implements ChannelSender {
  readonly channel = 'sms' as const;
  readonly maxBatch: number;
  readonly ratePerSecond: number;
  private readonly pool: Pool;
  private readonly basePath: string;

  constructor(private readonly options: SmsSenderOptions) {
    this.maxBatch = options.maxBatch ?? 100;
    this.ratePerSecond = options.ratePerSecond ?? 100;
    const url = new URL(options.baseUrl);
    this.basePath = url.pathname.replace(/\/$/, '');
    this.pool = new Pool(url.origin, { connections: options.connections ?? 16, keepAliveTimeout: 30_000 });
  }

  send(batch: OutboundMessage[]): Promise<SendOutcome[]> {
    return Promise.all(batch.map((m) => this.sendOne(m)));
  }

  async sendOne(message: OutboundMessage): Promise<SendOutcome> {
    if (typeof message.to !== 'string') return { kind: 'invalid_address', reason: 'not a phone number' };
    const body = {
      to: message.to,
      body: message.subject !== undefined ? `${message.subject}\n${message.body}` : message.body,
      reference: message.notification_id,
      ...(this.options.callbackUrl !== undefined ? { callback_url: this.options.callbackUrl } : {}),
    };
    try {
      const res = await this.pool.request({
        method: 'POST',
        path: `${this.basePath}/messages`,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${this.options.token}` },
        body: JSON.stringify(body),
        headersTimeout: this.options.timeoutMs ?? 10_000,
        bodyTimeout: this.options.timeoutMs ?? 10_000,
      });
      const text = await res.body.text();
      if (res.statusCode === 202 || res.statusCode === 200 || res.statusCode === 201) {
        const id = (JSON.parse(text) as { id?: unknown }).id;
        if (typeof id !== 'string') return { kind: 'retry', reason: 'provider accepted without an id' };
        return { kind: 'sent', provider_message_id: id };
      }
      if (res.statusCode === 429 || res.statusCode >= 500) return { kind: 'retry', reason: `SMS provider answered ${res.statusCode}` };
      return { kind: 'invalid_address', reason: `SMS provider refused (${res.statusCode}): ${text.slice(0, 200)}` };
    } catch (e) {
      return { kind: 'retry', reason: `SMS provider unreachable: ${(e as Error).message}` };
    }
  }

  async close(): Promise<void> {
    await this.pool.close();
  }
}
