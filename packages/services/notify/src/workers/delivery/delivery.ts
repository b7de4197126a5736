/**
 * The channel workers (worker role `delivery`): per channel in this process, a critical lane that long-polls the
 * critical sub-queue (a critical message never waits for a bulk batch) and a lane that asks high, normal, low IN
 * THAT ORDER before every batch; the provider's bucket serves critical first. Per batch: the delivery_log rows and the user's preferences are read again at send time
 * (a row that is no longer pending was sent before a crash: skipped, so a replay never sends twice what a provider
 * acknowledged and we recorded), a token bucket at the provider's rate WAITS for tokens (backpressure, never a
 * drop), a provider failure is retried with exponential backoff, and critical messages that cannot go out on their
 * channel fall back along the chain. Outcomes are recorded in the delivery_log BEFORE the queue offset is
 * committed. The same process serves the in-app centre's WebSocket.
 *
 * The delivery workers are one consumer group of the log (`notify-delivery`, members `delivery-<k>`, GroupConsumer in
 * packages/platform/log) whose unit is a channel: its slots are the channels' critical topics (one partition each),
 * in_app first, and a worker runs both lanes of every channel it is assigned. A worker that dies hands its channels
 * to the others when its lease lapses (4 s), and gets them back when it returns; the new owner first commits each of
 * the channel's committed offsets again under its generation, and every commit carries it, so a worker the group
 * moved on from can no longer move an offset. in_app is slot 0, so with every worker up it runs on delivery1, the
 * worker the in-app WebSocket clients connect to (see README).
 *
 * Settings (`cluster up --set`): channels (default sms,push,email,in_app: the channels the workers run),
 * fallback_chain (default sms,push,email,in_app), max_attempts (default 8), critical_attempts (default 3: tries on
 * one channel before a critical message falls back), retry_base_ms (default 200), retry_max_ms (default 10000).
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import {
  clusterUrl,
  badRequest,
  deriveClientToken,
  deriveServiceToken,
  fullCounter,
  pushOrDrop,
  serveWorkerHttp,
  take,
  verifyToken,
  type BucketCounter,
  type BucketLimits,
  type Principal,
  type RunningWorker,
  type WorkerOptions,
  type WorkerRole,
} from '@raftkit/http';
import {
  CheckedConsumer,
  DeadLetterQueue,
  GroupConsumer,
  LogClient,
  LogError,
  type LogProducer,
  type PartitionClaim,
} from '@raftkit/log';
import {
  CHANNELS,
  type Channel,
  type ChannelSender,
  type InAppItem,
  type OutboundMessage,
  type Priority,
} from './channels/channel.js';
import { inAppSender } from './channels/in-app.js';
import { IN_APP_RELAY_PATH, InAppRelay } from './in-app-relay.js';
import { senderFactories } from './channels/registry.js';
import {
  DELIVERY_MEMBERS_GROUP,
  deliveryGroup,
  groupOf,
  NOTIFY,
  PRIORITY_LAYOUT,
  DEAD_LETTER_TOPIC,
  type QueueLayout,
} from '../../placement.js';
import { decodeQueued, type QueuedMessage } from '../../records.js';
import { USER_ID } from '../../input.js';
import type { Outcome } from '../../machine.js';
import type { SendContext } from '../../queries.js';
import { addressOf } from '../router/router.js';
import { StateClient } from '../../state-client.js';

export const deliveryRole: WorkerRole = { role: 'delivery', count: 1, start: startDelivery };

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Resolves when `signal` aborts. */
const waitAborted = (signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });

/** Every priority the layout's lanes read. */
const PRIORITIES_IN_LANES = (layout: QueueLayout): Priority[] => layout.lanes.flatMap((l) => [...l.priorities]);

/**
 * The longest a bulk lane (high, normal, low) sleeps between rounds once nothing comes: it doubles from 10 ms after
 * each empty round, so a message queued after a quiet spell of a second or more waits up to this long, and one
 * queued while messages flow waits 10-20 ms. Critical messages never wait for it (their lane long-polls).
 */
const BULK_IDLE_MAX_MS = 1000;

