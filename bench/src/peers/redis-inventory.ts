/**
 * The benchmark's peer inventory: the industry's usual flash-sale design, each shard a Redis counter decremented
 * by a Lua script (atomic in Redis's one thread), the winner set and the remembered answers in Redis hashes. The
 * benchmark's own gateway processes (flash-redis-gateway.ts) run flash's gateway on it through the gateway's
 * InventoryBackend; everything in front of the inventory (the gates, the token pool, the bitmap) is the same
 * gateway code as ours, so a comparison measures the inventory alone.
 *
 * NOT for production use of this project: one Redis process, no persistence and no replication (the spec's rule
 * 8: a failed-over Redis replica can oversell). The semantics mirror the Raft machine's `reserve` (flash's machine.ts):
 * a (user, key) answers what it answered, a user holds at most one reservation per deal (any key, any shard), a
 * user is pinned to the one re-route the gateway drew, the count is decremented only while positive, a win
 * writes its reservation (`reserved`, 10 minutes to pay) in the same script. pay/cancel follow the machine's
 * rules (cancel returns the unit to its shard). Not implemented here: the background expiry job (a benchmark run
 * is far shorter than the 10-minute window) and dropping ended deals.
 *
 * Keys (one deal `d`): `flash:{d}:meta` (hash), `flash:{d}:s:<i>` (shard counts), `flash:{d}:w` (user ->
 * reservation id), `flash:{d}:pin` (user -> shard), `flash:{d}:lost` (user \0 key \0 shard -> "1"), `flash:{d}:key`
 * (user \0 key -> reservation id of a win), `flash:{d}:wl` (the winners in order, for the gateways' refresh),
 * `flash:r:<id>` (a reservation, JSON), `flash:deals` (set of ids).
 */
import { Redis } from 'ioredis';
import {
  GO_LIVE_LEAD_MS,
  RESERVATION_WINDOW_MS,
  shardOfReservation,
  type AttemptRecord,
  type DealSnapshot,
  type DealSpec,
  type InventoryBackend,
  type ReservationChange,
  type ReservationView,
  type ReserveOutcome,
  type ReserveRequest,
} from '@raftkit/flash';

/** KEYS: none (the deal id is in ARGV; one Redis, so no cluster slot rules). ARGV: spec fields, then counts. */
const CREATE_DEAL = `
local d = ARGV[1]
local meta = 'flash:{' .. d .. '}:meta'
if redis.call('EXISTS', meta) == 1 then
  local m = redis.call('HMGET', meta, 'skuId', 'totalInventory', 'startAt', 'endAt', 'shards')
  if m[1] == ARGV[2] and m[2] == ARGV[3] and m[3] == ARGV[4] and m[4] == ARGV[5] and m[5] == ARGV[6] then return 'ok' end
  return 'deal_exists'
end
redis.call('HSET', meta, 'skuId', ARGV[2], 'totalInventory', ARGV[3], 'startAt', ARGV[4], 'endAt', ARGV[5], 'shards', ARGV[6])
for i = 7, #ARGV do redis.call('SET', 'flash:{' .. d .. '}:s:' .. (i - 7), ARGV[i]) end
redis.call('SADD', 'flash:deals', d)
return 'ok'
`;

/**
 * ARGV: deal, shard, user, key, reservationId, reroute ('' for none), now (ms), window (ms).
 * Returns {'won', reservation JSON} | {'lost', shard, shardEmpty 0|1, reroute or ''} | {'refused', error}.
 */
const RESERVE = `
local d, shard, user, key, rid, reroute, now, window = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8])
local p = 'flash:{' .. d .. '}:'
local m = redis.call('HMGET', p .. 'meta', 'skuId', 'startAt', 'endAt', 'liveAt', 'shards')
if not m[1] then return {'refused', 'unknown_deal'} end
if tonumber(shard) >= tonumber(m[5]) then return {'refused', 'unknown_shard'} end
local held = redis.call('HGET', p .. 'w', user)
if held then return {'won', redis.call('GET', 'flash:r:' .. held)} end
local pin = redis.call('HGET', p .. 'pin', user)
if redis.call('HEXISTS', p .. 'lost', user .. '\\0' .. key .. '\\0' .. shard) == 1 then
  return {'lost', shard, 0, (pin and pin ~= shard) and pin or ''}
end
if now >= tonumber(m[3]) then return {'refused', 'deal_ended'} end
if not m[4] and now < tonumber(m[2]) then return {'refused', 'not_live'} end
if pin and pin ~= shard then return {'lost', shard, 0, pin} end
local count = p .. 's:' .. shard
if tonumber(redis.call('GET', count) or '0') > 0 then
  redis.call('DECR', count)
  local r = cjson.encode({reservationId = rid, dealId = d, skuId = m[1], userId = user, shard = tonumber(shard), reservedAt = now, expiresAt = now + window, status = 'reserved', paymentId = cjson.null})
  redis.call('SET', 'flash:r:' .. rid, r)
  redis.call('HSET', p .. 'w', user, rid)
  redis.call('HSET', p .. 'key', user .. '\\0' .. key, rid)
  redis.call('RPUSH', p .. 'wl', cjson.encode({user, rid, now + window}))
  return {'won', r}
end
local to = ''
if reroute ~= '' and reroute ~= shard and not pin then
  redis.call('HSET', p .. 'pin', user, reroute)
  to = reroute
end
redis.call('HSET', p .. 'lost', user .. '\\0' .. key .. '\\0' .. shard, '1')
return {'lost', shard, 1, to}
`;

