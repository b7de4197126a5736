/**
 * `notify` (issue 44): the critical lane while a bulk backlog of a million notifications drains. Our notification
 * service as `cluster up --service notify` starts it (members hosting the event log's partitions and the state
 * groups, the routers, the channel worker and the stand-in providers), driven through its public API with the
 * cluster token, as an internal caller would.
 *
 * Users: CRITICAL_USERS with push only (one Web Push subscription each, made at the stand-in push service with a
 * fresh P-256 key pair and auth secret; the stand-in decrypts every message with it), and BULK_USERS with one channel
 * each, spread over push (a subscription as above), email (an address at the stand-in SMTP server) and in-app. The
 * critical and a third of the bulk users share the push channel, so between a critical message and its device there
 * is the channel's queueing and the processes' shared CPU.
 *
 * The load: first a backlog of --size low-priority notifications (one per (notification, user); requests of
 * BULK_USERS users, the API's batch route, --concurrency in flight), then --warmup seconds, then for --duration
 * seconds a steady trickle of CRITICAL_PER_S critical sends (one user each) while the backlog drains, and one client
 * reading preferences (GET /v1/users/{id}/preferences over HTTP, any member) at PREF_READS_PER_S; preference reads
 * are also timed on the quiet stack before the backlog (PREF_READS_QUIET). The campaign limit at routing is lifted
 * (campaign_rate_per_minute) so the backlog drains as fast as the machine allows. After the window the benchmark
 * waits (at most DRAIN_WAIT_S) for every accepted critical to reach the push service.
 *
 * Figures: critical end-to-end latency, from the API's 202 (accepted) to the stand-in push service's arrival time
 * (same machine clock), p50/p99/max, as the headline latency; critical accepted / received / lost (not received
 * within the wait) / duplicated (a message_id that arrived twice); accept -> the outcome recorded in the
 * delivery_log (its last_attempt_at); the backlog (low records not yet routed, routed messages not yet sent per
 * channel) at the window's start and end; bulk throughput per channel = messages the providers acknowledged per
 * second in the window (the delivery workers' /healthz), and records routed per second; preference read latency.
 *
 * --profile DIR: every server process is CPU-profiled over the window (profile-preload.ts, restarted by SIGUSR2 at
 * the window's start), summarized per role into DIR/summary.txt.
 *
 * `--vs fifo`: the same run with the naive design, one FIFO queue per channel (../peers/notify-fifo-layout.ts: the
 * service's own router and channel worker, started by the benchmark with every priority in one topic per channel):
 * a critical message waits behind every bulk message queued before it.
 */
import { createECDH, randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LogClient } from '@raftkit/log';
import { Pool } from 'undici';
import type { Benchmark, Goal, RunOptions, SideResult } from '../benchmark.js';
import { errorKind, OpError } from '../load.js';
import { startOurCluster, type OurCluster } from '../ours.js';
import { FIFO_CLUSTER_WORKERS, startFifoWorkers, type FifoWorkers } from '../peers/notify-fifo.js';
import { BenchError, cpuSeconds, sleep } from '../procs.js';
import { formatSummary, summarize as summarizeProfile, type CpuProfile } from '../profile.js';
import { round, summarize } from '../stats.js';

const MEMBERS = 3;
const BULK_USERS = 3_000;
const BULK_CHANNELS = ['push', 'email', 'in_app'] as const;
type BulkChannel = (typeof BULK_CHANNELS)[number];
const CRITICAL_USERS = 20;
const CRITICAL_PER_S = 10;
const DRAIN_WAIT_S = 120;
const SETUP_CONCURRENCY = 16;
const PREF_READS_QUIET = 500;
const PREF_READS_PER_S = 50;
const BACKLOG_GOAL = 1_000_000;
const CRITICAL_P99_GOAL_MS = 500;
const PREF_P99_GOAL_MS = 1;
/** The settings of both sides: the campaign limit lifted so the flood is as large as the machine allows. */
const SETTINGS = { campaign_rate_per_minute: '100000000' };

interface Critical {
  key: string;
  user: string;
  sentAt: number;
  acceptedAt: number | null;
  notificationId: string | null;
}

const now = (): number => performance.timeOrigin + performance.now();

