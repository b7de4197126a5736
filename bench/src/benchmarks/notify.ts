/**
 * `notify` (issue 20): priority isolation under a bulk flood. Our notification service as `cluster up --service
 * notify` starts it (members hosting the event log's partitions and the state groups, the router, the channel
 * workers and the stand-in providers), driven through its public API with the cluster token, as an internal
 * caller would.
 *
 * Users: BULK_USERS and CRITICAL_USERS, each with push only enabled and one Web Push subscription made at the
 * stand-in push service (a fresh P-256 key pair and auth secret from node:crypto; the stand-in decrypts every
 * message with it). Both kinds share the push channel, so the only thing between a critical message and its
 * device is the channel's queueing.
 *
 * The load, for --warmup + --duration seconds: --concurrency closed loops each POSTing low-priority bulk sends of
 * BULK_FANOUT users (fresh idempotency keys), as fast as the API accepts them (the highest rate this machine
 * sustains), and from the end of the warm-up a steady trickle of CRITICAL_PER_S critical sends, one user each.
 * The campaign limit at routing is lifted (campaign_rate_per_minute) so the flood is as large as the machine allows.
 * After the window the flood stops and the benchmark waits (at most DRAIN_WAIT_S) for every accepted critical to
 * reach the push service.
 *
 * Figures: critical end-to-end latency, from the API's 202 (accepted) to the stand-in push service's arrival time
 * (same machine clock), p50/p99/max, as the headline latency; critical accepted / received / lost (not received
 * within the wait) / duplicated (a message_id that arrived twice); accept -> the outcome recorded in the
 * delivery_log (its last_attempt_at); bulk throughput = push messages the provider
 * received per second in the window (and bulk recipients accepted per second by the API).
 *
 * `--vs fifo`: the same run with the naive design, one FIFO queue per channel (../peers/notify-fifo-layout.ts: the
 * service's own router and channel worker, started by the benchmark with every priority in one topic per channel):
 * a critical message waits behind every bulk message queued before it. Goal: ours critical p99 < 1 s (the spec allows 30 s) and zero critical lost or
 * duplicated.
 */
