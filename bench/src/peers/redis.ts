/**
 * The Redis peer of the ratelimit benchmark: Debian's `redis-server` (7.0 in bookworm; installed with apt-get when
 * /usr/bin/redis-server is missing) with a generated configuration in a temporary directory (127.0.0.1, a free
 * port, no persistence: counters hold no durable data), and a Lua token bucket loaded with SCRIPT LOAD and called
 * with EVALSHA.
 *
 * The script is the spec's check rules 1 to 4, as packages/services/ratelimit/src/bucket.ts implements them and our counter
 * store applies them to a check's rules (all or nothing, store/counters.ts): the store's clock (redis TIME,
 * milliseconds), lazy refill, a missing counter starts full, take one token when there is at least one
 * (remaining = floor(tokens)), else deny with retry_after_ms = ceil((1 - tokens) / refill_rate * 1000); each
 * counter written back with PEXPIRE capacity / refill_rate * 1000 + 1000.
 *
 * How it is called, as envoy's ratelimit calls redis: a small pool of connections with implicit pipelining
 * (envoy uses radix with a pipeline window; here ioredis with enableAutoPipelining, which writes every command
 * issued in the same event-loop turn as one batch). Envoy sends one command per matching descriptor in one
 * pipeline; we send ONE EVALSHA per check with every matching rule's counter among its KEYS, so redis evaluates
 * all of a check's rules in one atomic step and one round trip, exactly as our counter store does (spec rule 5).
 * That is also the cheaper of the two for redis (one script invocation instead of one per rule).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { onCleanup, removeLater } from '../cleanup.js';
import { BenchError, freePortBlock, runCommand } from '../procs.js';
import { ensureDebianPackage, spawnDaemon, stopDaemons, waitListening, type Daemon } from './daemon.js';

const REDIS_BINARY = '/usr/bin/redis-server';

/**
 * KEYS: one counter per matching rule. ARGV: capacity and refill_rate (tokens/s) of each, in KEYS order.
 * All or nothing, as our counter store takes a check's ops: every counter is refilled; when each holds a token,
 * one is taken from each, otherwise none is (a check denied by its per-user rule does not spend its per-IP
 * budget). Returns {allowed 1|0, remaining (the smallest floor(tokens), 0 when denied), retry_after_ms (the
 * largest over the short counters, 0 when allowed), reset_ms (the largest)}.
 */
const TOKEN_BUCKET_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = #KEYS
local tokens, last, capacity, rate = {}, {}, {}, {}
local allowed, retry = 1, 0
for i = 1, n do
  capacity[i] = tonumber(ARGV[2 * i - 1])
  rate[i] = tonumber(ARGV[2 * i])
  local state = redis.call('HMGET', KEYS[i], 'tokens', 'last_refill')
  local tk, lr = tonumber(state[1]), tonumber(state[2])
  if tk == nil or lr == nil then tk, lr = capacity[i], now end
  tokens[i] = math.min(capacity[i], tk + math.max(0, now - lr) / 1000 * rate[i])
  last[i] = math.max(lr, now)
  if tokens[i] < 1 then
    allowed = 0
    retry = math.max(retry, math.ceil((1 - tokens[i]) / rate[i] * 1000))
  end
end
local remaining, reset = -1, 0
for i = 1, n do
  if allowed == 1 then tokens[i] = tokens[i] - 1 end
  local left = math.floor(tokens[i])
  if remaining < 0 or left < remaining then remaining = left end
  reset = math.max(reset, math.ceil((capacity[i] - tokens[i]) / rate[i] * 1000))
  redis.call('HSET', KEYS[i], 'tokens', string.format('%.17g', tokens[i]), 'last_refill', last[i])
  redis.call('PEXPIRE', KEYS[i], math.ceil(capacity[i] / rate[i] * 1000) + 1000)