function b64u(buf: Buffer): string {
  return buf.toString('base64url');
}

/** A browser's push subscription keys (RFC 8291): P-256 key pair and a 16-byte auth secret. */
function subscriberKeys(): { p256dh: string; auth: string; private_key: string } {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  // getPrivateKey() drops leading zero bytes: pad back to the scalar's 32 bytes.
  const d = ecdh.getPrivateKey();
  return {
    p256dh: b64u(ecdh.getPublicKey()),
    auth: b64u(randomBytes(16)),
    private_key: b64u(Buffer.concat([Buffer.alloc(32 - d.length), d])),
  };
}

async function requestJson(
  pool: Pool,
  method: 'GET' | 'POST' | 'PUT',
  path: string,
  token: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await pool.request({
    method,
    path,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    headersTimeout: 30_000,
    bodyTimeout: 30_000,
  });
  const text = await res.body.text();
  let parsed: Record<string, unknown> = {};
  try {
    parsed = text.length > 0 ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    parsed = { text: text.slice(0, 200) };
  }
  return { status: res.statusCode, body: parsed };
}

async function must(
  pool: Pool,
  method: 'GET' | 'POST' | 'PUT',
  path: string,
  token: string,
  body: unknown,
  what: string,
): Promise<Record<string, unknown>> {
  const a = await requestJson(pool, method, path, token, body);
  if (a.status < 200 || a.status > 299)
    throw new BenchError(`${what}: HTTP ${a.status} ${JSON.stringify(a.body).slice(0, 300)}`);
  return a.body;
}

async function forEachLimited<T>(items: T[], limit: number, fn: (item: T, i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        await fn(items[i]!, i);
      }
    }),
  );
}

/** Retries `fn` until it succeeds (the service may still be electing leaders and creating its topics). */
async function ready<T>(what: string, fn: () => Promise<T>, timeoutMs = 120_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (e) {
      if (Date.now() > deadline) throw new BenchError(`${what} not ready after ${timeoutMs / 1000} s: ${String(e)}`);
      await sleep(500);
    }
  }
}

interface Arrival {
  message_id: string | null;
  notification_id: string | null;
  received_at: number;
  to: string;
}

/** Every message the push stand-in received for subscription `sub` (paged). */
async function arrivalsFor(provider: Pool, token: string, sub: string): Promise<Arrival[]> {
  const out: Arrival[] = [];
  let since = 0;
  for (;;) {
    const page = await must(
      provider,
      'GET',
      `/admin/received?to=${encodeURIComponent(sub)}&since=${since}&limit=10000`,
      token,
      undefined,
      'read the push service',
    );
    const messages = page.messages as Arrival[];
    out.push(...messages);
    const next = Number(page.next_since);
    // The stand-in scans at most `limit` matches; an unchanged cursor means it scanned to the end.
    if (messages.length < 10_000 || next === since) break;
    since = next;
  }
  return out;
}

/** GET /healthz of a worker (open). */
async function health(pool: Pool): Promise<Record<string, unknown>> {
  return (await requestJson(pool, 'GET', '/healthz', '')).body;
}

/** Records waiting in a topic's partitions for a consumer group: end offset minus the group's committed offset. */
async function backlogOf(log: LogClient, topic: string, group: string): Promise<number> {
  let total = 0;
  const partitions = await log.partitions(topic);
  for (let p = 0; p < partitions; p++) {
    const [committed, page] = await Promise.all([
      log.committed(topic, p, group),
      log.fetch(topic, p, 0, { maxRecords: 1, maxBytes: 1 }),
    ]);
    total += page.end_offset - Math.max(committed ?? 0, page.start_offset);
  }
  return total;
}

interface Backlog {
  /** Low notifications accepted and not yet routed: accepted by the API minus routed by the routers (/healthz). */
  to_route: number;
  /** Routed low messages not yet sent, per channel (the channel worker's committed offset on notify-low-<channel>). */
  channels: Record<string, number>;
}

async function channelBacklog(log: LogClient, fifo: boolean): Promise<Record<string, number>> {
  const channels: Record<string, number> = {};
  if (fifo) return channels;
  try {
    for (const c of BULK_CHANNELS) channels[c] = await backlogOf(log, `notify-low-${c}`, `notify-delivery-${c}`);
  } catch (e) {
    process.stderr.write(`bench: channel backlog not read: ${String(e)}\n`);
  }
  return channels;
}

