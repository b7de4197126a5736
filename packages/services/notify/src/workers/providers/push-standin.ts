/**
 * The stand-in Web Push service (worker role `push-provider`): it plays the push service and, for the subscriptions
 * registered with it, the browser too, so it can check what a real one would see. POST /push/:id (RFC 8030, open:
 * the VAPID JWT is the credential) verifies the VAPID header against the subscription's application server key,
 * requires TTL and `Content-Encoding: aes128gcm`, DECRYPTS the body with the subscriber's private key, keeps the
 * plaintext and answers 201 with a Location naming the message; 404 for an unknown subscription, 410 for one
 * expired (the sender must drop it), 400/403 for a malformed body or a bad JWT.
 *
 * Admin (cluster token): POST /admin/subscriptions {p256dh, auth, private_key, application_server_key?} -> 201
 * {id, endpoint}; DELETE /admin/subscriptions/:id (expire: later pushes get 410); POST /admin/faults; GET
 * /admin/received.
 */
import { randomUUID } from 'node:crypto';
import {
  badRequest,
  forbidden,
  HttpError,
  Reply,
  requireObject,
  requireString,
  serveWorkerHttp,
  type WorkerOptions,
  type WorkerRole,
} from '@raftkit/http';
import { Faults } from './faults.js';
import { ReceivedLog, type ReceivedBase } from './received.js';
import {
  decryptAes128gcm,
  PushCryptoError,
  verifyVapid,
  type SubscriberKeys,
  type VapidClaims,
} from './webpush-crypto.js';

export const PUSH_PROVIDER_ROLE = 'push-provider';

export interface ReceivedPush extends ReceivedBase {
  subscription_id: string;
  /** The decrypted payload as text. */
  payload: string;
  ttl: number;
  urgency: string | null;
  vapid_sub: string;
}

interface Subscription {
  keys: SubscriberKeys;
  applicationServerKey: string | null;
  expired: boolean;
}

const B64U = /^[A-Za-z0-9_-]+$/;

export const pushProviderRole: WorkerRole = {
  role: PUSH_PROVIDER_ROLE,
  count: 1,
  async start(options: WorkerOptions) {
    const subs = new Map<string, Subscription>();
    const received = new ReceivedLog<ReceivedPush>();
    const faults = new Faults({ min: 500, max: 599, fallback: 503 });
    const verified = new Map<string, VapidClaims>();
    const origin = `http://${options.httpAddress}`;
    const http = await serveWorkerHttp(options, {
      health: () => ({ subscriptions: subs.size, received: received.total }),
    });
    const pushes = http.metrics.counter('push_provider_requests_total', 'Push requests by answer');

    http.router
      .post('/push/:id', { admits: 'open' }, async (ctx) => {
        const answer = await handlePush(ctx.params.id!, ctx.req.headers, await ctx.bytes());
        pushes.inc(1, { status: String(answer.status) });
        return answer;
      })
      .post('/admin/subscriptions', { admits: 'cluster' }, async (ctx) => {
        const body = requireObject(await ctx.json());
        const keys: SubscriberKeys = {
          p256dh: requireString(body, 'p256dh', { minLength: 87, maxLength: 87, pattern: B64U }),
          auth: requireString(body, 'auth', { minLength: 22, maxLength: 22, pattern: B64U }),
          privateKey: requireString(body, 'private_key', { minLength: 43, maxLength: 43, pattern: B64U }),
        };
        const ask =
          body.application_server_key === undefined
            ? null
            : requireString(body, 'application_server_key', { minLength: 87, maxLength: 87, pattern: B64U });
        const id = randomUUID();
        subs.set(id, { keys, applicationServerKey: ask, expired: false });
        return new Reply(201, { id, endpoint: `${origin}/push/${id}` });
      })
      .delete('/admin/subscriptions/:id', { admits: 'cluster' }, (ctx) => {
        const sub = subs.get(ctx.params.id!);
        if (sub === undefined) throw new HttpError(404, 'not_found', 'no such subscription');
        sub.expired = true;
        return { id: ctx.params.id, expired: true };
      })
      .post('/admin/faults', { admits: 'cluster' }, async (ctx) => faults.configure(requireObject(await ctx.json())))
      .get('/admin/faults', { admits: 'cluster' }, () => faults.view())
      .get('/admin/received', { admits: 'cluster' }, (ctx) => received.query(ctx.query))
      .get('/admin/counts', { admits: 'cluster' }, () => ({ total: received.total, ...received.counts() }));

    async function handlePush(
      id: string,
      headers: Record<string, string | string[] | undefined>,
      body: Buffer,
    ): Promise<Reply> {
      await faults.delay();
      const failure = faults.takeFailure();
      if (failure !== null)
        return new Reply(failure, {
          error: { code: 'provider_fault', message: 'failure ordered through /admin/faults' },
        });
      const sub = subs.get(id);
      if (sub === undefined) return new Reply(404, { error: { code: 'not_found', message: 'no such subscription' } });
      if (sub.expired)
        return new Reply(410, { error: { code: 'gone', message: 'subscription expired or unsubscribed' } });
      let vapidSub: string;
      try {
        const auth = header(headers.authorization);
        const nowS = Math.floor(Date.now() / 1000);
        // A sender reuses its JWT for hours: verify each distinct header once (the expiry is still checked each time).
        let claims = auth === undefined ? undefined : verified.get(auth);
        if (claims === undefined || claims.exp <= nowS) {
          claims = verifyVapid(auth, origin, nowS);
          if (verified.size >= 10_000) verified.clear();
          verified.set(auth!, claims);
        }
        if (sub.applicationServerKey !== null && claims.key !== sub.applicationServerKey)
          throw forbidden('the VAPID key is not the one the subscription was made for');
        vapidSub = claims.sub;
      } catch (e) {
        if (e instanceof PushCryptoError) throw forbidden(`VAPID: ${e.message}`);
        throw e;
      }
      const ttlText = header(headers.ttl);
      const ttl = Number(ttlText);
      if (ttlText === undefined || !Number.isInteger(ttl) || ttl < 0)
        throw badRequest('invalid_ttl', 'the TTL header is required (RFC 8030)');
      if (header(headers['content-encoding'])?.toLowerCase() !== 'aes128gcm')
        throw badRequest('invalid_encoding', 'Content-Encoding must be aes128gcm (RFC 8291)');
      if (body.length > 4096)
        throw new HttpError(413, 'payload_too_large', 'a push message body is at most 4096 bytes');
      let payload: string;
      try {
        payload = decryptAes128gcm(body, sub.keys).toString('utf8');
      } catch (e) {
        if (e instanceof PushCryptoError) throw badRequest('undecryptable', e.message);
        throw e;
      }
      const messageId = randomUUID();
      received.add({
        id: messageId,
        ...idsOf(payload),
        to: id,
        subscription_id: id,
        payload,
        ttl,
        urgency: header(headers.urgency) ?? null,
        vapid_sub: vapidSub,
        received_at: Date.now(),
      });
      return new Reply(201, { id: messageId }, { location: `${origin}/messages/${messageId}` });
    }

    return { httpPort: http.port, stop: () => http.close() };
  },
};

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** The sender puts the ids in its JSON payload; a payload that is not such JSON has none. */
function idsOf(payload: string): { message_id: string | null; notification_id: string | null } {
  try {
    const v = JSON.parse(payload) as { notification_id?: unknown; message_id?: unknown };
    return {
      message_id: typeof v.message_id === 'string' ? v.message_id : null,
      notification_id: typeof v.notification_id === 'string' ? v.notification_id : null,
    };
  } catch {
    return { message_id: null, notification_id: null };
  }
}