end
if allowed == 0 then remaining = 0 end
return {allowed, remaining, retry, reset}
`;

interface RedisServer {
  version: string;
  port: number;
  pid: number;
  stop(): Promise<void>;
}

export interface BucketLimits {
  capacity: number;
  refillRate: number;
}

interface BucketCheck {
  allowed: boolean;
  remaining: number;
  retryAfterMs?: number;
  resetMs: number;
}

async function redisVersion(): Promise<string> {
  const r = await runCommand(REDIS_BINARY, ['--version'], { timeoutMs: 10_000 });
  return /v=(\S+)/.exec(r.output)?.[1] ?? 'unknown';
}

function redisConfig(o: { dir: string; port: number }): string {
  return [
    'bind 127.0.0.1',
    `port ${o.port}`,
    'protected-mode yes',
    'daemonize no',
    `dir ${o.dir}`,
    'logfile ""',
    // Counters hold no durable data (the spec); our counter store keeps them in memory too.
    'save ""',
    'appendonly no',
    '',
  ].join('\n');
}

export async function startRedis(): Promise<RedisServer> {
  await ensureDebianPackage(REDIS_BINARY, 'redis-server');
  const version = await redisVersion();
  if (!version.startsWith('7.'))
    process.stderr.write(`bench: note: redis-server is ${version}, not 7.x as the issue asks\n`);
  const dir = mkdtempSync(join(tmpdir(), 'raftkit-bench-redis-'));
  const removeDir = removeLater(dir);
  const daemons: Daemon[] = [];
  const stop = onCleanup('stop redis-server', async () => {
    process.stderr.write('bench: stopping redis-server\n');
    await stopDaemons(daemons);
    await removeDir();
  });
  try {
    const port = (await freePortBlock([1])) + 1;
    const config = join(dir, 'redis.conf');
    writeFileSync(config, redisConfig({ dir, port }));
    process.stderr.write(
      `bench: starting redis-server ${version} on 127.0.0.1:${port} (no persistence), config ${config}\n`,
    );
    const daemon = spawnDaemon('redis-server', REDIS_BINARY, [config], { log: join(dir, 'redis.log') });
    daemons.push(daemon);
    await waitListening(daemon, port);
    return { version, port, pid: daemon.pid, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** The token-bucket script loaded in one redis, called over a pool of auto-pipelining connections. */
export class RedisBuckets {
  private readonly pool: Redis[];
  private next = 0;

  private constructor(
    pool: Redis[],
    readonly sha: string,
  ) {
    this.pool = pool;
  }

  /** Connect `connections` clients and SCRIPT LOAD the token bucket. */
  static async open(port: number, connections: number): Promise<RedisBuckets> {
    const pool = Array.from(
      { length: connections },
      () =>
        new Redis({ host: '127.0.0.1', port, enableAutoPipelining: true, lazyConnect: true, maxRetriesPerRequest: 1 }),
    );
    try {
      await Promise.all(pool.map((c) => c.connect()));
      const sha = await pool[0]!.script('LOAD', TOKEN_BUCKET_LUA);
      if (typeof sha !== 'string') throw new BenchError(`SCRIPT LOAD answered ${JSON.stringify(sha)}`);
      return new RedisBuckets(pool, sha);
    } catch (e) {
      pool.forEach((c) => c.disconnect());
      throw e;
    }
  }

  /** One check: take a token from each counter in `keys` (limits in the same order), one EVALSHA. */
  async check(keys: string[], limits: BucketLimits[]): Promise<BucketCheck> {
    const client = this.pool[this.next++ % this.pool.length]!;
    const args: (string | number)[] = [];
    for (const l of limits) args.push(l.capacity, l.refillRate);
    const reply = (await client.evalsha(this.sha, keys.length, ...keys, ...args)) as number[];
    const [allowed, remaining, retry, reset] = reply;
    return allowed === 1
      ? { allowed: true, remaining: remaining!, resetMs: reset! }
      : { allowed: false, remaining: 0, retryAfterMs: retry!, resetMs: reset! };
  }

  /** A command on one pooled connection (tests, setup). */
  get client(): Redis {
    return this.pool[0]!;
  }

  close(): void {
    for (const c of this.pool) c.disconnect();
  }
}
