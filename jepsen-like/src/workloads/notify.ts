/**
 * notify: the notification service (packages/services/notify) under faults. Five members (the event log's topics,
 * the state groups and the public API), the three local stand-in providers (SMTP, Web Push, SMS: they keep what they
 * received), two routers and one delivery worker, as `cluster up --service notify` starts them; the kill, pause and
 * wipe nemeses also hit a router or the delivery worker (`faultWorkers`: they hold no disk state, so a wipe of one is
 * a kill; the members host many Raft groups and are never wiped).
 *
 * Setup: USERS users, each with an email address, a phone number and one Web Push subscription made at the push
 * stand-in, all channels enabled, no quiet hours, no caps. Clients (client i on member i mod 5) send notifications
 * to 1..3 users with a priority drawn evenly from critical, high, normal and low, each with a fresh idempotency key;
 * a send whose outcome is not an acceptance (a 503, a timeout, a reset) is sent again with the SAME key in the next
 * step and after the heal, until accepted. After the heal the final reads poll the providers' received lists and the
 * users' inboxes until every accepted (notification, user) has each channel it is owed (push, email and in-app for
 * every priority; SMS for critical only), or a deadline passes, then record them. Checks: notify-checks.ts.
 *
 * History: `send` (key = idempotency key; invoke value {users, priority}; ok value {notification_id, duplicate, wall}
 * (wall: Date.now() at the answer, to place providers' arrival times on the history's clock)); `preferences` in
 * setup; `final-deliveries` (ok value {received: [[channel, message_id, received_at]...], inbox: [[message_id,
 * created_at]...]}).
 */
import { createECDH, randomBytes } from 'node:crypto';
import type { HistoryEvent } from '../history.js';
import { callJson, errorCode, readFailure, writeFailure } from './http.js';
import { checkNotify, NOTIFY_USERS, owedChannels, type Delivery } from './notify-checks.js';
import type { CheckResult, Completion, FinalContext, Worker, WorkerContext, Workload } from './workload.js';

const PRIORITIES = ['critical', 'high', 'normal', 'low'] as const;
/** The spec's real-time class: "under 30 s" (packages/services/notify/README.md, the spec's figures). */
const CRITICAL_MS = 30_000;
/** How long the final reads wait for deliveries still owed. */
const FINAL_MS = CRITICAL_MS + 15_000;
const PROVIDERS = { email: 'smtp-provider1', push: 'push-provider1', sms: 'sms-provider1' } as const;

interface Pending {
  key: string;
  users: string[];
  priority: string;
}

export class NotifyWorkload implements Workload {
  readonly name = 'notify';
  readonly service = 'notify';
  /** No register to check (modelEvents is empty): the delivery checks carry the verdict. */
  readonly model = 'register' as const;
  readonly workers = { 'smtp-provider': 1, 'push-provider': 1, 'sms-provider': 1, router: 2, delivery: 1 };
  readonly faultWorkers = ['router', 'delivery'];
  readonly wipeMembers = false;
  /** Retries of unaccepted sends left over by workers, finished after the heal. */
  private readonly unfinished: Pending[] = [];
  private readonly accepted: Array<{ key: string; users: string[]; priority: string }> = [];
  private readonly acceptedIds: Array<[notificationId: string, key: string]> = [];

  describe(): string {
    return `notifications to 1..3 of ${NOTIFY_USERS} users (push, email, in-app; SMS when critical), priorities critical/high/normal/low evenly, unaccepted sends retried with their key; 2 routers, 1 delivery worker; critical bound ${CRITICAL_MS / 1000} s`;
  }

  /** Worker URLs by id: the workers start in the order of `workers`. */
  private worker(urls: readonly string[], id: string): string {
    const order = Object.entries(this.workers).flatMap(([role, n]) =>
      Array.from({ length: n }, (_, i) => `${role}${i + 1}`),
    );
    return urls[order.indexOf(id)]!;
  }