/** ARGV: reservationId, user, op ('pay' | 'cancel'), paymentId, now. Returns {'ok', JSON} | {'error', code}. */
const CHANGE = `
local rid, user, op, payment, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local raw = redis.call('GET', 'flash:r:' .. rid)
if not raw then return {'error', 'reservation_not_found'} end
local r = cjson.decode(raw)
if r.userId ~= user then return {'error', 'not_owner'} end
if op == 'pay' then
  if r.status == 'paid' then return {'ok', raw} end
  if r.status ~= 'reserved' then return {'error', 'reservation_' .. r.status} end
  if now >= r.expiresAt then return {'error', 'reservation_expired'} end
  r.status = 'paid'
  r.paymentId = payment
else
  if r.status == 'cancelled' then return {'ok', raw} end
  if r.status ~= 'reserved' then return {'error', 'reservation_' .. r.status} end
  r.status = 'cancelled'
  redis.call('INCR', 'flash:{' .. r.dealId .. '}:s:' .. r.shard)
end
raw = cjson.encode(r)
redis.call('SET', 'flash:r:' .. rid, raw)
return {'ok', raw}
`;

interface RedisInventoryOptions {
  /** redis://host:port */
  url: string;
  /** Connections in the pool (auto-pipelined). Default 4. */
  connections?: number;
}

/** Lua's cjson writes an empty table for a null field it cannot tell; this restores the view's shape. */
function view(raw: unknown): ReservationView {
  const r = JSON.parse(String(raw)) as ReservationView & { paymentId: string | null | Record<string, never> };
  return { ...r, paymentId: typeof r.paymentId === 'string' ? r.paymentId : null };
}

export class RedisInventory implements InventoryBackend {
  private readonly pool: Redis[];
  private next = 0;
  private readonly shas = new Map<string, string>();
  /** Per deal: winners already handed to this gateway (the next `deal` reads the list after them). */
  private readonly winnersSeen = new Map<string, number>();

  constructor(options: RedisInventoryOptions) {
    const u = new URL(options.url);
    if (u.protocol !== 'redis:') throw new RangeError(`inventory: expected redis://host:port, got ${options.url}`);
    this.pool = Array.from({ length: options.connections ?? 4 }, () => {
      const redis = new Redis({
        host: u.hostname,
        port: Number(u.port || 6379),
        enableAutoPipelining: true,
        maxRetriesPerRequest: 1,
        lazyConnect: false,
      });
      // Connection errors reach the commands that fail on them (answered 503 by the gateway); without a listener
      // ioredis prints each reconnect attempt as an unhandled error event.
      redis.on('error', () => undefined);
      return redis;
    });
  }

  private get client(): Redis {
    return this.pool[this.next++ % this.pool.length]!;
  }

  /** EVALSHA, loading the script on first use (and again after a Redis restart: NOSCRIPT). */
  private async run(script: string, args: (string | number)[]): Promise<unknown> {
    const client = this.client;
    let sha = this.shas.get(script);
    if (sha === undefined) {
      sha = (await client.script('LOAD', script)) as string;
      this.shas.set(script, sha);
    }
    try {
      return await client.evalsha(sha, 0, ...args);
    } catch (e) {
      if (!String((e as Error).message).startsWith('NOSCRIPT')) throw e;
      this.shas.delete(script);
      return this.run(script, args);
    }
  }

  async createDeal(spec: DealSpec): Promise<void> {
    const base = Math.floor(spec.totalInventory / spec.shards);
    const extra = spec.totalInventory % spec.shards;
    const counts = Array.from({ length: spec.shards }, (_, i) => base + (i < extra ? 1 : 0));
    const answer = await this.run(CREATE_DEAL, [
      spec.dealId,
      spec.skuId,
      spec.totalInventory,
      spec.startAt,
      spec.endAt,
      spec.shards,
      ...counts,
    ]);
    if (answer !== 'ok')
      throw Object.assign(new Error(`deal ${spec.dealId}: ${String(answer)}`), { status: 409, code: String(answer) });
  }

  dealIds(): Promise<string[]> {
    return this.client.smembers('flash:deals');
  }

