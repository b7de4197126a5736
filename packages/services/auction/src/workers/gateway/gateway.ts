/**
 * The gateway worker role (`cluster up --service auction` starts 2): the public surface. It authenticates
 * (cluster token for POST /api/bidders and POST /api/auctions; bidder_token for bids, checked here before any
 * routing), validates, and routes each call to the leader of the auction's group (GroupRouter over the members'
 * internal API). It holds the WebSocket watchers (/ws/auctions/{id}): a snapshot first, then the writer's pushes,
 * forwarded in shards (workers/gateway/fanout.ts). When no push came for an auction with watchers for 2 s it polls the auction's
 * state (the spec's fallback), so watchers converge even when pushes fail. Stateless: any gateway serves any call.
 */
import { randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { Pool } from 'undici';
import { WebSocketServer, type WebSocket } from 'ws';
import {
  clusterUrl,
  badRequest,
  GroupRouter,
  HeldSockets,
  HttpError,
  holdUpgraded,
  NextRoundCoalescer,
  notFound,
  Reply,
  requireInteger,
  requireObject,
  requireString,
  requireWellFormed,
  serveWorkerHttp,
  ServiceError,
  unauthorized,
  type JsonObject,
  type RequestContext,
  type RunningWorker,
  type WorkerOptions,
  type WorkerRole,
} from '@raftkit/http';
import { BIDDER_ID, bidderToken, verifyBidderToken } from '../../bidder-token.js';
import { Channel, message, snapshotSent, type Watcher } from './fanout.js';
import { writeFrame } from './frames.js';
import type { BidResult, CreateInput } from '../../machine.js';
import { isAuctionGroup, locateAuction } from '../../placement.js';
import { bidBody, pushesFromView, stateQuery, type AuctionBody, type Push, type SnapshotMessage } from '../../wire.js';
import { FEED_SECRET_HEADER } from '../../members/watchers.js';

/** Pushes are silent this long for an auction with watchers before the gateway polls its state. */
export const POLL_AFTER_MS = 2_000;
/** How long a bid may wait for a writer (elections included) before the gateway answers 503 Retry-After. */
const BID_TIMEOUT_MS = 3_000;
const REGISTER_EVERY_MS = 2_000;
const AUCTION_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const KEY = /^[\x21-\x7e]{1,128}$/;
const AMOUNT_MAX = 2 ** 48;
/** Bytes a watcher may leave unread before it is dropped (an update is ~200 bytes; the open route needs no token). */
const MAX_UNSENT_BYTES = 256 * 1024;
const TIME_MAX = 8.64e15;
/** Watcher sockets one remote address may hold on one gateway (`--set watchers_per_address=N`). */
const WATCHERS_PER_ADDRESS = 256;
/** A watcher socket that has not sent {"type":"subscribe"} this long after its upgrade is closed (4408). */
const SUBSCRIBE_TIMEOUT_MS = 10_000;

/** A positive integer setting of the gateway (`cluster up --set name=N`), or its default. */
function intSetting(settings: Record<string, string>, name: string, fallback: number): number {
  const raw = settings[name];
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`--set ${name}=${raw}: expected a positive integer`);
  return n;
}

export const gatewayRole: WorkerRole = {
  role: 'gateway',
  count: 2,
  start: startGateway,
};

interface Socket extends Watcher {
  ws: WebSocket;
  auctionId: string;
}