  async setup(ctx: FinalContext): Promise<void> {
    const push = this.worker(ctx.workerUrls, PROVIDERS.push);
    const until = async (what: string, call: () => Promise<Completion>): Promise<Completion> => {
      for (;;) {
        const out = await call();
        if (out.type === 'ok') return out;
        if (Date.now() > ctx.deadline) throw new Error(`setup: ${what}: ${out.error}`);
        await ctx.sleep(300);
      }
    };
    for (let u = 0; u < NOTIFY_USERS; u++) {
      const user = `u${u}`;
      const keys = subscriberKeys();
      const sub = await until(`subscription of ${user}`, async () => {
        const out = await callJson(`${push}/admin/subscriptions`, {
          method: 'POST',
          token: ctx.token,
          body: keys,
          timeoutMs: ctx.opTimeoutMs,
        });
        return out.kind === 'response' && out.status === 201
          ? { type: 'ok', value: (out.body as { endpoint: string }).endpoint }
          : readFailure(out);
      });
      const body = {
        channels_enabled: { push: true, email: true, sms: true, in_app: true },
        contact: {
          email: `${user}@jepsen.test`,
          phone: `+1555000${String(1000 + u)}`,
          push_subscriptions: [{ endpoint: sub.value as string, keys: { p256dh: keys.p256dh, auth: keys.auth } }],
        },
      };
      await until(`preferences of ${user}`, () =>
        ctx.perform({ f: 'preferences', key: user }, async () => {
          const member = ctx.url(ctx.nodes[u % ctx.nodes.length]!);
          const out = await callJson(`${member}/v1/users/${user}/preferences`, {
            method: 'PUT',
            token: ctx.token,
            body,
            timeoutMs: ctx.opTimeoutMs,
          });
          return out.kind === 'response' && out.status === 200 ? { type: 'ok' } : writeFailure(out);
        }),
      );
    }
  }

  private async send(
    perform: WorkerContext['perform'],
    member: string,
    token: string,
    p: Pending,
    timeoutMs: number,
  ): Promise<Completion> {
    return perform({ f: 'send', key: p.key, value: { users: p.users, priority: p.priority } }, async () => {
      const out = await callJson(`${member}/v1/notifications`, {
        method: 'POST',
        token,
        body: {
          event_type: 'jepsen',
          user_ids: p.users,
          data: { key: p.key },
          priority: p.priority,
          idempotency_key: p.key,
        },
        timeoutMs,
      });
      if (out.kind === 'response' && (out.status === 202 || out.status === 200)) {
        const b = out.body as { notification_id: string; duplicate?: boolean };
        this.acceptedIds.push([b.notification_id, p.key]);
        return {
          type: 'ok',
          value: { notification_id: b.notification_id, duplicate: b.duplicate === true, wall: Date.now() },
        };
      }
      const failure = writeFailure(out);
      return out.kind === 'response' ? { ...failure, error: errorCode(out.body) ?? failure.error } : failure;
    });
  }

  createWorker(ctx: WorkerContext): Worker {
    const member = ctx.url(ctx.node);
    let n = 0;
    let pending: Pending | null = null;
    const attempt = async (p: Pending): Promise<boolean> => {
      const out = await this.send(ctx.perform, member, ctx.token, p, ctx.opTimeoutMs);
      if (out.type === 'ok') this.accepted.push(p);
      return out.type === 'ok';
    };
    return {
      step: async () => {
        if (pending === null) {
          const count = ctx.rng.int(1, 3);
          const users = ctx.rng
            .shuffle(Array.from({ length: NOTIFY_USERS }, (_, u) => `u${u}`))
            .slice(0, count)
            .sort();
          pending = { key: `k${ctx.worker}.${n++}`, users, priority: PRIORITIES[ctx.rng.int(0, 3)]! };
        }
        if (await attempt(pending)) pending = null;
        else await ctx.sleep(200);
      },
      finish: async () => {
        if (pending !== null) this.unfinished.push(pending);
        pending = null;
      },
    };
  }

