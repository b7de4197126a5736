/**
 * The Web Push channel: each message is encrypted for each of the user's subscriptions (RFC 8291 `aes128gcm`, by
 * the `web-push` library) and carries the service's VAPID JWT (RFC 8292, signed once per push service origin and
 * reused for hours), then POSTed to the subscription's endpoint.
 *
 * Web Push has NO batch request: RFC 8030 is one POST per message per subscription. The spec's "500 messages per
 * batch request" is kept as the sender's batch: up to 500 messages whose requests all go out at once over an
 * HTTP/1.1 keep-alive pool per push service origin (undici), each request with its own answer. Per subscription:
 * 201/202 -> accepted (the Location is the provider's message id); 404/410 -> gone; any other 4xx (a bad JWT, a
 * key the service cannot encrypt for, too large) -> refused for good; 429, 5xx, a timeout or a refused connection
 * -> transient. Per message: sent when any subscription accepted it (gone/refused ones listed in
 * invalid_subscriptions for the core to remove; a transient failure on another device of the same user is not
 * retried, as that would resend to the devices that have it); else retry when any failure was transient; else
 * invalid_address with every subscription listed.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Pool } from 'undici';
import webpush from 'web-push';
import type { ChannelSender, OutboundMessage, PushSubscription, SendOutcome, SenderContext } from './channel.js';
import { intSetting } from './settings.js';

export const PUSH_BATCH = 500;
/** Messages of a batch encrypted (and their requests started) in one turn of the event loop. */
const ENCRYPT_SLICE = 25;

export interface VapidKeys {
  publicKey: string;
  privateKey: string;
}

/**
 * The service's VAPID key pair, generated once into `path` and read back after (every push worker of a cluster
 * points at the same file, so subscriptions made for the public key stay valid across restarts). The exclusive
 * create makes two workers starting together agree on one pair.
 */