  async deal(dealId: string): Promise<DealSnapshot | null> {
    const p = `flash:{${dealId}}:`;
    const m = await this.client.hgetall(`${p}meta`);
    if (m.skuId === undefined) return null;
    // The go-live broadcast: ours is proposed by the members' deal service at start_at; this design has no
    // members, so the first refresh at or after start_at records it (HSETNX: once, whoever is first).
    if (m.liveAt === undefined && Date.now() >= Number(m.startAt) && Date.now() < Number(m.endAt)) {
      await this.client.hsetnx(`${p}meta`, 'liveAt', String(Date.now()));
      const liveAt = await this.client.hget(`${p}meta`, 'liveAt');
      if (liveAt !== null) m.liveAt = liveAt;
    }
    const shards = Number(m.shards);
    const counts = await this.client.mget(...Array.from({ length: shards }, (_, i) => `${p}s:${i}`));
    const seen = this.winnersSeen.get(dealId) ?? 0;
    const fresh = await this.client.lrange(`${p}wl`, seen, -1);
    this.winnersSeen.set(dealId, seen + fresh.length);
    const winners = fresh.map((w) => {
      const [userId, reservationId, expiresAt] = JSON.parse(w) as [string, string, number];
      return { userId, reservationId, expiresAt };
    });
    const alive: number[] = [];
    let remaining = 0;
    counts.forEach((c, i) => {
      const n = Number(c ?? 0);
      if (n > 0) alive.push(i);
      remaining += Math.max(0, n);
    });
    return {
      dealId,
      skuId: m.skuId,
      totalInventory: Number(m.totalInventory),
      startAt: Number(m.startAt),
      endAt: Number(m.endAt),
      shards,
      liveAt: m.liveAt === undefined ? null : Number(m.liveAt),
      alive,
      remaining,
      winners,
    };
  }

  async goLive(dealId: string): Promise<void> {
    const p = `flash:{${dealId}}:`;
    const startAt = await this.client.hget(`${p}meta`, 'startAt');
    if (startAt === null) throw Object.assign(new Error(`no deal ${dealId}`), { status: 404, code: 'deal_not_found' });
    // As the machine: trusted over start_at, but not far earlier than it (that is a bug, not skew).
    if (Date.now() < Number(startAt) - GO_LIVE_LEAD_MS)
      throw Object.assign(new Error(`deal ${dealId}: too early`), { status: 409, code: 'too_early' });
    await this.client.hsetnx(`${p}meta`, 'liveAt', String(Date.now()));
  }

  async reserve(r: ReserveRequest): Promise<ReserveOutcome> {
    const a = (await this.run(RESERVE, [
      r.dealId,
      r.shard,
      r.userId,
      r.key,
      r.reservationId,
      r.reroute === null ? '' : r.reroute,
      Date.now(),
      RESERVATION_WINDOW_MS,
    ])) as unknown[];
    if (a[0] === 'won') return { outcome: 'won', reservation: view(a[1]) };
    if (a[0] === 'lost')
      return {
        outcome: 'lost',
        shard: Number(a[1]),
        shardEmpty: Number(a[2]) === 1,
        reroute: a[3] === '' ? null : Number(a[3]),
      };
    return { outcome: 'refused', error: String(a[1]) };
  }

  private async change(
    reservationId: string,
    userId: string,
    op: 'pay' | 'cancel',
    paymentId: string,
  ): Promise<ReservationChange> {
    const a = (await this.run(CHANGE, [reservationId, userId, op, paymentId, Date.now()])) as unknown[];
    return a[0] === 'ok' ? { ok: true, reservation: view(a[1]) } : { ok: false, error: String(a[1]) };
  }

  pay(reservationId: string, userId: string, paymentId: string): Promise<ReservationChange> {
    return this.change(reservationId, userId, 'pay', paymentId);
  }

  cancel(reservationId: string, userId: string): Promise<ReservationChange> {
    return this.change(reservationId, userId, 'cancel', '');
  }

  async reservation(reservationId: string): Promise<ReservationView | null> {
    if (shardOfReservation(reservationId) === null) return null;
    const raw = await this.client.get(`flash:r:${reservationId}`);
    return raw === null ? null : view(raw);
  }

  async attempt(dealId: string, userId: string, key: string): Promise<AttemptRecord | null> {
    const p = `flash:{${dealId}}:`;
    if ((await this.client.exists(`${p}meta`)) === 0) return null;
    const rid = await this.client.hget(`${p}key`, `${userId}\0${key}`);
    if (rid !== null) {
      const r = await this.reservation(rid);
      if (r !== null) return { status: 'won', reservation: r };
    }
    // Lost is final only where the user's attempts end: their pin, else their home (any shard, when no pin).
    const pin = await this.client.hget(`${p}pin`, userId);
    const fields = await this.client.hkeys(`${p}lost`);
    const prefix = `${userId}\0${key}\0`;
    const lostOn = fields.filter((f) => f.startsWith(prefix)).map((f) => f.slice(prefix.length));
    if (pin !== null ? lostOn.includes(pin) : lostOn.length > 0) return { status: 'lost' };
    return { status: 'unknown' };
  }

  async probe(dealId: string, shard: number): Promise<{ remaining: number }> {
    return { remaining: Number((await this.client.get(`flash:{${dealId}}:s:${shard}`)) ?? 0) };
  }

  async close(): Promise<void> {
    for (const c of this.pool) c.disconnect();
  }
}
