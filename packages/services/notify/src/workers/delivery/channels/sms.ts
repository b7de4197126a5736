/**
 * The SMS channel, reserved for critical notifications (the router and the fallback chain decide that; this sender
 * sends what it is given). One JSON POST /messages {to, body, reference, callback_url} per message to the provider's
 * HTTP API with the account's bearer token, the batch's requests at once on a keep-alive pool. The reference is
 * the delivery's message_id; the provider echoes it in the receipt it POSTs later to the message's receipt_url (the
 * notify service's receipt endpoint), which moves the delivery_log entry to delivered or failed. 202 -> sent (the
 * provider id); 400 for the number -> invalid_address; 429, 5xx, timeouts -> retry.
 */
import { Pool } from 'undici';
import type { ChannelSender, OutboundMessage, SendOutcome, SenderContext } from './channel.js';
import { intSetting, providerWorker } from './settings.js';

export interface SmsSenderOptions {
  /** The provider's base URL, e.g. http://127.0.0.1:9243. */
  baseUrl: string;
  token: string;
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
    this.ratePerSecond = options.ratePerSecond ?? 200;
    const url = new URL(options.baseUrl);
    this.basePath = url.pathname.replace(/\/$/, '');
    this.pool = new Pool(url.origin, { connections: options.connections ?? 16, keepAliveTimeout: 30_000 });
  }

  send(batch: readonly OutboundMessage[]): Promise<SendOutcome[]> {
    return Promise.all(batch.map((m) => this.sendOne(m)));
  }

  async sendOne(message: OutboundMessage): Promise<SendOutcome> {
    if (message.address.channel !== 'sms') return { kind: 'invalid_address', reason: 'not a phone number' };
    const body = {
      to: message.address.phone,
      body: message.content.body,
      reference: message.message_id,
      ...(message.receipt_url !== undefined ? { callback_url: message.receipt_url } : {}),
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
      if (res.statusCode >= 200 && res.statusCode <= 202) {
        let id: unknown;
        try {
          id = (JSON.parse(text) as { id?: unknown }).id;
        } catch {
          id = undefined;
        }
        if (typeof id !== 'string') return { kind: 'retry', reason: 'provider accepted without an id' };
        return { kind: 'sent', provider_message_id: id };
      }
      if (res.statusCode === 429 || res.statusCode >= 500) {
        const after = Number(res.headers['retry-after']);
        return {
          kind: 'retry',
          reason: `SMS provider answered ${res.statusCode}`,
          ...(Number.isFinite(after) && after > 0 ? { retry_after_ms: after * 1000 } : {}),
        };
      }
      return { kind: 'invalid_address', reason: `SMS provider refused (${res.statusCode}): ${text.slice(0, 200)}` };
    } catch (e) {
      return { kind: 'retry', reason: `SMS provider unreachable: ${(e as Error).message}` };
    }
  }

  async close(): Promise<void> {
    await this.pool.close();
  }
}

/**
 * The cluster's SMS sender: the provider API at `--set sms_api_url=http://...` (bearer `sms_api_token`), else the
 * sms-provider stand-in with the cluster token; `sms_rate_per_second` (200).
 */
export async function createSmsSender(context: SenderContext): Promise<ChannelSender> {
  const baseUrl =
    context.settings.sms_api_url ?? `http://${providerWorker(context, 'sms-provider', 'sms_api_url').httpAddress}`;
  return new SmsSender({
    baseUrl,
    token: context.settings.sms_api_token ?? context.token,
    ratePerSecond: intSetting(context, 'sms_rate_per_second', 200),
  });
}