  async finalReads(ctx: FinalContext): Promise<void> {
    const start = Date.now();
    const deadline = Math.max(ctx.deadline, start + FINAL_MS);
    // Sends never accepted during the run: again with their key, through any member, until accepted.
    for (const [i, p] of this.unfinished.entries()) {
      for (let round = 0; Date.now() < deadline; round++) {
        const member = ctx.url(ctx.nodes[(i + round) % ctx.nodes.length]!);
        const out = await this.send(ctx.perform, member, ctx.token, p, ctx.opTimeoutMs);
        if (out.type === 'ok') {
          this.accepted.push(p);
          break;
        }
        await ctx.sleep(500);
      }
    }
    const owed = new Set<string>();
    for (const a of this.accepted)
      for (const u of a.users) for (const c of owedChannels(a.priority)) owed.add(`${a.key}|${u}|${c}`);
    for (let round = 0; ; round++) {
      const snapshot = await this.deliveries(ctx, round);
      const done =
        snapshot !== null &&
        this.accepted.every((a) =>
          a.users.every((u) => owedChannels(a.priority).every((c) => snapshot.has(`${a.key}|${u}|${c}`))),
        );
      if (done || Date.now() > deadline) {
        await ctx.perform({ f: 'final-deliveries' }, async () => {
          const all = await this.read(ctx, round);
          return all === null ? { type: 'fail', error: 'unreadable' } : { type: 'ok', value: all };
        });
        break;
      }
      await ctx.sleep(1_000);
    }
  }

  /** (key, user, channel) triples delivered so far, or null when a provider or inbox could not be read. */
  private async deliveries(ctx: FinalContext, round: number): Promise<Set<string> | null> {
    const all = await this.read(ctx, round);
    if (all === null) return null;
    // Notification ids are learned from the acceptances.
    const keyOf = new Map<string, string>(this.acceptedIds);
    const out = new Set<string>();
    const add = (messageId: string): void => {
      const [nid, user, channel] = messageId.split(':');
      const key = keyOf.get(nid ?? '');
      if (key !== undefined) out.add(`${key}|${user}|${channel}`);
    };
    for (const [, messageId] of all.received) add(messageId);
    for (const [messageId] of all.inbox) add(messageId);
    return out;
  }

  private async read(
    ctx: FinalContext,
    round: number,
  ): Promise<{ received: Delivery[]; inbox: Array<[string, number]> } | null> {
    const received: Delivery[] = [];
    for (const [channel, id] of Object.entries(PROVIDERS)) {
      const base = this.worker(ctx.workerUrls, id);
      let since = 0;
      for (;;) {
        const out = await callJson(`${base}/admin/received?since=${since}&limit=10000`, {
          method: 'GET',
          token: ctx.token,
          timeoutMs: ctx.opTimeoutMs,
        });
        if (out.kind !== 'response' || out.status !== 200) return null;
        const body = out.body as {
          next_since: number;
          messages: Array<{ message_id: string | null; received_at: number }>;
        };
        for (const m of body.messages) if (m.message_id !== null) received.push([channel, m.message_id, m.received_at]);
        if (body.messages.length === 0 || body.next_since <= since) break;
        since = body.next_since;
      }
    }
    const inbox: Array<[string, number]> = [];
    for (let u = 0; u < NOTIFY_USERS; u++) {
      const member = ctx.url(ctx.nodes[(u + round) % ctx.nodes.length]!);
      const out = await callJson(`${member}/v1/users/u${u}/inbox?limit=1000`, {
        method: 'GET',
        token: ctx.token,
        timeoutMs: ctx.opTimeoutMs,
      });
      if (out.kind !== 'response' || out.status !== 200) return null;
      for (const item of (out.body as { items: Array<{ item_id: string; created_at: number }> }).items)
        inbox.push([item.item_id, item.created_at]);
    }
    return { received, inbox };
  }

  check(events: readonly HistoryEvent[]): CheckResult[] {
    return checkNotify(events, { criticalMs: CRITICAL_MS });
  }

  modelEvents(): readonly HistoryEvent[] {
    return [];
  }
}

/** A Web Push subscriber's keys, as a browser makes them (the push stand-in keeps the private key to decrypt). */
function subscriberKeys(): { p256dh: string; auth: string; private_key: string } {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  const d = ecdh.getPrivateKey();
  return {
    p256dh: ecdh.getPublicKey().toString('base64url'),
    auth: randomBytes(16).toString('base64url'),
    // getPrivateKey() drops leading zero bytes: pad back to the scalar's 32 bytes.
    private_key: Buffer.concat([Buffer.alloc(32 - d.length), d]).toString('base64url'),
  };
}