export async function startGateway(options: WorkerOptions): Promise<RunningWorker> {
  const clusterToken = options.tokens[0]!;
  const members = options.members.map((m) => clusterUrl(m.httpAddress));
  const router = new GroupRouter({ endpoints: members, token: clusterToken, timeoutMs: 10_000, locate: locateAuction });
  const secret = randomBytes(24).toString('base64url');
  const channels = new Map<string, Channel>();
  const stats = { pushesIn: 0, polls: 0, repaired: 0, idleClosed: 0 };
  const listings = new NextRoundCoalescer<{ state: string | null; auctions: AuctionBody[] }>();
  let selfUrl = `http://${options.httpAddress}`;

  const perAddress = intSetting(options.settings, 'watchers_per_address', WATCHERS_PER_ADDRESS);
  const subscribeTimeoutMs = intSetting(options.settings, 'watcher_subscribe_timeout_ms', SUBSCRIBE_TIMEOUT_MS);
  const budget =
    options.settings['connection_budget'] === undefined
      ? undefined
      : intSetting(options.settings, 'connection_budget', 1);
  let held: HeldSockets | null = null;
  const http = await serveWorkerHttp(options, {
    health: () => ({
      channels: channels.size,
      watchers: [...channels.values()].reduce((n, c) => n + c.size, 0),
      shards: [...channels.values()].reduce((n, c) => n + c.shards.length, 0),
      ...stats,
      listFanouts: listings.runs,
      sockets: { held: held?.size ?? 0, max: held?.max ?? 0, perAddress, refused: held?.refused ?? {} },
    }),
    ...(budget !== undefined ? { connectionBudget: budget } : {}),
  });
  // Watcher sockets are held (never evicted as idle): bounded per address, and in all below the listener's cap by
  // a reserve they cannot take, so bids, GETs and /healthz always find a connection (packages/platform/http held-sockets.ts).
  const sockets = new HeldSockets(http.connections, { perAddress });
  held = sockets;
  selfUrl = `http://${options.httpAddress.split(':')[0]}:${http.port}`;
  const metrics = http.metrics;
  metrics
    .gauge('auction_watchers', 'WebSocket watchers on this gateway')
    .set(() => [...channels.values()].reduce((n, c) => n + c.size, 0));
  metrics.gauge('auction_pushes_received_total', 'Pushes received from writers').set(() => stats.pushesIn);
  metrics
    .gauge('auction_list_fanouts_total', 'Listings fanned out to every group (concurrent lists share one)')
    .set(() => listings.runs);
  metrics
    .gauge('auction_polls_total', 'Auction states polled because pushes were silent for 2 s')
    .set(() => stats.polls);
  metrics
    .gauge('auction_watcher_sockets', 'WebSocket connections held on this gateway (subscribed or not yet)')
    .set(() => sockets.size);
  const refusedGauge = metrics.gauge(
    'auction_watcher_sockets_refused_total',
    'WebSocket upgrades refused, by reason: per_address (the address holds its cap), full (the reserve for the API reached)',
  );
  refusedGauge.set(() => sockets.refused.per_address, { reason: 'per_address' });
  refusedGauge.set(() => sockets.refused.full, { reason: 'full' });
  metrics
    .gauge('auction_watchers_unsubscribed_closed_total', 'WebSocket connections closed for not subscribing in time')
    .set(() => stats.idleClosed);

  /** A call through the router; its ServiceErrors become the same HTTP answers (503 and 429 keep Retry-After). */
  const mapped = async <T>(work: () => Promise<T>): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      if (error instanceof ServiceError) {
        const details = (error.body as { error?: Record<string, unknown> } | null)?.error ?? {};
        const { code: _c, message: _m, ...rest } = details;
        throw new HttpError(
          error.status,
          error.code,
          error.message,
          rest,
          error.status === 503 || error.status === 429 ? { 'retry-after': '1' } : {},
        );
      }
      throw error;
    }
  };
  /** A call about an auction, routed to its group's leader. */
  const routed = (
    auctionId: string,
    method: string,
    path: string,
    body?: object,
    timeoutMs?: number,
  ): Promise<unknown> =>
    mapped(() => router.callKey(auctionId, method, path, body, timeoutMs === undefined ? {} : { timeoutMs }));

  // ---- registration of this gateway's watchers with every member (the writer may move) ----
  const pools = new Map<string, Pool>();
  const poolOf = (url: string): Pool => {
    let p = pools.get(url);
    if (p === undefined) pools.set(url, (p = new Pool(url, { connections: 2, keepAliveTimeout: 30_000 })));
    return p;
  };
  const table = (): Record<string, number> => Object.fromEntries([...channels].map(([id, c]) => [id, c.size]));
  const register = (): void => {
    const body = JSON.stringify({ gateway: options.id, url: selfUrl, secret, auctions: table(), full: true });
    for (const url of members) {
      poolOf(url)
        .request({
          method: 'POST',
          path: '/internal/auction/watchers',
          headers: { authorization: `Bearer ${clusterToken}`, 'content-type': 'application/json' },
          body,
          headersTimeout: 3_000,
          bodyTimeout: 3_000,
        })
        .then(
          (res) => res.body.dump(),
          () => undefined,
        );
    }
  };
  let registerSoon: NodeJS.Timeout | null = null;
  const changed = (): void => {
    if (registerSoon === null) registerSoon = setTimeout(() => ((registerSoon = null), register()), 50);
  };
  const registerTimer = setInterval(register, REGISTER_EVERY_MS);

  // ---- the poll fallback ----
  const pollTimer = setInterval(() => {
    const now = Date.now();
    for (const [id, channel] of channels) {
      if (now - channel.heardAt < POLL_AFTER_MS) continue;
      channel.heardAt = now;
      stats.polls++;
      routed(id, 'GET', `/internal/auctions/${encodeURIComponent(id)}?history=none`, undefined, 5_000).then(
        (view) => {
          for (const p of pushesFromView(view as AuctionBody)) {
            if (p.seq > channel.seq) {
              stats.repaired++;
              void channel.forward(p);
            }
          }
        },
        () => undefined,
      );
    }
  }, 500);

  // ---- public API ----
  http.router
    .post('/api/bidders', { admits: 'cluster' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      const bidderId = requireString(body, 'bidder_id', { pattern: BIDDER_ID });
      return new Reply(201, { bidder_id: bidderId, bidder_token: bidderToken(clusterToken, bidderId) });
    })
    .post('/api/bidders/:id/block', { admits: 'cluster' }, async (ctx) => {
      // Spec rule 2 ("bidder not blocked"): the writer checks it against its replicated state, so the block is
      // proposed to every auction group; answered once every group logged it.
      const bidderId = ctx.params.id ?? '';
      if (!BIDDER_ID.test(bidderId))
        throw badRequest('invalid_field', 'a bidder id is 1..128 of A-Z a-z 0-9 . _ : @ -', { field: 'bidder_id' });
      const body = requireObject(await ctx.json());
      if (typeof body.blocked !== 'boolean')
        throw badRequest('invalid_field', 'blocked must be true or false', { field: 'blocked' });
      const groups = await auctionGroups(router);
      await Promise.all(
        groups.map((g) =>
          mapped(() => router.call(g, 'POST', `/internal/groups/${g}/block`, { bidderId, blocked: body.blocked })),
        ),
      );
      return { bidder_id: bidderId, blocked: body.blocked, groups: groups.length };
    })
    .post('/api/auctions', { admits: 'cluster' }, async (ctx) => {
      const create = createOf(requireObject(await ctx.json()));
      const answer = (await routed(create.auctionId, 'POST', '/internal/auctions', { op: 'create', ...create })) as {
        auction_id: string;
      };
      return new Reply(201, {
        auction_id: answer.auction_id,
        item_id: create.itemId,
        seller_id: create.sellerId,
        start_price: create.startPrice,
        reserve_price: create.reservePrice,
        min_increment: create.minIncrement,
        start_at: create.startAt,
        end_at: create.endAt,
        close_at: create.endAt,
        anti_snipe_window_s: create.antiSnipeWindowS,
      });
    })
    .post('/api/auctions/:id/bids', { admits: 'open' }, async (ctx) => {
      const auctionId = auctionIdOf(ctx);
      const body = requireObject(await ctx.json());
      const bidderId = requireString(body, 'bidder_id', { pattern: BIDDER_ID });
      const token = requireString(body, 'bidder_token', { maxLength: 200 });
      // Authentication before routing: a wrong token costs no call to the members.
      if (!verifyBidderToken(options.tokens, bidderId, token))
        throw unauthorized('bidder_token does not belong to bidder_id (POST /api/bidders issues one)');
      const amount = requireInteger(body, 'amount', { min: 1, max: AMOUNT_MAX });
      const max =
        body.max_proxy_amount === undefined || body.max_proxy_amount === null
          ? null
          : requireInteger(body, 'max_proxy_amount', { min: 1, max: AMOUNT_MAX });
      if (max !== null && max < amount)
        throw badRequest('invalid_field', 'max_proxy_amount must be at least amount', { field: 'max_proxy_amount' });
      const key = requireString(body, 'idempotency_key', { pattern: KEY });
      const bidId = randomUUID();
      const result = (await routed(
        auctionId,
        'POST',
        `/internal/auctions/${encodeURIComponent(auctionId)}/bids`,
        { bidId, bidderId, amount, maxProxyAmount: max, idempotencyKey: key },
        BID_TIMEOUT_MS,
      )) as BidResult;
      // The router retried a call whose first attempt was applied after all: that is this request's own outcome.
      const own = result.status === 'duplicate' && result.original?.bidId === bidId ? result.original : result;
      return bidReply(own);
    })
    .get('/api/auctions', { admits: 'open' }, async (ctx) => {
      const state = stateQuery(ctx);
      // Anyone may list, and a list asks every group: concurrent lists share one fan-out per state at a time.
      return listings.run(state ?? 'all', async () => {
        const groups = await auctionGroups(router);
        const lists = await Promise.all(
          groups.map(
            (g) =>
              mapped(() =>
                router.call(
                  g,
                  'GET',
                  `/internal/groups/${g}/auctions?limit=1000${state === null ? '' : `&state=${state}`}`,
                ),
              ) as Promise<{ auctions: AuctionBody[] }>,
          ),
        );
        const auctions = lists
          .flatMap((l) => l.auctions)
          .sort((a, b) => a.close_at - b.close_at || (a.auction_id < b.auction_id ? -1 : 1));
        return { state, auctions: auctions.slice(0, 1000) };
      });
    })
    .get('/api/auctions/:id', { admits: 'open' }, async (ctx) => {
      const auctionId = auctionIdOf(ctx);
      const history = ctx.query.get('history') === 'all' ? '?history=all' : '';
      return routed(auctionId, 'GET', `/internal/auctions/${encodeURIComponent(auctionId)}${history}`);
    })
    .get('/api/auctions/:id/log', { admits: 'cluster' }, async (ctx) => {
      // Every bid entry of the auction in log order, hidden maxima included: for the operator's checks only.
      const auctionId = auctionIdOf(ctx);
      return routed(auctionId, 'GET', `/internal/auctions/${encodeURIComponent(auctionId)}/log`);
    })
    .post('/internal/auction/updates', { admits: 'open' }, async (ctx) => {
      // The members registered this secret with the cluster token; compared in constant time like every token.
      const offered = Buffer.from(String(ctx.req.headers[FEED_SECRET_HEADER] ?? ''));
      const expected = Buffer.from(secret);
      if (offered.length !== expected.length || !timingSafeEqual(offered, expected))
        throw unauthorized('not a writer of this cluster');
      const body = requireObject(await ctx.json());
      const messages = Array.isArray(body.messages) ? (body.messages as Push[]) : [];
      for (const m of messages) {
        stats.pushesIn++;
        const channel = channels.get(m.auction_id);
        if (channel !== undefined) void channel.forward(m);
      }
      return { received: messages.length };
    });

  // ---- WebSocket watchers ----
  // No permessage-deflate (ws's default, said here because fan-out writes prebuilt uncompressed frames: frames.ts).
  const wss = new WebSocketServer({ noServer: true, maxPayload: 4096, perMessageDeflate: false });
  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    const path = (req.url ?? '').split('?')[0]!;
    const m = /^\/ws\/auctions\/([^/]+)$/.exec(path);
    let id: string | null = null;
    try {
      id = m === null ? null : decodeURIComponent(m[1]!);
    } catch {
      id = null;
    }
    if (id === null || !AUCTION_ID.test(id)) {
      socket.end(
        'HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{"error":{"code":"not_found","message":"WebSocket path is /ws/auctions/{auction_id}"}}',
      );
      return;
    }
    const auctionId = id;
    // Anyone may watch, so a place is taken per remote address and below the reserve before the upgrade.
    const place = sockets.take(req.socket.remoteAddress ?? '');
    if (place === 'per_address') {
      refuse(
        socket,
        429,
        'Too Many Requests',
        'too_many_watchers',
        `at most ${perAddress} watcher sockets per address on this gateway`,
        10,
      );
      return;
    }
    if (place === 'full') {
      refuse(
        socket,
        503,
        'Service Unavailable',
        'watchers_full',
        'this gateway holds all the watchers it may; try another gateway or later',
        5,
      );
      return;
    }
    socket.once('close', place);
    // A watcher's socket is busy for its whole life: the listener's connection cap must not evict it as idle.
    holdUpgraded(socket);
    wss.handleUpgrade(req, socket, head, (ws) => attach(ws, auctionId));
  };
  http.server.on('upgrade', onUpgrade);

  const attach = (ws: WebSocket, auctionId: string): void => {
    // A watcher that does not read is dropped, not buffered for (each push carries the whole current price).
    const s: Socket = {
      ws,
      auctionId,
      seq: -1,
      early: null,
      send: (frame) => void writeFrame(ws, frame, MAX_UNSENT_BYTES),
    };
    let subscribed = false;
    // A socket that never subscribes only holds a place: closed after the delay (and cut 1 s later if the peer
    // does not answer the close).
    let idle: NodeJS.Timeout | null = setTimeout(() => {
      idle = null;
      stats.idleClosed++;
      ws.send(
        message({
          type: 'error',
          error: { code: 'subscribe_timeout', message: `no {"type":"subscribe"} within ${subscribeTimeoutMs} ms` },
        }),
      );
      ws.close(4408, 'subscribe_timeout');
      setTimeout(() => ws.terminate(), 1_000).unref();
    }, subscribeTimeoutMs);
    ws.on('message', (data) => {
      let msg: { type?: unknown } | null = null;
      try {
        msg = JSON.parse(String(data)) as { type?: unknown };
      } catch {
        msg = null;
      }
      if (msg === null || typeof msg !== 'object' || msg.type !== 'subscribe') {
        ws.send(message({ type: 'error', error: { code: 'invalid_message', message: 'send {"type":"subscribe"}' } }));
        return;
      }
      if (subscribed) return;
      subscribed = true;
      if (idle !== null) clearTimeout(idle);
      idle = null;
      void subscribe(s);
    });
    ws.on('close', () => {
      if (idle !== null) clearTimeout(idle);
      idle = null;
      if (!subscribed) return;
      const channel = channels.get(auctionId);
      if (channel === undefined) return;
      channel.remove(s);
      if (channel.size === 0) channels.delete(auctionId);
      changed();
    });
    ws.on('error', () => undefined);
  };

  /**
   * The snapshot for a new watcher: the channel's own view when it has one (kept current by pushes and polls),
   * else the writer's, fetched once for every subscriber arriving meanwhile. The fetch registers this gateway on
   * the writer before reading there, so no push falls between the snapshot and the first bid_update.
   */
  const snapshotOf = (channel: Channel, auctionId: string): Promise<SnapshotMessage> => {
    if (channel.view !== null) return Promise.resolve(channel.view);
    channel.loading ??= routed(
      auctionId,
      'POST',
      `/internal/auctions/${encodeURIComponent(auctionId)}/watch`,
      { gateway: options.id, url: selfUrl, secret, count: channel.size },
      10_000,
    ).then(
      (body) => {
        const { bid_history: _h, ...rest } = body as AuctionBody;
        channel.loading = null;
        if (channel.view === null || rest.seq >= channel.view.seq) channel.view = { type: 'snapshot', ...rest };
        if (rest.seq > channel.seq) channel.seq = rest.seq;
        return channel.view;
      },
      (error: unknown) => {
        channel.loading = null;
        throw error;
      },
    );
    return channel.loading;
  };

  const subscribe = async (s: Socket): Promise<void> => {
    let channel = channels.get(s.auctionId);
    if (channel === undefined) channels.set(s.auctionId, (channel = new Channel()));
    s.early = [];
    channel.add(s);
    try {
      const view = await snapshotOf(channel, s.auctionId);
      const state = view.state === 'closed' ? 'closed' : Date.now() < view.start_at ? 'scheduled' : 'live';
      s.ws.send(message({ ...view, state, watcher_count: Math.max(view.watcher_count, channel.size) }));
      snapshotSent(s, view.seq);
      changed();
    } catch (error) {
      channel.remove(s);
      if (channel.size === 0) channels.delete(s.auctionId);
      const e = error instanceof HttpError ? error : null;
      s.ws.send(
        message({ type: 'error', error: { code: e?.code ?? 'unavailable', message: e?.message ?? String(error) } }),
      );
      s.ws.close(e?.status === 404 ? 4404 : 1013, e?.code ?? 'unavailable');
    }
  };

  register();
  return {
    httpPort: http.port,
    async stop() {
      clearInterval(registerTimer);
      clearInterval(pollTimer);
      if (registerSoon !== null) clearTimeout(registerSoon);
      http.server.off('upgrade', onUpgrade);
      for (const c of wss.clients) c.terminate();
      wss.close();
      await http.close();
      await router.close();
      await Promise.all([...pools.values()].map((p) => p.close()));
    },
  };
}

