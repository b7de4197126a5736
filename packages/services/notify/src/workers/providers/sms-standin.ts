/**
 * The stand-in SMS provider (worker role `sms-provider`), shaped like the common HTTP SMS APIs: POST /messages
 * {to (E.164), body, reference?, callback_url?} with the account's bearer token (here the cluster token) -> 202 {id,
 * status: "queued"}; 400 for a number that is not E.164 or a body over 1600 characters (10 segments). The handset
 * receipt comes LATER: after `receipt_delay_ms` (2000 by default, `--set sms_receipt_delay_ms=N`, or POST
 * /admin/config) the provider POSTs the receipt to the message's
 * callback_url (else `--set sms_callback_url=...`) with the same bearer token, retrying a failed callback with
 * backoff (10 tries), as providers retry webhooks. The receipt is the notify service's ReceiptUpdate {message_id
 * (the request's reference), provider_message_id, status: delivered|failed, at (epoch ms), reason?}. Numbers under +999 (no such country code) are "failed":
 * the message was accepted but never reached a handset.
 *
 * Admin (cluster token): POST /admin/faults, POST /admin/config {receipt_delay_ms}, GET /admin/received (each
 * message with its receipt status and when the callback was acknowledged).
 */
import { randomUUID } from 'node:crypto';
import { request } from 'undici';
import {
  badRequest,
  Reply,
  requireInteger,
  requireObject,
  requireString,
  serveWorkerHttp,
  type WorkerOptions,
  type WorkerRole,
} from '@raftkit/http';
import { Faults } from './faults.js';
import { ReceivedLog, type ReceivedBase } from './received.js';

export const SMS_PROVIDER_ROLE = 'sms-provider';
const E164 = /^\+[1-9]\d{6,14}$/;
export const UNREACHABLE_PREFIX = '+999';
const MAX_BODY = 1600;
const CALLBACK_TRIES = 10;

export interface ReceivedSms extends ReceivedBase {
  body: string;
  reference: string | null;
  callback_url: string | null;
  receipt: 'pending' | 'delivered' | 'failed';
  /** When the callback endpoint acknowledged the receipt (2xx), or null. */
  receipt_acknowledged_at: number | null;
  callback_attempts: number;
}

export const smsProviderRole: WorkerRole = {
  role: SMS_PROVIDER_ROLE,
  count: 1,
  async start(options: WorkerOptions) {
    const received = new ReceivedLog<ReceivedSms>();
    const faults = new Faults({ min: 500, max: 599, fallback: 503 });
    let receiptDelayMs = settingInt(options.settings.sms_receipt_delay_ms, 2_000);
    const defaultCallback = options.settings.sms_callback_url ?? null;
    const token = options.tokens[0]!;
    const timers = new Set<NodeJS.Timeout>();
    let stopping = false;

    const http = await serveWorkerHttp(options, {
      health: () => ({ received: received.total, receipt_delay_ms: receiptDelayMs }),
    });
    http.router
      .post('/messages', { admits: 'cluster' }, async (ctx) => {
        await faults.delay();
        const failure = faults.takeFailure();
        if (failure !== null)
          return new Reply(failure, {
            error: { code: 'provider_fault', message: 'failure ordered through /admin/faults' },
          });
        const body = requireObject(await ctx.json());
        const to = requireString(body, 'to', { maxLength: 16 });
        if (!E164.test(to))
          throw badRequest('invalid_number', 'to must be an E.164 number (+ and 7 to 15 digits)', { field: 'to' });
        const text = requireString(body, 'body', { minLength: 1 });
        if ([...text].length > MAX_BODY)
          throw badRequest('body_too_long', `body is at most ${MAX_BODY} characters`, { field: 'body' });
        const reference = body.reference === undefined ? null : requireString(body, 'reference', { maxLength: 200 });
        const callbackUrl =
          body.callback_url === undefined
            ? defaultCallback
            : requireString(body, 'callback_url', { maxLength: 2000, pattern: /^https?:\/\/\S+$/ });
        const entry = received.add({
          id: randomUUID(),
          message_id: reference,
          // The notify service's references are `notification:user:channel`: the first part is the notification.
          notification_id: reference === null ? null : reference.split(':')[0]!,
          to,
          body: text,
          reference,
          callback_url: callbackUrl,
          receipt: 'pending',
          receipt_acknowledged_at: null,
          callback_attempts: 0,
          received_at: Date.now(),
        });
        schedule(() => void deliverReceipt(entry), receiptDelayMs);
        return new Reply(202, { id: entry.id, status: 'queued' });
      })
      .post('/admin/faults', { admits: 'cluster' }, async (ctx) => faults.configure(requireObject(await ctx.json())))
      .get('/admin/faults', { admits: 'cluster' }, () => faults.view())
      .post('/admin/config', { admits: 'cluster' }, async (ctx) => {
        const body = requireObject(await ctx.json());
        receiptDelayMs = requireInteger(body, 'receipt_delay_ms', { min: 0, max: 600_000 });
        return { receipt_delay_ms: receiptDelayMs };
      })
      .get('/admin/received', { admits: 'cluster' }, (ctx) => received.query(ctx.query))
      .get('/admin/counts', { admits: 'cluster' }, () => ({ total: received.total, ...received.counts() }));

    function schedule(fn: () => void, ms: number): void {
      if (stopping) return;
      const t = setTimeout(() => {
        timers.delete(t);
        fn();
      }, ms);
      timers.add(t);
    }

    async function deliverReceipt(entry: ReceivedSms): Promise<void> {
      entry.receipt = entry.to.startsWith(UNREACHABLE_PREFIX) ? 'failed' : 'delivered';
      if (entry.callback_url === null) return;
      entry.callback_attempts++;
      // The notify service's ReceiptUpdate: the sender's reference comes back as message_id.
      const receipt = {
        message_id: entry.reference,
        provider_message_id: entry.id,
        status: entry.receipt,
        to: entry.to,
        at: Date.now(),
        ...(entry.receipt === 'failed' ? { reason: 'unreachable handset' } : {}),
      };
      try {
        const res = await request(entry.callback_url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body: JSON.stringify(receipt),
          headersTimeout: 10_000,
          bodyTimeout: 10_000,
        });
        await res.body.dump();
        if (res.statusCode >= 200 && res.statusCode < 300) {
          entry.receipt_acknowledged_at = Date.now();
          return;
        }
        options.logger.log('warn', 'sms receipt callback refused', { id: entry.id, status: res.statusCode });
      } catch (e) {
        options.logger.log('warn', 'sms receipt callback failed', { id: entry.id, error: String(e) });
      }
      if (entry.callback_attempts < CALLBACK_TRIES)
        schedule(() => void deliverReceipt(entry), Math.min(500 * 2 ** (entry.callback_attempts - 1), 10_000));
    }

    return {
      httpPort: http.port,
      async stop() {
        stopping = true;
        for (const t of timers) clearTimeout(t);
        timers.clear();
        await http.close();
      },
    };
  },
};

function settingInt(raw: string | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw new Error(`expected a non-negative integer setting, got ${raw}`);
  return n;
}