/**
 * How long a critical lane's fetch waits on its members for a message (a long poll: it answers the moment one is
 * queued, so this is no delay). Longer means fewer empty round trips at rest; the lane's stop does not wait for it.
 */
const CRITICAL_WAIT_MS = 5000;
const MAX_UNSENT_WS = 1024 * 1024;
/** Message ids a worker remembers having recorded (for its fail-open sends; see `recordedHere`). */
const RECORDED_KEPT = 100_000;

export function parseChain(text: string | undefined): Channel[] {
  const chain = (text ?? 'sms,push,email,in_app')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  for (const c of chain)
    if (!(CHANNELS as readonly string[]).includes(c)) throw new Error(`fallback_chain: unknown channel ${c}`);
  return chain as Channel[];
}

/** The next channel of the chain after `channel`, or null. */
export function nextInChain(chain: readonly Channel[], channel: Channel): Channel | null {
  const i = chain.indexOf(channel);
  return i < 0 || i + 1 >= chain.length ? null : chain[i + 1]!;
}

/**
 * A token bucket that waits: `acquire(n)` resolves once n tokens were taken. Shared by a channel's lanes; while a
 * critical batch waits for tokens, the other lane takes none, so bulk never holds the provider's rate from it.
 */
class WaitingBucket {
  private readonly counter: BucketCounter;
  private criticalWaiting = 0;
  constructor(private readonly limits: BucketLimits) {
    this.counter = fullCounter(limits, Date.now());
  }
  async acquire(n: number, critical: boolean): Promise<void> {
    if (critical) this.criticalWaiting++;
    try {
      // A batch bigger than the bucket takes it in slices, so it still goes out at the provider's rate.
      let left = n;
      while (left > 0) {
        if (!critical && this.criticalWaiting > 0) {
          await sleep(5);
          continue;
        }
        const slice = Math.min(left, this.limits.capacity);
        const result = take(this.counter, this.limits, Date.now(), slice);
        if (result.allowed) left -= slice;
        else await sleep(Math.min(1000, Math.max(1, result.retryAfterMs ?? 10)));
      }
    } finally {
      if (critical) this.criticalWaiting--;
    }
  }
}