import { createECDH, randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import type { Benchmark, Goal, RunOptions, SideResult } from '../benchmark.js';
import { errorKind, OpError } from '../load.js';
import { startOurCluster, type OurCluster } from '../ours.js';
import { FIFO_CLUSTER_WORKERS, startFifoWorkers, type FifoWorkers } from '../peers/notify-fifo.js';
import { BenchError, cpuSeconds, sleep } from '../procs.js';
import { round, summarize } from '../stats.js';

const MEMBERS = 3;
const BULK_USERS = 2_000;
const BULK_FANOUT = 100;
const CRITICAL_USERS = 20;
const CRITICAL_PER_S = 10;
const DRAIN_WAIT_S = 120;
const SETUP_CONCURRENCY = 16;
const CRITICAL_P99_GOAL_MS = 1_000;
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

/** One side: ours (the cluster as `cluster up` starts it), or `fifo` (its router and channel worker on the FIFO layout). */
async function runSide(system: string, o: RunOptions, fifo: boolean): Promise<SideResult> {
  const cluster: OurCluster = await startOurCluster({
    service: 'notify',
    nodes: MEMBERS,
    settings: SETTINGS,
    ...(fifo ? { workers: FIFO_CLUSTER_WORKERS } : {}),
  });
  const pools: Pool[] = [];
  let fifoWorkers: FifoWorkers | null = null;
  try {
    if (fifo) fifoWorkers = await startFifoWorkers(cluster, SETTINGS);
    const token = cluster.token;
    const pushWorker = cluster.workers.find((w) => w.role === 'push-provider');
    if (pushWorker === undefined) throw new BenchError('the notify cluster has no push-provider worker');
    const provider = new Pool(pushWorker.url, { connections: 8 });
    pools.push(provider);
    const apis = cluster.members.map((m) => new Pool(m.url, { connections: Math.max(8, o.concurrency) }));
    pools.push(...apis);
    const api = (i: number): Pool => apis[i % apis.length]!;

    // Users: push only, one subscription each, registered at the stand-in (which keeps the private key).
    const users = [
      ...Array.from({ length: CRITICAL_USERS }, (_, i) => `crit${i}`),
      ...Array.from({ length: BULK_USERS }, (_, i) => `bulk${i}`),
    ];
    const subscriptionOf = new Map<string, string>();
    const t0 = Date.now();
    process.stderr.write(`bench: ${system}: registering ${users.length} users with a push subscription each\n`);
    await ready('the preference store', () =>
      must(api(0), 'GET', `/v1/users/${users[0]}/preferences`, token, undefined, 'read preferences'),
    );
    await forEachLimited(users, SETUP_CONCURRENCY, async (user, i) => {
      const keys = subscriberKeys();
      const sub = await must(provider, 'POST', '/admin/subscriptions', token, keys, `subscribe ${user}`);
      subscriptionOf.set(user, String(sub.id));
      await ready(`preferences of ${user}`, () =>
        must(
          api(i),
          'PUT',
          `/v1/users/${user}/preferences`,
          token,
          {
            channels_enabled: { push: true, email: false, sms: false, in_app: false },
            contact: {
              push_subscriptions: [{ endpoint: sub.endpoint, keys: { p256dh: keys.p256dh, auth: keys.auth } }],
            },
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

    const bulkUsers = users.slice(CRITICAL_USERS);
    const criticals: Critical[] = [];
    const errors: Record<string, number> = {};
    let stop = false;
    let measuring = false;
    let bulkAccepted = 0;
    let bulkRequests = 0;
    let seq = 0;
    const count = (e: unknown): void => {
      const k = errorKind(e);
      errors[k] = (errors[k] ?? 0) + 1;
    };

    const flood = async (loop: number): Promise<void> => {
      while (!stop) {
        const start = (seq++ * BULK_FANOUT) % bulkUsers.length;
        const batch = bulkUsers.slice(start, start + BULK_FANOUT);
        try {
          const a = await requestJson(api(loop), 'POST', '/v1/notifications', token, {
            event_type: 'promo',
            user_ids: batch,
            data: { offer: 'bench' },
            priority: 'low',
            campaign_id: 'bench',
            idempotency_key: `${system}-bulk-${seq}-${loop}`,
          });
          if (a.status !== 202 && a.status !== 200)
            throw new OpError(`HTTP ${a.status}`, JSON.stringify(a.body).slice(0, 200));
          if (measuring) {
            bulkAccepted += batch.length;
            bulkRequests++;
          }
        } catch (e) {
          count(e);
          if (!stop) await sleep(50);
        }
      }
    };
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
    process.stderr.write(
      `bench: ${system}: flood with ${o.concurrency} loops of ${BULK_FANOUT}-user low sends; ${o.warmupS} s warm-up, then ${o.durationS} s with ${CRITICAL_PER_S} critical/s\n`,
    );
    const floods = Array.from({ length: o.concurrency }, (_, i) => flood(i));
    await sleep(o.warmupS * 1000);
    measuring = true;
    const before = await must(provider, 'GET', '/admin/counts', token, undefined, 'provider counts');
    const cpu0 = cpuOf();
    const w0 = now();
    const trickle: Array<Promise<void>> = [];
    let k = 0;
    const ticker = setInterval(() => trickle.push(sendCritical(k++)), 1000 / CRITICAL_PER_S);
    const progress = setInterval(() => {
      void requestJson(provider, 'GET', '/admin/counts', token).then((a) =>
        process.stderr.write(
          `bench: ${system}: ${((now() - w0) / 1000).toFixed(0)} s: ${String(bulkAccepted)} bulk recipients accepted, push service total ${String(a.body.total)}\n`,
        ),
      );
    }, 10_000);
    await sleep(o.durationS * 1000);
    clearInterval(ticker);
    clearInterval(progress);
    const windowS = (now() - w0) / 1000;
    const after = await must(provider, 'GET', '/admin/counts', token, undefined, 'provider counts');
    const cpu1 = cpuOf();
    measuring = false;
    stop = true;
    await Promise.all([...floods, ...trickle]);

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
    const duplicated = [...perMessage.values()].filter((n) => n > 1).length;
    const delivered = Number(after.total) - Number(before.total);
    const cpu = cpu1 - cpu0;
    const result: SideResult = {
      system,
      members: MEMBERS,
      // Throughput: push messages the provider received per second in the window (bulk and the critical trickle).
      ops_per_sec: round(delivered / windowS, 0),
      ops: delivered,
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
      server_cpu_us_per_op: delivered === 0 ? null : round((cpu * 1e6) / delivered, 1),
      client_cpu_cores: 0,
      bulk_recipients_accepted_per_s: round(bulkAccepted / windowS, 0),
      bulk_requests_accepted: bulkRequests,
      push_messages_received_per_s: round(delivered / windowS, 0),
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
      push_service_duplicated_total: Number(after.duplicated ?? 0),
      drain_wait_s: DRAIN_WAIT_S,
    };
    process.stderr.write(
      `bench: ${system}: critical p50/p99/max ${lat.p50_ms}/${lat.p99_ms}/${lat.max_ms} ms (accept -> push service), ${String(result.critical_lost)} lost, ${duplicated} duplicated; ` +
        `push service ${String(result.push_messages_received_per_s)} msg/s, bulk accepted ${String(result.bulk_recipients_accepted_per_s)} recipients/s\n`,
    );
    return result;
  } finally {
    await Promise.all(pools.map((p) => p.close().catch(() => undefined)));
    await fifoWorkers?.stop();
    await cluster.stop();
  }
}

export const notifyBenchmark: Benchmark = {
  name: 'notify',
  description:
    'Critical notifications under a low-priority bulk flood on the same push channel: latency from accept to the push service, lost and duplicated criticals, bulk throughput; --vs fifo: one FIFO queue per channel',
  title: (o) => `notify: critical latency under a bulk flood (${o.concurrency} flood loops x ${BULK_FANOUT} users)`,
  peers: ['fifo'],
  defaults: { durationS: 30, concurrency: 8, size: 0, warmupS: 10 },
  workload: (o) => ({
    members: MEMBERS,
    bulk_users: BULK_USERS,
    bulk_fanout_per_request: BULK_FANOUT,
    flood_loops: o.concurrency,
    critical_users: CRITICAL_USERS,
    critical_per_s: CRITICAL_PER_S,
    channel: 'push (Web Push, VAPID + aes128gcm, to the stand-in push service which decrypts)',
    latency: 'critical: API 202 -> arrival at the push service',
    drain_wait_s: DRAIN_WAIT_S,
    campaign_rate_per_minute: 100_000_000,
  }),
  goals(ours, peer) {
    const goals: Goal[] = [
      {
        goal: `critical p99 < ${CRITICAL_P99_GOAL_MS} ms under the flood (ours)`,
        met: ours.p99_ms < CRITICAL_P99_GOAL_MS && Number(ours.critical_received) > 0,
        detail: `p50/p99/max ${ours.p50_ms}/${ours.p99_ms}/${ours.max_ms} ms over ${String(ours.critical_received)} criticals`,
      },
      {
        goal: 'zero critical lost or duplicated (ours)',
        met: ours.critical_lost === 0 && ours.critical_duplicated === 0,
        detail: `${String(ours.critical_accepted)} accepted, ${String(ours.critical_lost)} not received within ${DRAIN_WAIT_S} s, ${String(ours.critical_duplicated)} duplicated`,
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