export function loadOrCreateVapidKeys(path: string): VapidKeys {
  if (!existsSync(path)) {
    mkdirSync(dirname(path), { recursive: true });
    const keys = webpush.generateVAPIDKeys();
    try {
      writeFileSync(path, JSON.stringify(keys), { flag: 'wx', mode: 0o600 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
  }
  const keys = JSON.parse(readFileSync(path, 'utf8')) as Partial<VapidKeys>;
  if (typeof keys.publicKey !== 'string' || typeof keys.privateKey !== 'string')
    throw new Error(`${path} does not hold VAPID keys`);
  return { publicKey: keys.publicKey, privateKey: keys.privateKey };
}

export interface PushSenderOptions {
  vapid: VapidKeys;
  /** The VAPID `sub` contact (mailto: or https:). */
  subject: string;
  /** Provider limit, messages per second (the worker's token bucket). */
  ratePerSecond?: number;
  /** Keep-alive connections per push service origin. */
  connections?: number;
  /** Seconds the push service keeps an undelivered message (RFC 8030 TTL). */
  ttlSeconds?: number;
  timeoutMs?: number;
}

export class PushSender implements ChannelSender {
  readonly channel = 'push' as const;
  readonly maxBatch = PUSH_BATCH;
  readonly ratePerSecond: number;
  private readonly pools = new Map<string, Pool>();
  private readonly vapidCache = new Map<string, { header: string; renewAt: number }>();

  constructor(private readonly options: PushSenderOptions) {
    this.ratePerSecond = options.ratePerSecond ?? 5_000;
  }

  /**
   * Every request of the batch at once on the pools; one outcome per message, in order. Each message is encrypted
   * before its request starts (an ECDH per subscription), so the batch is started ENCRYPT_SLICE messages at a time
   * with a turn of the event loop between slices: a bulk batch of 500 then never holds the process (a critical
   * batch's fetch, send and record on the same event loop) for the whole batch's encryption at once.
   */
  async send(batch: readonly OutboundMessage[]): Promise<SendOutcome[]> {
    const answers: Array<Promise<SendOutcome>> = [];
    for (let i = 0; i < batch.length; i += ENCRYPT_SLICE) {
      if (i > 0) await new Promise<void>((r) => setImmediate(r));
      for (const m of batch.slice(i, i + ENCRYPT_SLICE)) answers.push(this.sendOne(m));
    }
    return Promise.all(answers);
  }

  async sendOne(message: OutboundMessage): Promise<SendOutcome> {
    if (message.address.channel !== 'push') return { kind: 'invalid_address', reason: 'not a push address' };
    const subscriptions = message.address.subscriptions;
    if (subscriptions.length === 0)
      return { kind: 'invalid_address', reason: 'no push subscription', invalid_subscriptions: [] };
    // The service worker's payload: small JSON (a push message body is at most 4096 bytes encrypted).
    const payload = JSON.stringify({
      notification_id: message.notification_id,
      message_id: message.message_id,
      title: message.content.title,
      body: message.content.body,
      data: message.content.data,
    });
    const urgency =
      message.priority === 'critical' || message.priority === 'high'
        ? 'high'
        : message.priority === 'low'
          ? 'low'
          : 'normal';
    const answers = await Promise.all(subscriptions.map((s) => this.pushTo(s, payload, urgency)));
    const invalid = subscriptions
      .filter((_, i) => answers[i]!.kind === 'gone' || answers[i]!.kind === 'refused')
      .map((s) => String(s.endpoint));
    const accepted = answers.find((a) => a.kind === 'accepted');
    if (accepted !== undefined)
      return {
        kind: 'sent',
        provider_message_id: accepted.detail,
        ...(invalid.length > 0 ? { invalid_subscriptions: invalid } : {}),
      };
    const transient = answers.find((a) => a.kind === 'transient');
    if (transient !== undefined) return { kind: 'retry', reason: transient.detail };
    return { kind: 'invalid_address', reason: answers.map((a) => a.detail).join('; '), invalid_subscriptions: invalid };
  }

  /** One push request; `detail` is the message id when accepted, else the reason. */
  private async pushTo(
    subscription: PushSubscription,
    payload: string,
    urgency: 'high' | 'normal' | 'low',
  ): Promise<{ kind: 'accepted' | 'gone' | 'refused' | 'transient'; detail: string }> {
    if (!validSubscription(subscription))
      return { kind: 'refused', detail: 'not a push subscription {endpoint, keys: {p256dh, auth}}' };
    let url: URL;
    try {
      url = new URL(subscription.endpoint);
    } catch {
      return { kind: 'refused', detail: 'the subscription endpoint is not a URL' };
    }
    let body: Buffer;
    try {
      // RFC 8291 for this subscription: a fresh ECDH key and salt per message (web-push's encrypt).
      body = webpush.encrypt(subscription.keys.p256dh, subscription.keys.auth, payload, 'aes128gcm').cipherText;
    } catch (e) {
      // web-push refuses keys that are not a P-256 point / 16-byte secret: this subscription can never work.
      return { kind: 'refused', detail: `cannot encrypt for this subscription: ${(e as Error).message}` };
    }
    const headers: Record<string, string> = {
      authorization: this.vapidHeader(url.origin),
      ttl: String(this.options.ttlSeconds ?? 24 * 3600),
      'content-encoding': 'aes128gcm',
      'content-type': 'application/octet-stream',
      urgency,
    };
    try {
      const res = await this.pool(url.origin).request({
        method: 'POST',
        path: url.pathname + url.search,
        headers,
        body,
        headersTimeout: this.options.timeoutMs ?? 10_000,
        bodyTimeout: this.options.timeoutMs ?? 10_000,
      });
      const text = await res.body.text();
      const status = res.statusCode;
      if (status === 201 || status === 202) {
        const location = res.headers.location;
        return {
          kind: 'accepted',
          detail: (Array.isArray(location) ? location[0] : location) ?? idFromBody(text) ?? '',
        };
      }
      if (status === 404 || status === 410)
        return { kind: 'gone', detail: `push service answered ${status}: subscription gone` };
      if (status === 429 || status >= 500) return { kind: 'transient', detail: `push service answered ${status}` };
      return { kind: 'refused', detail: `push service refused the request (${status}): ${text.slice(0, 200)}` };
    } catch (e) {
      return { kind: 'transient', detail: `push service unreachable: ${(e as Error).message}` };
    }
  }

  /**
   * The VAPID Authorization for a push service origin. The JWT is signed once per origin and reused until an hour
   * before it expires (12 h after signing): RFC 8292 allows reuse, and an ES256 signature per message would double
   * the sender's CPU per push.
   */
  private vapidHeader(origin: string): string {
    const now = Date.now();
    const cached = this.vapidCache.get(origin);
    if (cached !== undefined && cached.renewAt > now) return cached.header;
    const exp = Math.floor(now / 1000) + 12 * 3600;
    const header = webpush.getVapidHeaders(
      origin,
      this.options.subject,
      this.options.vapid.publicKey,
      this.options.vapid.privateKey,
      'aes128gcm',
      exp,
    ).Authorization;
    this.vapidCache.set(origin, { header, renewAt: now + 11 * 3600 * 1000 });
    return header;
  }

  private pool(origin: string): Pool {
    let pool = this.pools.get(origin);
    if (pool === undefined) {
      pool = new Pool(origin, { connections: this.options.connections ?? 64, pipelining: 1, keepAliveTimeout: 30_000 });
      this.pools.set(origin, pool);
    }
    return pool;
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.close()));
    this.pools.clear();
  }
}

function validSubscription(s: unknown): s is PushSubscription {
  const v = s as Partial<PushSubscription> | null;
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof v.endpoint === 'string' &&
    typeof v.keys === 'object' &&
    v.keys !== null &&
    typeof v.keys.p256dh === 'string' &&
    typeof v.keys.auth === 'string'
  );
}

function idFromBody(text: string): string | null {
  try {
    const v = JSON.parse(text) as { id?: unknown };
    return typeof v.id === 'string' ? v.id : null;
  } catch {
    return null;
  }
}

/**
 * The cluster's push sender: VAPID keys generated once into `--set push_vapid_keys=PATH` (default vapid.json in
 * the folder that holds the workers' data folders, shared by every push worker), `push_vapid_subject`
 * (mailto:notify@raftkit.test), `push_rate_per_second` (5000), `push_connections` (64 per push service origin).
 */
export async function createPushSender(context: SenderContext): Promise<ChannelSender> {
  const vapid = loadOrCreateVapidKeys(context.settings.push_vapid_keys ?? join(dirname(context.dataDir), 'vapid.json'));
  return new PushSender({
    vapid,
    subject: context.settings.push_vapid_subject ?? 'mailto:notify@raftkit.test',
    ratePerSecond: intSetting(context, 'push_rate_per_second', 5_000),
    connections: intSetting(context, 'push_connections', 64),
  });
}