/** Per pid, the process's name in the profile summaries: member, router, delivery, a provider, the fifo workers. */
function profileSummaries(dir: string, cluster: OurCluster, fifoPids: number[]): string {
  const roles = new Map<string, number[]>();
  const add = (role: string, pid: number): void => {
    let l = roles.get(role);
    if (l === undefined) roles.set(role, (l = []));
    l.push(pid);
  };
  for (const m of cluster.members) add('members', m.pid);
  for (const w of cluster.workers) add(w.role, w.pid);
  for (const pid of fifoPids) add('fifo-workers', pid);
  const parts: string[] = [];
  for (const [role, pids] of roles) {
    const profiles: CpuProfile[] = pids
      .map((pid) => join(dir, `member-${pid}.cpuprofile`))
      .filter((f) => existsSync(f))
      .map((f) => JSON.parse(readFileSync(f, 'utf8')) as CpuProfile);
    if (profiles.length === 0) continue;
    parts.push(formatSummary(summarizeProfile(profiles, 25), `${role} (${profiles.length} processes)`));
  }
  const text = parts.join('\n\n');
  writeFileSync(join(dir, 'summary.txt'), `${text}\n`);
  return text;
}

/** One side: ours (the cluster as `cluster up` starts it), or `fifo` (its router and channel worker on the FIFO layout). */
async function runSide(system: string, o: RunOptions, fifo: boolean): Promise<SideResult> {
  const env: NodeJS.ProcessEnv = {};
  if (o.profileDir !== null) {
    mkdirSync(o.profileDir, { recursive: true });
    env.NODE_OPTIONS =
      `${process.env.NODE_OPTIONS ?? ''} --import=${new URL('../profile-preload.js', import.meta.url).href}`.trim();
    env.BENCH_PROFILE_DIR = o.profileDir;
  }
  const cluster: OurCluster = await startOurCluster({
    service: 'notify',
    nodes: MEMBERS,
    settings: SETTINGS,
    env,
    ...(fifo ? { workers: FIFO_CLUSTER_WORKERS } : {}),
  });
  const pools: Pool[] = [];
  let fifoWorkers: FifoWorkers | null = null;
  const log = new LogClient({ endpoints: cluster.members.map((m) => m.url), token: cluster.token, timeoutMs: 15_000 });
  try {
    if (fifo) fifoWorkers = await startFifoWorkers(cluster, SETTINGS);
    const token = cluster.token;
    const pushWorker = cluster.workers.find((w) => w.role === 'push-provider');
    if (pushWorker === undefined) throw new BenchError('the notify cluster has no push-provider worker');
    const provider = new Pool(pushWorker.url, { connections: 8 });
    pools.push(provider);
    const deliveryPools = cluster.workers
      .filter((w) => w.role === 'delivery')
      .map((w) => new Pool(w.url, { connections: 2 }));
    const routerPools = cluster.workers
      .filter((w) => w.role === 'router')
      .map((w) => new Pool(w.url, { connections: 2 }));
    pools.push(...deliveryPools, ...routerPools);
    const apis = cluster.members.map((m) => new Pool(m.url, { connections: Math.max(8, o.concurrency) }));
    pools.push(...apis);
    // Preference reads on connections of their own (a client's), not queued behind the enqueue's POSTs.
    const prefApis = cluster.members.map((m) => new Pool(m.url, { connections: 2 }));
    pools.push(...prefApis);
    const api = (i: number): Pool => apis[i % apis.length]!;

    // Users: critical ones push only (one subscription each, registered at the stand-in, which keeps the private
    // key); bulk ones one channel each, spread over push, email and in-app.
    const critUsers = Array.from({ length: CRITICAL_USERS }, (_, i) => `crit${i}`);
    const bulkUsers = Array.from({ length: BULK_USERS }, (_, i) => `bulk${i}`);
    const users = [...critUsers, ...bulkUsers];
    const channelOf = (user: string, i: number): BulkChannel =>
      user.startsWith('crit') ? 'push' : BULK_CHANNELS[i % BULK_CHANNELS.length]!;
    const subscriptionOf = new Map<string, string>();
    const t0 = Date.now();
    process.stderr.write(`bench: ${system}: registering ${users.length} users\n`);
    await ready('the preference store', () =>
      must(api(0), 'GET', `/v1/users/${users[0]}/preferences`, token, undefined, 'read preferences'),
    );
    await forEachLimited(users, SETUP_CONCURRENCY, async (user, i) => {
      const channel = channelOf(user, i);
      const contact: Record<string, unknown> = {};
      if (channel === 'push') {
        const keys = subscriberKeys();
        const sub = await must(provider, 'POST', '/admin/subscriptions', token, keys, `subscribe ${user}`);
        subscriptionOf.set(user, String(sub.id));
        contact.push_subscriptions = [{ endpoint: sub.endpoint, keys: { p256dh: keys.p256dh, auth: keys.auth } }];
      } else if (channel === 'email') contact.email = `${user}@example.test`;
      await ready(`preferences of ${user}`, () =>
        must(
          api(i),
          'PUT',
          `/v1/users/${user}/preferences`,
          token,
          {
            channels_enabled: {
              push: channel === 'push',
              email: channel === 'email',
              sms: false,
              in_app: channel === 'in_app',
            },
            contact,
          },
          `preferences of ${user}`,
        ),
      );
    });
    process.stderr.write(`bench: ${system}: registered in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
    // One send end to end before the load, so the topics and workers are up.
    await ready(
      'a first delivery',
      async () => {
        await must(
          api(0),
          'POST',
          '/v1/notifications',
          token,
          {
            event_type: 'warmup',
            user_ids: ['crit0'],
            data: {},
            priority: 'critical',
            idempotency_key: `warmup-${system}`,
          },
          'warm-up send',
        );
        const got = await arrivalsFor(provider, token, subscriptionOf.get('crit0')!);
        if (got.length === 0) throw new Error('not yet delivered');
      },
      180_000,
    );

    // Preference reads as a client makes them (GET over HTTP, any member), one at a time, on a quiet stack.
    const prefRead = async (k: number): Promise<number> => {
      const user = users[(k * 7919) % users.length]!;
      const t = performance.now();
      const a = await requestJson(prefApis[k % prefApis.length]!, 'GET', `/v1/users/${user}/preferences`, token);
      const ms = performance.now() - t;
      if (a.status !== 200) throw new OpError(`HTTP ${a.status} (preferences)`, JSON.stringify(a.body).slice(0, 200));
      return ms;
    };
    const prefQuiet: number[] = [];
    for (let k = 0; k < PREF_READS_QUIET; k++) prefQuiet.push(await prefRead(k));

    const criticals: Critical[] = [];
    const errors: Record<string, number> = {};
    let stop = false;
    let bulkAccepted = 0;
    let seq = 0;
    const count = (e: unknown): void => {
      const k = errorKind(e);
      errors[k] = (errors[k] ?? 0) + 1;
    };

    // The backlog: --size low notifications (one per (notification, user)), BULK_USERS users per request, with
    // --concurrency requests in flight, all before the measured window.
    const backlogTarget = o.size;
    const bulkPost = async (loop: number): Promise<void> => {
      const n = seq++;
      const a = await requestJson(api(loop), 'POST', '/v1/notifications', token, {
        event_type: 'promo',
        user_ids: bulkUsers,
        data: { offer: 'bench' },
        priority: 'low',
        campaign_id: 'bench',
        idempotency_key: `${system}-bulk-${n}`,
      });
      if (a.status !== 202 && a.status !== 200)
        throw new OpError(`HTTP ${a.status}`, JSON.stringify(a.body).slice(0, 200));
      bulkAccepted += bulkUsers.length;
    };
    const tb = now();
    process.stderr.write(
      `bench: ${system}: enqueueing a backlog of ${backlogTarget} low notifications (${BULK_USERS} users per request, ${o.concurrency} requests in flight)\n`,
    );
    const enqueueProgress = setInterval(() => {
      process.stderr.write(
        `bench: ${system}: ${String(bulkAccepted)} bulk accepted in ${((now() - tb) / 1000).toFixed(0)} s\n`,
      );
    }, 10_000);
    // Rounds of --concurrency requests until the notifications accepted and not yet routed reach the target (the
    // routers drain meanwhile); once before the warm-up, and again after it, just before the window.
    const fill = async (): Promise<void> => {
      for (;;) {
        const waiting = bulkAccepted - (await routedTotal(routerPools));
        if (waiting >= backlogTarget) return;
        const round = Math.min(o.concurrency, Math.ceil((backlogTarget - waiting) / BULK_USERS));
        await Promise.all(
          Array.from({ length: round }, async (_, loop) => {
            try {
              await bulkPost(loop);
            } catch (e) {
              count(e);
              await sleep(200);
            }
          }),
        );
      }
    };
    await fill();
    clearInterval(enqueueProgress);
    const enqueueS = (now() - tb) / 1000;
    const enqueuedFirst = bulkAccepted;
    process.stderr.write(
      `bench: ${system}: ${String(bulkAccepted)} accepted in ${enqueueS.toFixed(1)} s (${Math.round(bulkAccepted / enqueueS)}/s)\n`,
    );
    await sleep(o.warmupS * 1000);
    await fill();

    const sendCritical = async (k: number): Promise<void> => {
      const c: Critical = {
        key: `${system}-crit-${k}`,
        user: `crit${k % CRITICAL_USERS}`,
        sentAt: now(),
        acceptedAt: null,
        notificationId: null,
      };
      criticals.push(c);
      try {
        const a = await requestJson(api(k), 'POST', '/v1/notifications', token, {
          event_type: 'otp',
          user_ids: [c.user],
          data: { code: String(100000 + k) },
          priority: 'critical',
          idempotency_key: c.key,
        });
        if (a.status !== 202 && a.status !== 200)
          throw new OpError(`HTTP ${a.status} (critical)`, JSON.stringify(a.body).slice(0, 200));
        c.acceptedAt = now();
        c.notificationId = String(a.body.notification_id);
      } catch (e) {
        count(e);
      }
    };

    const serverPids = [
      ...cluster.members.map((m) => m.pid),
      ...cluster.workers.map((w) => w.pid),
      ...(fifoWorkers?.pids ?? []),
    ];
    const cpuOf = (): number => serverPids.reduce((s, p) => s + (cpuSeconds(p) ?? 0), 0);
    // The profile covers the window from here (the setup and the enqueue left out).
    if (o.profileDir !== null) for (const pid of serverPids) process.kill(pid, 'SIGUSR2');
    const sentBefore = await sentByChannel(deliveryPools);
    const routedBefore = await routedTotal(routerPools);
    const backlogBefore: Backlog = { to_route: bulkAccepted - routedBefore, channels: await channelBacklog(log, fifo) };
    process.stderr.write(
      `bench: ${system}: window of ${o.durationS} s with ${CRITICAL_PER_S} critical/s; backlog ${JSON.stringify(backlogBefore)}\n`,
    );
    const cpu0 = cpuOf();
    const w0 = now();
    const trickle: Array<Promise<void>> = [];
    let k = 0;
    const ticker = setInterval(() => trickle.push(sendCritical(k++)), 1000 / CRITICAL_PER_S);
    // Preference reads under the load: one client at PREF_READS_PER_S, each read timed alone.
    const prefLoaded: number[] = [];
    const prefLoop = (async () => {
      let n = 0;
      while (!stop) {
        try {
          prefLoaded.push(await prefRead(n++));
        } catch (e) {
          count(e);
        }
        await sleep(1000 / PREF_READS_PER_S);
      }
    })();
    const progress = setInterval(() => {
      void Promise.all([routedTotal(routerPools), channelBacklog(log, fifo)]).then(([routed, channels]) =>
        process.stderr.write(
          `bench: ${system}: ${((now() - w0) / 1000).toFixed(0)} s: ${criticals.length} criticals sent, ${bulkAccepted - routed} to route, ${JSON.stringify(channels)} to send\n`,
        ),
      );
    }, 10_000);
    await sleep(o.durationS * 1000);
    clearInterval(ticker);
    clearInterval(progress);
    stop = true;
    const windowS = (now() - w0) / 1000;
    const cpu1 = cpuOf();
    const sentAfter = await sentByChannel(deliveryPools);
    const routedAfter = await routedTotal(routerPools);
    const backlogAfter: Backlog = { to_route: bulkAccepted - routedAfter, channels: await channelBacklog(log, fifo) };
    await Promise.all([...trickle, prefLoop]);

    // Wait for every accepted critical to reach the push service.
    const accepted = criticals.filter((c) => c.acceptedAt !== null);
    const byNotification = new Map(accepted.map((c) => [c.notificationId!, c]));
    const critSubs = [...new Set(accepted.map((c) => subscriptionOf.get(c.user)!))];
    const deadline = Date.now() + DRAIN_WAIT_S * 1000;
    let arrivals: Arrival[] = [];
    for (;;) {
      arrivals = (await Promise.all(critSubs.map((s) => arrivalsFor(provider, token, s)))).flat();
      const seen = new Set(arrivals.map((a) => a.notification_id));
      const missing = accepted.filter((c) => !seen.has(c.notificationId)).length;
      if (missing === 0 || Date.now() > deadline) break;
      process.stderr.write(
        `bench: ${system}: waiting for ${missing} critical notifications to reach the push service\n`,
      );
      await sleep(2_000);
    }
    const firstArrival = new Map<string, number>();
    const perMessage = new Map<string, number>();
    for (const a of arrivals) {
      if (a.notification_id === null || !byNotification.has(a.notification_id)) continue;
      const prev = firstArrival.get(a.notification_id);
      if (prev === undefined || a.received_at < prev) firstArrival.set(a.notification_id, a.received_at);
      const key = a.message_id ?? a.notification_id;
      perMessage.set(key, (perMessage.get(key) ?? 0) + 1);
    }
    const latency: number[] = [];
    const fromSend: number[] = [];
    const acceptMs: number[] = [];
    for (const c of accepted) {
      acceptMs.push(c.acceptedAt! - c.sentAt);
      const at = firstArrival.get(c.notificationId!);
      if (at === undefined) continue;
      latency.push(Math.max(0, at - c.acceptedAt!));
      fromSend.push(Math.max(0, at - c.sentAt));
    }
    // Where the time went: critical_accept_to_send_* is accept -> the delivery_log's last_attempt_at, which the
    // channel worker writes with the outcome, after the provider answered (so it can exceed accept -> arrival);
    // beside accept -> arrival it shows whether the time went before the send (routing, queues) or after it.
    const toAttempt: number[] = [];
    await forEachLimited(
      accepted.filter((c) => firstArrival.has(c.notificationId!)),
      8,
      async (c) => {
        const st = await requestJson(api(0), 'GET', `/v1/notifications/${c.notificationId}/status`, token);
        const row = (
          st.body.channels as Array<{ channel?: string; last_attempt_at?: number | null }> | undefined
        )?.find((r) => r.channel === 'push');
        if (typeof row?.last_attempt_at === 'number') toAttempt.push(Math.max(0, row.last_attempt_at - c.acceptedAt!));
      },
    );
    const attempt = summarize(toAttempt);
    const lat = summarize(latency);
    const send = summarize(fromSend);
    const acc = summarize(acceptMs);
    const pq = summarize(prefQuiet);
    const pl = summarize(prefLoaded);
    const duplicated = [...perMessage.values()].filter((n) => n > 1).length;
    const perChannel: Record<string, number> = {};
    let sent = 0;
    for (const c of BULK_CHANNELS) {
      const n = (sentAfter[c] ?? 0) - (sentBefore[c] ?? 0);
      perChannel[c] = round(n / windowS, 0);
      sent += n;
    }
    const cpu = cpu1 - cpu0;
    const result: SideResult = {
      system,
      members: MEMBERS,
      // Throughput: messages the providers acknowledged per second in the window, every channel (bulk and critical).
      ops_per_sec: round(sent / windowS, 0),
      ops: sent,
      errors: Object.values(errors).reduce((a, b) => a + b, 0),
      error_kinds: errors,
      duration_s: round(windowS, 1),
      warmup_s: o.warmupS,
      concurrency: o.concurrency,
      interrupted: false,
      mean_ms: lat.mean_ms,
      p50_ms: lat.p50_ms,
      p90_ms: lat.p90_ms,
      p99_ms: lat.p99_ms,
      p999_ms: lat.p999_ms,
      max_ms: lat.max_ms,
      server_cpu_s: round(cpu, 2),
      server_cpu_cores: round(cpu / windowS, 2),
      server_cpu_us_per_op: sent === 0 ? null : round((cpu * 1e6) / sent, 1),
      client_cpu_cores: 0,
      backlog_enqueued: bulkAccepted,
      backlog_enqueue_s: round(enqueueS, 1),
      backlog_enqueue_per_s: round(enqueuedFirst / enqueueS, 0),
      backlog_at_window_start: backlogBefore,
      backlog_at_window_end: backlogAfter,
      bulk_routed_per_s: round((routedAfter - routedBefore) / windowS, 0),
      bulk_sent_per_s_by_channel: perChannel,
      critical_sent: criticals.length,
      critical_accepted: accepted.length,
      critical_received: firstArrival.size,
      critical_lost: accepted.length - firstArrival.size,
      critical_duplicated: duplicated,
      critical_p50_ms: lat.p50_ms,
      critical_p99_ms: lat.p99_ms,
      critical_max_ms: lat.max_ms,
      critical_from_request_p99_ms: send.p99_ms,
      critical_accept_to_send_p50_ms: attempt.p50_ms,
      critical_accept_to_send_p99_ms: attempt.p99_ms,
      critical_accept_p50_ms: acc.p50_ms,
      critical_accept_p99_ms: acc.p99_ms,
      pref_read_quiet: { reads: prefQuiet.length, p50_ms: pq.p50_ms, p99_ms: pq.p99_ms, max_ms: pq.max_ms },
      pref_read_loaded: { reads: prefLoaded.length, p50_ms: pl.p50_ms, p99_ms: pl.p99_ms, max_ms: pl.max_ms },
      drain_wait_s: DRAIN_WAIT_S,
    };
    process.stderr.write(
      `bench: ${system}: critical p50/p99/max ${lat.p50_ms}/${lat.p99_ms}/${lat.max_ms} ms (accept -> push service), ${String(result.critical_lost)} lost, ${duplicated} duplicated; ` +
        `bulk sent/s by channel ${JSON.stringify(perChannel)}, routed ${String(result.bulk_routed_per_s)}/s; ` +
        `preference reads p50/p99 quiet ${pq.p50_ms}/${pq.p99_ms} ms, under load ${pl.p50_ms}/${pl.p99_ms} ms\n`,
    );
    return result;
  } finally {
    await Promise.all(pools.map((p) => p.close().catch(() => undefined)));
    await log.close().catch(() => undefined);
    await fifoWorkers?.stop();
    await cluster.stop();
    if (o.profileDir !== null) {
      const text = profileSummaries(o.profileDir, cluster, fifoWorkers?.pids ?? []);
      process.stderr.write(`bench: CPU profiles of the window in ${o.profileDir}\n${text}\n`);
    }
  }
}

/** Messages the delivery workers' providers acknowledged so far, per channel (their /healthz). */
async function sentByChannel(pools: Pool[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const p of pools) {
    const h = await health(p).catch(() => ({}) as Record<string, unknown>);
    for (const [c, n] of Object.entries((h.sent_by_channel ?? {}) as Record<string, number>))
      out[c] = (out[c] ?? 0) + n;
  }
  return out;
}

/** Ingestion records the routers routed so far (their /healthz). */
async function routedTotal(pools: Pool[]): Promise<number> {
  let total = 0;
  for (const p of pools) total += Number((await health(p).catch(() => ({}) as Record<string, unknown>)).routed ?? 0);
  return total;
}

const backlogText = (b: unknown): string => {
  const v = b as Backlog | null;
  return v === null || v === undefined
    ? 'not read'
    : `${v.to_route} to route, ${Object.entries(v.channels)
        .map(([c, n]) => `${n} ${c}`)
        .join(', ')} to send`;
};

export const notifyBenchmark: Benchmark = {
  name: 'notify',
  description:
    'Critical notifications while a bulk backlog of --size low notifications drains (push shared with a third of it): latency from accept to the push service, lost and duplicated criticals, bulk throughput per channel, preference read latency over HTTP; --vs fifo: one FIFO queue per channel',
  title: (o) => `notify: critical latency while a backlog of ${o.size} bulk notifications drains`,
  peers: ['fifo'],
  defaults: { durationS: 30, concurrency: 4, size: BACKLOG_GOAL, warmupS: 5 },
  workload: (o) => ({
    members: MEMBERS,
    backlog_low_notifications: o.size,
    bulk_users: BULK_USERS,
    bulk_users_per_request: BULK_USERS,
    bulk_channels: 'one per bulk user: push, email, in_app (a third each)',
    enqueue_requests_in_flight: o.concurrency,
    critical_users: CRITICAL_USERS,
    critical_per_s: CRITICAL_PER_S,
    channel: 'critical: push (Web Push, VAPID + aes128gcm, to the stand-in push service which decrypts)',
    latency: 'critical: API 202 -> arrival at the push service',
    preference_reads: `GET /v1/users/{id}/preferences over HTTP, one client: ${PREF_READS_QUIET} on the quiet stack, ${PREF_READS_PER_S}/s in the window`,
    drain_wait_s: DRAIN_WAIT_S,
    campaign_rate_per_minute: 100_000_000,
  }),
  goals(ours, peer) {
    const start = ours.backlog_at_window_start as Backlog | null;
    const waiting =
      start === null || start === undefined
        ? 0
        : start.to_route + Object.values(start.channels).reduce((a, b) => a + b, 0);
    const quiet = ours.pref_read_quiet as { p99_ms: number; p50_ms: number; reads: number };
    const loaded = ours.pref_read_loaded as { p99_ms: number; p50_ms: number; reads: number };
    const goals: Goal[] = [
      {
        goal: `critical p99 < ${CRITICAL_P99_GOAL_MS} ms while a bulk backlog of >= ${BACKLOG_GOAL} drains (ours)`,
        met: ours.p99_ms < CRITICAL_P99_GOAL_MS && Number(ours.critical_received) > 0 && waiting >= BACKLOG_GOAL,
        detail: `p50/p99/max ${ours.p50_ms}/${ours.p99_ms}/${ours.max_ms} ms over ${String(ours.critical_received)} criticals; backlog ${String(ours.backlog_enqueued)} enqueued, at the window's start ${backlogText(start)} (${waiting} waiting), at its end ${backlogText(ours.backlog_at_window_end)}`,
      },
      {
        goal: 'zero critical lost or duplicated (ours)',
        met: ours.critical_lost === 0 && ours.critical_duplicated === 0,
        detail: `${String(ours.critical_accepted)} accepted, ${String(ours.critical_lost)} not received within ${DRAIN_WAIT_S} s, ${String(ours.critical_duplicated)} duplicated`,
      },
      {
        goal: 'bulk throughput reported per channel (ours)',
        met: ours.bulk_sent_per_s_by_channel !== undefined && Number(ours.ops) > 0,
        detail: `sent/s ${Object.entries((ours.bulk_sent_per_s_by_channel ?? {}) as Record<string, number>)
          .map(([c, n]) => `${c} ${n}`)
          .join(
            ', ',
          )}; routed ${String(ours.bulk_routed_per_s)} records/s; enqueued ${String(ours.backlog_enqueue_per_s)}/s`,
      },
      {
        goal: `preference reads p99 < ${PREF_P99_GOAL_MS} ms over HTTP, measured (ours)`,
        met: quiet.p99_ms < PREF_P99_GOAL_MS && loaded.p99_ms < PREF_P99_GOAL_MS,
        detail: `quiet stack p50/p99 ${quiet.p50_ms}/${quiet.p99_ms} ms over ${quiet.reads} reads; while the backlog drains ${loaded.p50_ms}/${loaded.p99_ms} ms over ${loaded.reads} reads`,
      },
    ];
    if (peer !== null) {
      goals.push({
        goal: 'priority queues beat one FIFO queue per channel (critical p99)',
        met: ours.p99_ms < peer.p99_ms || Number(peer.critical_lost) > 0,
        detail: `${ours.p99_ms} ms vs ${peer.p99_ms} ms (fifo: ${String(peer.critical_lost)} not received within ${DRAIN_WAIT_S} s)`,
      });
    }
    return goals;
  },
  runOurs: (o) => runSide('ours', o, false),
  runPeer: (peer, o) => {
    if (peer !== 'fifo') throw new BenchError(`notify has no peer ${peer}`);
    return runSide('fifo', o, true);
  },
};