/** The channel workers on `layout` (the design's unless given: see QueueLayout). */
export async function startDelivery(
  options: WorkerOptions,
  layout: QueueLayout = PRIORITY_LAYOUT,
): Promise<RunningWorker> {
  const token = options.tokens[0]!;
  const endpoints = options.members.map((m) => clusterUrl(m.httpAddress));
  // The members take notify's own workers as internal callers by this token; the cluster token stays for what
  // only it can do here (deriving user tokens, the stand-in providers' accounts).
  const serviceToken = deriveServiceToken(token, NOTIFY);
  const state = new StateClient({ endpoints, token: serviceToken, timeoutMs: 10_000 });
  const log = new LogClient({ endpoints, token: serviceToken, timeoutMs: 10_000 });
  const chain = parseChain(options.settings.fallback_chain);
  const maxAttempts = Number(options.settings.max_attempts ?? 8);
  const criticalAttempts = Number(options.settings.critical_attempts ?? 3);
  const retryBase = Number(options.settings.retry_base_ms ?? 200);
  const retryMax = Number(options.settings.retry_max_ms ?? 10_000);
  const wanted = (options.settings.channels ?? CHANNELS.join(','))
    .split(',')
    .filter((c): c is Channel => (CHANNELS as readonly string[]).includes(c));
  // Receipts may arrive at any member; spread over them so one member down does not stop them all.
  const receiptUrls = options.members.map((m) => `${clusterUrl(m.httpAddress)}/v1/receipts`);
  let receiptTurn = 0;
  let stopping = false;
  let heldChannels = (): Channel[] => [];
  const stats = {
    batches: 0,
    sent: 0,
    skipped_already_sent: 0,
    skipped_copies: 0,
    retries: 0,
    fallbacks: 0,
    held: 0,
    fail_open: 0,
    bulk_waits_for_critical: 0,
  };
  // Critical batches in flight in this process (any channel), and the bulk steps waiting for them to be done: the
  // channels' lanes share this process's event loop and the members, so a bulk batch takes its next step (the
  // send-time read, a slice to the provider, the outcomes' record) only while no critical batch is in flight.
  let criticalBatches = 0;
  let criticalDone: Array<() => void> = [];
  const criticalIdle = async (): Promise<void> => {
    if (criticalBatches === 0) return;
    stats.bulk_waits_for_critical++;
    while (criticalBatches > 0) await new Promise<void>((r) => criticalDone.push(r));
  };
  // Messages a provider acknowledged, per channel (/healthz: a channel's throughput is read from its deltas).
  const sentByChannel: Record<Channel, number> = { push: 0, email: 0, sms: 0, in_app: 0 };
  // Message ids whose outcome (sent, delivered or final) this process recorded: what a critical batch sent fail open
  // (the delivery_log unreadable) skips, so a copy read again while the state groups are cut off is not resent by
  // the worker that sent it. Insertion-ordered, the oldest dropped past RECORDED_KEPT (memory bound).
  const recordedHere = new Set<string>();
  // Per channel, the batches of this process in flight (sent, recorded, committed): a run of the channel starts
  // reading only once those of an earlier run are done (see channelLoop).
  const inFlight = new Map<Channel, Set<Promise<void>>>();

  // A channel-topic record that is not a queued message goes here with its reason; the rest of its batch is sent.
  const deadLetters = new DeadLetterQueue(log, DEAD_LETTER_TOPIC);
  const http = await serveWorkerHttp(options, {
    health: () => ({
      ...stats,
      sent_by_channel: sentByChannel,
      channels: [...senders.keys()],
      held_channels: heldChannels(),
      in_app_relays_dropped: relay.dropped,
      dead_lettered: deadLetters.written,
    }),
  });
  const sentTotal = http.metrics.counter('notify_sent_total', 'Messages a provider acknowledged');

  // In-app WebSocket clients of this worker, by user; items this worker delivers are relayed to the other delivery
  // workers' clients too (in-app-relay.ts: the channel may be owned by a worker the user is not connected to).
  const sockets = new Map<string, Set<WebSocket>>();
  const pushLocally = (item: InAppItem): void => {
    const text = JSON.stringify({ type: 'notification', item });
    for (const ws of sockets.get(item.user_id) ?? []) pushOrDrop(ws, text, MAX_UNSENT_WS);
  };
  const relay = new InAppRelay(
    options.workers.filter((w) => w.role === options.role && w.id !== options.id).map((w) => w.httpAddress),
    token,
  );
  const pushToClients = (item: InAppItem): void => {
    pushLocally(item);
    relay.relay(item);
  };
  http.router.post(IN_APP_RELAY_PATH, { admits: 'cluster' }, async (ctx) => {
    const item = (await ctx.json()) as Partial<InAppItem> | null;
    if (item === null || typeof item !== 'object' || typeof item.user_id !== 'string')
      throw badRequest('invalid_body', 'an in-app item with its user_id');
    pushLocally(item as InAppItem);
    return { pushed: true };
  });

  const senders = new Map<Channel, ChannelSender>();
  for (const channel of wanted) {
    if (channel === 'in_app') {
      senders.set(channel, inAppSender(state, pushToClients));
      continue;
    }
    const factory = senderFactories[channel];
    if (factory === undefined) {
      options.logger.log('warn', 'no sender for channel: its queues wait', { channel });
      continue;
    }
    try {
      senders.set(
        channel,
        await factory({
          settings: options.settings,
          workers: options.workers,
          members: options.members.map((m) => m.httpAddress),
          token,
          dataDir: options.dataDir,
          logger: options.logger,
        }),
      );
    } catch (e) {
      options.logger.log('warn', 'sender could not start: its queues wait', {
        channel,
        error: String((e as Error).message),
      });
    }
  }

  // User tokens for the in-app centre (HMAC of user.<id> under the cluster token; see README).
  http.router.post('/v1/users/:id/token', { admits: 'cluster' }, (ctx) => {
    const id = ctx.params.id ?? '';
    if (!USER_ID.test(id))
      throw badRequest('invalid_field', 'a user id is 1 to 59 characters of A-Z a-z 0-9 _ -', { field: 'user_id' });
    return { user_id: id, token: deriveClientToken(token, `user.${id}`) };
  });

  const wss = new WebSocketServer({ noServer: true, maxPayload: 4096 });
  http.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => undefined);
    let user: string;
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://x');
      const m = /^\/v1\/users\/([^/]+)\/inbox\/ws$/.exec(url.pathname);
      if (m === null) return refuse(socket, 404, 'not_found', 'WebSocket endpoint: /v1/users/{id}/inbox/ws');
      user = decodeURIComponent(m[1]!);
    } catch {
      return refuse(socket, 400, 'invalid_url', 'not a valid URL');
    }
    if (!USER_ID.test(user))
      return refuse(socket, 400, 'invalid_field', 'a user id is 1 to 59 characters of A-Z a-z 0-9 _ -');
    const header = req.headers.authorization;
    const presented =
      (typeof header === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1] : undefined) ??
      url.searchParams.get('token');
    if (presented === null || presented === undefined)
      return refuse(socket, 401, 'unauthorized', 'missing token (Authorization: Bearer, or ?token=)');
    let principal: Principal;
    try {
      principal = verifyToken(presented, options.tokens);
    } catch {
      return refuse(socket, 401, 'unauthorized', 'wrong token');
    }
    if (principal.kind !== 'cluster' && !(principal.kind === 'client' && principal.name === `user.${user}`))
      return refuse(socket, 403, 'forbidden', `a user token opens only its own inbox`);
    try {
      wss.handleUpgrade(req, socket, head, (ws) => {
        let set = sockets.get(user);
        if (set === undefined) sockets.set(user, (set = new Set()));
        set.add(ws);
        ws.on('error', () => undefined);
        ws.on('close', () => {
          set.delete(ws);
          if (set.size === 0) sockets.delete(user);
        });
        ws.send(JSON.stringify({ type: 'hello', user_id: user }));
      });
    } catch {
      refuse(socket, 400, 'invalid_upgrade', 'not a valid WebSocket upgrade');
    }
  });

  const producers = new Map<string, LogProducer>();
  const producerOf = (topic: string): LogProducer => {
    let p = producers.get(topic);
    if (p === undefined) producers.set(topic, (p = log.producer(topic)));
    return p;
  };

  /** Records outcomes grouped by state group; retried until done (the offset is not committed before). */
  async function record(outcomes: Outcome[]): Promise<void> {
    const byGroup = new Map<string, Outcome[]>();
    for (const o of outcomes) {
      const g = groupOf('user', o.message_id.split(':')[1]!);
      let l = byGroup.get(g);
      if (l === undefined) byGroup.set(g, (l = []));
      l.push(o);
    }
    for (const [g, list] of byGroup) {
      for (let backoff = 100; ; backoff = Math.min(5000, backoff * 2)) {
        try {
          await state.command(g, { op: 'outcomes', outcomes: list, now: Date.now() });
          for (const o of list) {
            if (o.kind === 'retry') continue;
            recordedHere.add(o.message_id);
            if (recordedHere.size > RECORDED_KEPT) recordedHere.delete(recordedHere.values().next().value!);
          }
          break;
        } catch (e) {
          if (stopping) throw e;
          options.logger.log('warn', 'recording outcomes failed, retrying', { error: String((e as Error).message) });
          await sleep(backoff);
        }
      }
    }
  }

  async function fallBack(message: QueuedMessage, reason: string): Promise<void> {
    const next = nextInChain(chain, message.channel);
    if (next === null) return;
    const result = await state.command(groupOf('user', message.user_id), {
      op: 'fallback',
      from_message_id: message.message_id,
      channel: next,
      now: Date.now(),
    });
    if (result.op !== 'fallback' || result.row === null || result.row.status !== 'pending') return;
    stats.fallbacks++;
    const queued: QueuedMessage = {
      ...message,
      message_id: result.row.message_id,
      channel: next,
      address: null,
      fallback_from: message.channel,
    };
    options.logger.log('info', 'critical fallback', {
      from: message.channel,
      to: next,
      reason,
      message_id: message.message_id,
    });
    await producerOf(layout.topic('critical', next)).send(JSON.stringify(queued), { key: message.user_id });
  }

  /**
   * One batch of one sub-queue, start to end; throws (and the batch is polled again) when it must be held. `signal`
   * aborts when the channel is given away: retries still waiting are then left to the new owner.
   */
  async function handleBatch(
    channel: Channel,
    sender: ChannelSender,
    bucket: WaitingBucket,
    priority: Priority,
    polled: QueuedMessage[],
    signal: AbortSignal,
  ): Promise<void> {
    if (priority !== 'critical') return sendBatch(channel, sender, bucket, priority, polled, signal);
    criticalBatches++;
    try {
      return await sendBatch(channel, sender, bucket, priority, polled, signal);
    } finally {
      if (--criticalBatches === 0) {
        const waiting = criticalDone;
        criticalDone = [];
        for (const w of waiting) w();
      }
    }
  }

  async function sendBatch(
    channel: Channel,
    sender: ChannelSender,
    bucket: WaitingBucket,
    priority: Priority,
    polled: QueuedMessage[],
    signal: AbortSignal,
  ): Promise<void> {
    const bulk = priority !== 'critical';
    stats.batches++;
    // A channel topic can hold one message twice (a router replaying records it had queued but not committed, a
    // producer's append retried after a lost answer). Both copies in one batch would both pass the delivery_log
    // check below, which is read once per batch: the batch keeps the first copy only. A copy in a later batch is
    // skipped by that check (this batch's outcomes are recorded before the offset moves).
    const messages: QueuedMessage[] = [];
    const ids = new Set<string>();
    for (const m of polled) {
      if (ids.has(m.message_id)) {
        stats.skipped_copies++;
        continue;
      }
      ids.add(m.message_id);
      messages.push(m);
    }
    // Send-time context: rows (already sent?) and preferences, per state group.
    const byGroup = new Map<string, { message_ids: string[]; user_ids: Set<string> }>();
    for (const m of messages) {
      const g = groupOf('user', m.user_id);
      let e = byGroup.get(g);
      if (e === undefined) byGroup.set(g, (e = { message_ids: [], user_ids: new Set() }));
      e.message_ids.push(m.message_id);
      e.user_ids.add(m.user_id);
    }
    const context: SendContext = { rows: {}, prefs: {} };
    let failOpen = false;
    if (bulk) await criticalIdle();
    try {
      for (const [g, e] of byGroup) {
        const part = await state.query<SendContext>(g, {
          q: 'sendContext',
          message_ids: e.message_ids,
          user_ids: [...e.user_ids],
        });
        Object.assign(context.rows, part.rows);
        Object.assign(context.prefs, part.prefs);
      }
    } catch (e) {
      // Spec rule 11: the preference store unreachable -> critical is sent (fail open, on the router's address
      // snapshot), everything else is held (this batch is polled again later; nothing committed).
      if (priority !== 'critical') {
        stats.held++;
        throw e;
      }
      failOpen = true;
      stats.fail_open++;
    }
    const outcomes: Outcome[] = [];
    const fallbacks: Array<{ message: QueuedMessage; reason: string }> = [];
    let pending: Array<{ queued: QueuedMessage; out: OutboundMessage }> = [];
    for (const m of messages) {
      if (!failOpen) {
        const row = context.rows[m.message_id] ?? null;
        if (row === null || row.status !== 'pending') {
          stats.skipped_already_sent++;
          continue;
        }
        const prefs = context.prefs[m.user_id]!;
        if (!prefs.channels_enabled[channel]) {
          outcomes.push({ message_id: m.message_id, kind: 'failed', reason: 'opted_out_at_send_time' });
          continue;
        }
        const address = addressOf(prefs, channel, m.user_id);
        if (address === null) {
          outcomes.push({ message_id: m.message_id, kind: 'failed', reason: 'no_address' });
          if (m.priority === 'critical') fallbacks.push({ message: m, reason: 'no_address' });
          continue;
        }
        pending.push({ queued: m, out: outbound(m, address, row.attempt_count + 1) });
      } else {
        if (recordedHere.has(m.message_id)) {
          stats.skipped_already_sent++;
          continue;
        }
        const address = m.address ?? (channel === 'in_app' ? { channel: 'in_app' as const, user_id: m.user_id } : null);
        if (address === null) continue;
        pending.push({ queued: m, out: outbound(m, address, 1) });
      }
    }
    for (let attempt = 1; pending.length > 0; attempt++) {
      const retry: typeof pending = [];
      for (let i = 0; i < pending.length; i += sender.maxBatch) {
        const slice = pending.slice(i, i + sender.maxBatch);
        if (bulk) await criticalIdle();
        await bucket.acquire(slice.length, priority === 'critical');
        let results: Awaited<ReturnType<ChannelSender['send']>>;
        try {
          results = await sender.send(slice.map((p) => p.out));
        } catch (e) {
          results = slice.map(() => ({ kind: 'retry' as const, reason: String((e as Error).message) }));
        }
        slice.forEach((p, k) => {
          const r = results[k] ?? { kind: 'retry' as const, reason: 'the sender gave no outcome' };
          const id = p.queued.message_id;
          switch (r.kind) {
            case 'sent':
              stats.sent++;
              sentByChannel[channel]++;
              sentTotal.inc();
              outcomes.push({
                message_id: id,
                kind: 'sent',
                provider_message_id: r.provider_message_id,
                ...(r.invalid_subscriptions !== undefined ? { invalid_subscriptions: r.invalid_subscriptions } : {}),
              });
              break;
            case 'delivered':
              stats.sent++;
              sentByChannel[channel]++;
              sentTotal.inc();
              outcomes.push({
                message_id: id,
                kind: 'delivered',
                provider_message_id: r.provider_message_id,
                delivered_at: r.delivered_at,
                ...(r.invalid_subscriptions !== undefined ? { invalid_subscriptions: r.invalid_subscriptions } : {}),
              });
              break;
            case 'bounced':
              outcomes.push({
                message_id: id,
                kind: 'bounced',
                reason: r.reason,
                ...(r.provider_message_id !== undefined ? { provider_message_id: r.provider_message_id } : {}),
              });
              if (p.queued.priority === 'critical') fallbacks.push({ message: p.queued, reason: 'bounced' });
              break;
            case 'invalid_address':
              outcomes.push({
                message_id: id,
                kind: 'invalid_address',
                reason: r.reason,
                ...(r.invalid_subscriptions !== undefined ? { invalid_subscriptions: r.invalid_subscriptions } : {}),
              });
              if (p.queued.priority === 'critical') fallbacks.push({ message: p.queued, reason: 'invalid_address' });
              break;
            case 'retry':
              stats.retries++;
              if (
                attempt >= (p.queued.priority === 'critical' ? Math.min(criticalAttempts, maxAttempts) : maxAttempts)
              ) {
                outcomes.push({
                  message_id: id,
                  kind: 'failed',
                  reason: `gave up after ${attempt} attempts: ${r.reason}`,
                });
                if (p.queued.priority === 'critical') fallbacks.push({ message: p.queued, reason: 'provider_failing' });
              } else {
                outcomes.push({ message_id: id, kind: 'retry', reason: r.reason });
                retry.push({ queued: p.queued, out: { ...p.out, attempt: p.out.attempt + 1 } });
              }
              break;
          }
        });
      }
      // What the provider acknowledged is recorded before anything else happens (before the backoff, before the
      // offset moves): a worker killed from here on replays the batch and skips these rows.
      if (bulk) await criticalIdle();
      if (outcomes.length > 0) await record(outcomes.splice(0));
      pending = retry;
      if (pending.length > 0) await sleep(Math.min(retryMax, retryBase * 2 ** (attempt - 1)));
      if ((stopping || signal.aborted) && pending.length > 0) {
        // The rows that fell back are final now and the next reader of this batch skips them: their fallbacks go
        // out here, before the retries still waiting are left to it.
        for (const f of fallbacks.splice(0)) await fallBack(f.message, f.reason);
        throw new Error('the channel was given away');
      }
    }
    if (outcomes.length > 0) await record(outcomes.splice(0));
    for (const f of fallbacks) await fallBack(f.message, f.reason);
  }

  function outbound(m: QueuedMessage, address: OutboundMessage['address'], attempt: number): OutboundMessage {
    return {
      message_id: m.message_id,
      notification_id: m.notification_id,
      user_id: m.user_id,
      event_type: m.event_type,
      priority: m.priority,
      channel: m.channel,
      address,
      content: m.content,
      attempt,
      accepted_at: m.accepted_at,
      ...(receiptUrls.length > 0 ? { receipt_url: receiptUrls[receiptTurn++ % receiptUrls.length]! } : {}),
    };
  }

  /** How long a new run of a channel waits for the batches of an earlier run of it in this process. */
  const EARLIER_RUN_WAIT_MS = 10_000;

  /**
   * One channel while `claim` holds it: a critical lane (its own consumer, long-polling, so a critical message is
   * taken the moment it is queued and never waits for a bulk batch in flight) and a lane for the rest that asks
   * high, then normal, then low before every batch (the layout's lanes). Both share the provider's bucket, critical
   * first. First every topic of the channel is fenced under the claim's generation (its committed offset committed
   * again), so the worker that held the channel before can no longer commit there.
   */
  async function channelLoop(channel: Channel, sender: ChannelSender, claim: PartitionClaim): Promise<void> {
    const topics = [...new Set(PRIORITIES_IN_LANES(layout).map((p) => layout.topic(p, channel)))];
    // A lease that lapsed (heartbeats unanswered while the members are cut off or this process was paused) aborts
    // the claim, and the next heartbeat gives the channel back at once, while the aborted run may still be in a
    // batch it polled (sending, recording, committing). Both runs would read the same uncommitted messages with
    // their rows still pending and send them twice: this run starts once the earlier run's batches are done, or
    // after EARLIER_RUN_WAIT_MS: a batch of the earlier run held in provider retries must not stall the channel (its
    // commit is refused once this run fences the topics; a resend is then possible, README "Resends").
    let waited: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...(inFlight.get(channel) ?? [])]),
      new Promise<void>((resolve) => {
        waited = setTimeout(resolve, EARLIER_RUN_WAIT_MS);
      }),
    ]);
    clearTimeout(waited);
    for (const topic of topics) {
      if (!(await fence(topic, claim))) return;
    }
    const bucket = new WaitingBucket({
      capacity: Math.max(1, Math.min(sender.ratePerSecond, sender.maxBatch)),
      refillRate: sender.ratePerSecond,
    });
    await Promise.all(
      layout.lanes.map((l) => lane(channel, sender, bucket, l.priorities, l.longPoll ? CRITICAL_WAIT_MS : 0, claim)),
    );
  }

  /** Commits a topic's committed offset again under the claim's generation; false when the claim was given away. */
  async function fence(topic: string, claim: PartitionClaim): Promise<boolean> {
    const offsets = deliveryGroup(channelOfClaim(claim));
    while (!stopping && !claim.signal.aborted) {
      try {
        const committed = (await log.committed(topic, 0, offsets)) ?? 0;
        await log.commit(topic, 0, offsets, committed, committed, claim.generation);
        return true;
      } catch (e) {
        if (e instanceof LogError && e.code === 'stale_generation') return false;
        // offset_conflict: the previous owner's last commit landed meanwhile; anything else: the log is electing.
        if (!(e instanceof LogError && e.code === 'offset_conflict')) {
          options.logger.log('warn', 'fencing a channel topic failed, retrying', { topic, error: String(e) });
          await sleep(500);
        }
      }
    }
    return false;
  }

  async function lane(
    channel: Channel,
    sender: ChannelSender,
    bucket: WaitingBucket,
    order: readonly Priority[],
    waitMs: number,
    claim: PartitionClaim,
  ): Promise<void> {
    const consumerOf = (p: Priority): CheckedConsumer<QueuedMessage> =>
      new CheckedConsumer(
        log.consumer(layout.topic(p, channel), deliveryGroup(channel), {
          maxRecords: sender.maxBatch,
          waitMs,
          generation: () => claim.generation,
        }),
        decodeQueued,
        deadLetters,
      );
    const consumers = new Map<Priority, CheckedConsumer<QueuedMessage>>(order.map((p) => [p, consumerOf(p)]));
    const held = (): boolean => !stopping && !claim.signal.aborted;
    let idle = 10;
    while (held()) {
      let worked = false;
      try {
        // In priority order, asked again in this order before every batch.
        for (const priority of order) {
          const consumer = consumers.get(priority)!;
          const records = await consumer.poll();
          // Given away during the poll (a long poll lasts seconds): the new owner sends these.
          if (!held()) return;
          if (records.length === 0) {
            // A batch of refused records only (dead-lettered by poll): committed past, nothing to send.
            await consumer.commit();
            continue;
          }
          const messages = records.map((r) => r.decoded);
          // A batch of critical messages only is handled as critical (fail open, the bucket's first turn) whichever
          // topic it came from: the design's critical lane, or a layout that mixes priorities in one topic.
          const batchPriority = messages.every((m) => m.priority === 'critical') ? 'critical' : priority;
          const batch = (async () => {
            try {
              await handleBatch(channel, sender, bucket, batchPriority, messages, claim.signal);
            } catch (e) {
              // Held: forget the position, so the batch is read again from the committed offset.
              consumers.set(priority, consumerOf(priority));
              throw e;
            }
            await consumer.commit();
          })();
          let busy = inFlight.get(channel);
          if (busy === undefined) inFlight.set(channel, (busy = new Set()));
          busy.add(batch);
          try {
            await batch;
          } finally {
            busy.delete(batch);
          }
          worked = true;
          break;
        }
      } catch (e) {
        if (!held()) return;
        // Another worker holds the channel in a newer generation: stop; the next heartbeat says what is ours.
        if (e instanceof LogError && e.code === 'stale_generation') return;
        options.logger.log('warn', 'channel batch held', { channel, error: String((e as Error).message) });
        await sleep(500);
        continue;
      }
      // Idle: a long-polling lane waited in its fetch; the others poll less and less often, down to once a second
      // (BULK_IDLE_MAX_MS): each round is a fetch per priority, and a resting stack should cost next to nothing.
      if (worked || waitMs > 0) idle = 10;
      else {
        await sleep(idle);
        idle = Math.min(BULK_IDLE_MAX_MS, idle * 2);
      }
    }
  }

  // The group's slots: the channels in the settings' order with in_app first (the same on every worker, whichever
  // senders started), one slot per channel: its critical topic's partition 0.
  const slotChannels = [...wanted.filter((c) => c === 'in_app'), ...wanted.filter((c) => c !== 'in_app')];
  const channelOfClaim = (claim: { topic: string }): Channel =>
    slotChannels.find((c) => layout.topic('critical', c) === claim.topic)!;
  const group = new GroupConsumer(log, {
    topics: slotChannels.map((c) => layout.topic('critical', c)),
    group: DELIVERY_MEMBERS_GROUP,
    member: `delivery-${options.index}`,
    consume: async (claim) => {
      const channel = channelOfClaim(claim);
      const sender = senders.get(channel);
      // A channel whose sender did not start here, or a partition past 0 (a layout with more): held, not read.
      if (sender === undefined || claim.partition !== 0) return waitAborted(claim.signal);
      await channelLoop(channel, sender, claim);
    },
    onRebalance: (join) =>
      options.logger.log('info', 'delivery channels rebalanced', {
        generation: join.generation,
        members: join.members,
        assigned: join.assigned.map((slot) => slotChannels[slot]),
      }),
    onError: (e) => options.logger.log('warn', 'delivery group heartbeat or channel failed', { error: String(e) }),
  });
  heldChannels = () => group.assigned.map(channelOfClaim);
  if (slotChannels.length > 0) group.start();

  return {
    httpPort: http.port,
    async stop() {
      stopping = true;
      for (const set of sockets.values()) for (const ws of set) ws.terminate();
      await Promise.race([group.stop(), sleep(3000)]);
      for (const s of senders.values()) await s.close?.().catch(() => undefined);
      await http.close();
      await log.close();
      await state.close();
    },
  };
}

function refuse(socket: Duplex, status: number, code: string, message: string): void {
  const body = JSON.stringify({ error: { code, message } });
  const text =
    status === 401 ? 'Unauthorized' : status === 403 ? 'Forbidden' : status === 404 ? 'Not Found' : 'Bad Request';
  socket.end(
    `HTTP/1.1 ${status} ${text}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