/** Refuses an upgrade with a JSON error (the socket is not a WebSocket yet: plain HTTP). */
function refuse(socket: Duplex, status: number, reason: string, code: string, text: string, retryAfterS: number): void {
  const body = JSON.stringify({ error: { code, message: text } });
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nretry-after: ${retryAfterS}\r\nconnection: close\r\n\r\n${body}`,
  );
}

function bidReply(r: BidResult): Reply {
  const body = bidBody(r);
  switch (r.status) {
    case 'unknown_auction':
      throw notFound(`no auction ${r.auctionId}`, { auction_id: r.auctionId });
    case 'not_started':
      throw new HttpError(
        409,
        'not_started',
        'the auction has not started yet; retry after start_at with the same idempotency_key',
        { ...body },
      );
    case 'seller_cannot_bid':
      throw new HttpError(403, 'seller_cannot_bid', 'the seller cannot bid on their own auction', { ...body });
    case 'bidder_blocked':
      throw new HttpError(403, 'bidder_blocked', 'this bidder is blocked', { ...body });
    case 'too_frequent':
      throw new HttpError(
        429,
        'too_frequent',
        'at most 5 bids per bidder per auction per second',
        { ...body },
        { 'retry-after': '1' },
      );
    default:
      return new Reply(200, body);
  }
}

function auctionIdOf(ctx: RequestContext): string {
  const id = ctx.params.id ?? '';
  if (!AUCTION_ID.test(id))
    throw badRequest('invalid_auction_id', 'an auction id is 1..128 of A-Z a-z 0-9 . _ : -', { field: 'auction_id' });
  return id;
}

/** An instant: epoch milliseconds (an integer) or an ISO-8601 string with a time zone. */
function instantOf(body: JsonObject, field: string): number {
  const v = body[field];
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 && v <= TIME_MAX) return v;
  if (typeof v === 'string' && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/.test(v)) {
    const ms = Date.parse(v);
    if (Number.isFinite(ms) && ms >= 0) return ms;
  }
  throw badRequest(
    'invalid_field',
    `${field} must be epoch milliseconds or an ISO-8601 time with a zone (e.g. 2026-11-25T12:00:00Z)`,
    { field },
  );
}

function createOf(body: JsonObject): Omit<CreateInput, 'op'> {
  const itemId = requireString(body, 'item_id', { maxLength: 128 });
  requireWellFormed(itemId, 'item_id');
  const sellerId = requireString(body, 'seller_id', { pattern: BIDDER_ID });
  const startPrice = requireInteger(body, 'start_price', { min: 1, max: AMOUNT_MAX });
  const reservePrice =
    body.reserve_price === undefined || body.reserve_price === null
      ? null
      : requireInteger(body, 'reserve_price', { min: 1, max: AMOUNT_MAX });
  const minIncrement =
    body.min_increment === undefined ? 1 : requireInteger(body, 'min_increment', { min: 1, max: AMOUNT_MAX });
  const startAt = instantOf(body, 'start_at');
  const endAt = instantOf(body, 'end_at');
  if (endAt <= startAt) throw badRequest('invalid_field', 'end_at must be after start_at', { field: 'end_at' });
  const antiSnipeWindowS = requireInteger(body, 'anti_snipe_window_s', { min: 0, max: 86_400 });
  return {
    auctionId: randomUUID(),
    itemId,
    sellerId,
    startPrice,
    reservePrice,
    minIncrement,
    startAt,
    endAt,
    antiSnipeWindowS,
  };
}

/** The auction groups' names, from the meta group's catalogue as a member sees it now. */
export async function auctionGroups(router: GroupRouter): Promise<string[]> {
  const names = (await router.groups()).map((g) => g.name).filter(isAuctionGroup);
  if (names.length === 0)
    throw new HttpError(503, 'unavailable', 'no member answered with the auction groups', {}, { 'retry-after': '1' });
  return names.sort();
}
