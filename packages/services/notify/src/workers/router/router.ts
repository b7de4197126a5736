/**
 * The router (worker role `router`): one loop per priority consumes that priority's ingestion topic (in order per
 * user, different users concurrently) and, per (notification, user): dedup (the state group routes a pair once), preferences, quiet hours in the user's time
 * zone, frequency caps (applied atomically in the state group), the per-channel template, one message per channel
 * left into the (priority, channel) topic. Offsets are committed after the messages are queued, so a router killed
 * mid-batch replays it: the state group answers the rows made the first time, and they are queued again (the
 * channel worker sends a row only while it is pending). Low-priority sends are rate limited per campaign here, each
 * campaign at its own rate (the low loop does not hold one campaign behind another: see lowLoop).
 *
 * Routers (ROUTER_COUNT) are one consumer group of the log (`notify-router`, members `router-<k>`, GroupConsumer in
 * packages/platform/log): the group's coordinator spreads the partitions of the four ingestion topics over the live
 * routers, so a router that dies hands its partitions to the others when its lease lapses (4 s) and gets them back
 * when it returns; one loop per partition held. Commits carry the group's generation (a router the group moved on
 * from cannot move an offset any more).
 *
 * Settings (`cluster up --set`): campaign_rate_per_minute (default 100000), shared by the live routers (each allows
 * its share, the rate divided by the members it last heard of).
 */
import {
  clusterUrl,
  deriveServiceToken,
  fullCounter,
  serveWorkerHttp,
  take,
  type BucketCounter,
  type BucketLimits,
  type RunningWorker,
  type WorkerOptions,
  type WorkerRole,
} from '@raftkit/http';
import {
  LogClient,
  type LogProducer,
  CheckedConsumer,
  DeadLetterQueue,
  GroupConsumer,
  type PartitionClaim,
} from '@raftkit/log';
import { PRIORITIES, type Address, type Channel, type Priority } from '../delivery/channels/channel.js';
import {
  allStateGroups,
  groupOf,
  ingestTopic,
  NOTIFY,
  PRIORITY_LAYOUT,
  ROUTER_GROUP,
  DEAD_LETTER_TOPIC,
  type QueueLayout,
} from '../../placement.js';
import {
  defaultPreferences,
  type DeliveryRow,
  type Preferences,
  type RouteStep,
  type Template,
} from '../../machine.js';
import type { RouteContext, RouteContexts } from '../../queries.js';
import { inQuietHours } from '../../quiet-hours.js';
import { StateClient } from '../../state-client.js';
import { render } from '../../template.js';
import { decodeIngest, type IngestRecord, type QueuedMessage } from '../../records.js';

const ROUTER_COUNT = 2;
export const routerRole: WorkerRole = { role: 'router', count: ROUTER_COUNT, start: startRouter };

export function addressOf(prefs: Preferences, channel: Channel, userId: string): Address | null {
  switch (channel) {
    case 'email':
      return prefs.contact.email === null ? null : { channel, email: prefs.contact.email };
    case 'sms':
      return prefs.contact.phone === null ? null : { channel, phone: prefs.contact.phone };
    case 'push':
      return prefs.contact.push_subscriptions.length === 0
        ? null
        : { channel, subscriptions: prefs.contact.push_subscriptions };
    case 'in_app':
      return { channel, user_id: userId };
  }
}

/**
 * The channels a user gets for one event, and why the others are left out. SMS is reserved for critical (spec
 * rule 8). Quiet hours hold back the intrusive channels (push, SMS, email) of non-critical events; in-app is silent
 * so it is still stored; critical bypasses quiet hours (a one-time code at 3 am is asked for).
 */
export function chooseChannels(
  prefs: Preferences,
  priority: Priority,
  userId: string,
  now: number,
): { channels: Channel[]; suppressed: Array<{ channel: Channel; reason: string }> } {
  const channels: Channel[] = [];
  const suppressed: Array<{ channel: Channel; reason: string }> = [];
  const quiet = priority !== 'critical' && inQuietHours(prefs.quiet_hours, now);
  for (const channel of ['sms', 'push', 'email', 'in_app'] as const) {
    if (!prefs.channels_enabled[channel]) suppressed.push({ channel, reason: 'opted_out' });
    else if (channel === 'sms' && priority !== 'critical') suppressed.push({ channel, reason: 'sms_critical_only' });
    else if (addressOf(prefs, channel, userId) === null) suppressed.push({ channel, reason: 'no_address' });
    else if (quiet && channel !== 'in_app') suppressed.push({ channel, reason: 'quiet_hours' });
    else channels.push(channel);
  }
  return { channels, suppressed };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const PRUNE_EVERY_MS = 10 * 60_000;

/** Users routed at once per priority loop (each user's records stay in order). */
const ROUTE_CONCURRENCY = 64;
/**
 * Low records waiting to be routed at once per low partition. They are routed in batches per state group (lowBatch
 * in startRouter), one batch per group in flight: a record routed alone is three requests to the members, which the
 * critical records' routes and sends share, and requests in flight past what the members serve add no throughput,
 * only queueing in front of a critical request.
 */
const LOW_ROUTE_CONCURRENCY = 16;
/** Low records of one state group routed by one context read and one `routeMany` command, at most. */
const LOW_BATCH = 200;
/** Low-priority records the router holds at once while their campaigns wait for tokens (memory bound). */
const LOW_WINDOW = 10_000;

/** The router on `layout` (the design's unless given: see QueueLayout). */
export async function startRouter(
  options: WorkerOptions,
  layout: QueueLayout = PRIORITY_LAYOUT,
): Promise<RunningWorker> {
  // The members take notify's own workers as internal callers by this token (not by the cluster token's reach).
  const token = deriveServiceToken(options.tokens[0]!, NOTIFY);
  const endpoints = options.members.map((m) => clusterUrl(m.httpAddress));
  const state = new StateClient({ endpoints, token, timeoutMs: 10_000 });
  const log = new LogClient({ endpoints, token, timeoutMs: 10_000 });
  const perMinute = Number(options.settings.campaign_rate_per_minute ?? 100_000);
  // Each live router allows its share of a campaign's rate (a campaign's users are spread over the partitions).
  const campaignLimits = (): BucketLimits => {
    const share = perMinute / Math.max(1, group?.members.length ?? 1);
    return { capacity: share, refillRate: share / 60 };
  };
  let group: GroupConsumer | null = null;
  const campaigns = new Map<string, BucketCounter>();
  const prefsCache = new Map<string, Preferences>();
  const stats = { routed: 0, messages: 0, held: 0, rate_limited_waits: 0, low_waits_for_critical: 0 };
  let stopping = false;
  // Critical records being routed in this process, and the low routes waiting for them to be done: a low route
  // starts only while no critical one is in flight, so a critical record's requests meet the fewest bulk ones.
  let criticalRouting = 0;
  let criticalDone: Array<() => void> = [];
  const criticalIdle = async (): Promise<void> => {
    if (criticalRouting === 0) return;
    stats.low_waits_for_critical++;
    while (criticalRouting > 0) await new Promise<void>((r) => criticalDone.push(r));
  };

  // Poison records (not an ingestion record) go here with their reason; their neighbours are routed as usual.
  const deadLetters = new DeadLetterQueue(log, DEAD_LETTER_TOPIC);
  const http = await serveWorkerHttp(options, {
    health: () => ({
      ...stats,
      dead_lettered: deadLetters.written,
      generation: group?.generation ?? 0,
      members: group?.members ?? [],
      partitions: group?.assigned.map((a) => `${a.topic}/${a.partition}`) ?? [],
    }),
  });
  const routed = http.metrics.counter('notify_routed_total', 'Ingestion records routed');
  http.metrics
    .gauge(
      'notify_router_dead_lettered',
      'Ingestion records refused by the decode step and written to the dead-letter topic',
    )
    .set(() => deadLetters.written);

  // Setup (state groups and topics) is idempotent; retried until the members can do it.
  for (;;) {
    if (stopping) break;
    try {
      await state.router.call('meta', 'POST', '/v1/notify/setup', {});
      await layout.setup?.(log);
      break;
    } catch (e) {
      options.logger.log('warn', 'notify setup not done yet', { error: String((e as Error).message) });
      await sleep(500);
    }
  }

  const producers = new Map<string, LogProducer>();
  const producerOf = (topic: string): LogProducer => {
    let p = producers.get(topic);
    if (p === undefined) producers.set(topic, (p = log.producer(topic)));
    return p;
  };

  /** Low-priority sends wait here for their campaign's tokens (backpressure on the low loop only). */
  async function campaignToken(campaign: string): Promise<void> {
    for (;;) {
      let counter = campaigns.get(campaign);
      const limits = campaignLimits();
      if (counter === undefined) campaigns.set(campaign, (counter = fullCounter(limits, Date.now())));
      const result = take(counter, limits, Date.now());
      if (result.allowed) return;
      stats.rate_limited_waits++;
      await sleep(Math.min(1000, result.retryAfterMs ?? 10));
    }
  }

  /** Queues a routed record's pending rows on their channels' topics, each rendered with its channel's template. */
  function queueRows(
    record: IngestRecord,
    rows: readonly DeliveryRow[],
    prefs: Preferences,
    templates: Partial<Record<Channel, Template>>,
  ): Array<Promise<unknown>> {
    const sends: Array<Promise<unknown>> = [];
    for (const row of rows) {
      if (row.status !== 'pending') continue;
      const message: QueuedMessage = {
        message_id: row.message_id,
        notification_id: record.notification_id,
        user_id: record.user_id,
        event_type: record.event_type,
        priority: record.priority,
        channel: row.channel,
        content: render(templates[row.channel] ?? null, record.event_type, record.data),
        accepted_at: record.accepted_at,
        address: addressOf(prefs, row.channel, record.user_id),
      };
      sends.push(
        producerOf(layout.topic(record.priority, row.channel)).send(JSON.stringify(message), { key: record.user_id }),
      );
      stats.messages++;
    }
    return sends;
  }

  async function routeOne(record: IngestRecord): Promise<void> {
    const group = groupOf('user', record.user_id);
    let context: RouteContext;
    try {
      context = await state.query<RouteContext>(group, {
        q: 'routeContext',
        user_id: record.user_id,
        event_type: record.event_type,
        local: true,
      });
      prefsCache.set(record.user_id, context.prefs);
      if (prefsCache.size > 100_000) prefsCache.clear();
    } catch (e) {
      // Preference store unreachable (spec rule 11): critical goes on with the last preferences seen (or the
      // defaults), the rest is held (this loop retries the batch, nothing committed).
      if (record.priority !== 'critical') throw e;
      context = { prefs: prefsCache.get(record.user_id) ?? defaultPreferences(), templates: {} };
    }
    const now = Date.now();
    const { channels, suppressed } = chooseChannels(context.prefs, record.priority, record.user_id, now);
    const result = await state.command(group, {
      op: 'route',
      notification_id: record.notification_id,
      user_id: record.user_id,
      priority: record.priority,
      channels,
      suppressed,
      now,
    });
    if (result.op !== 'route') throw new Error('unexpected answer to route');
    const sends = queueRows(record, result.rows, context.prefs, context.templates);
    await Promise.all(sends);
    stats.routed++;
    routed.inc();
  }

  // Low records by state group, waiting for the group's batch in flight to be done (lowBatch).
  const lowPending = new Map<string, Array<{ record: IngestRecord; done: () => void; fail: (e: unknown) => void }>>();
  const lowBusy = new Set<string>();

  /** Routes a low record in its state group's next batch. */
  function routeLow(record: IngestRecord): Promise<void> {
    const group = groupOf('user', record.user_id);
    return new Promise<void>((done, fail) => {
      let list = lowPending.get(group);
      if (list === undefined) lowPending.set(group, (list = []));
      list.push({ record, done, fail });
      if (!lowBusy.has(group)) {
        lowBusy.add(group);
        // After this turn of the event loop, so the records that became ready together go in one batch.
        setImmediate(() => void lowBatches(group));
      }
    });
  }

  /** The group's waiting low records, a batch at a time, until none wait. */
  async function lowBatches(group: string): Promise<void> {
    try {
      for (;;) {
        const list = lowPending.get(group) ?? [];
        if (list.length === 0) return;
        const batch = list.splice(0, LOW_BATCH);
        try {
          await criticalIdle();
          await lowBatch(
            group,
            batch.map((p) => p.record),
          );
          for (const p of batch) p.done();
        } catch (e) {
          for (const p of batch) p.fail(e);
        }
      }
    } finally {
      lowBusy.delete(group);
      if ((lowPending.get(group)?.length ?? 0) > 0) {
        lowBusy.add(group);
        setImmediate(() => void lowBatches(group));
      }
    }
  }

  /**
   * Low records of one state group, routed as routeOne routes one: one read of the users' preferences and the event
   * types' templates, one `routeMany` command (each step applied in order, as that many `route` commands), then the
   * messages queued. A failure fails the batch: each record is retried (routeRetrying), and the state group routes a
   * (notification, user) once, so a step that had been applied answers its rows again.
   */
  async function lowBatch(group: string, records: IngestRecord[]): Promise<void> {
    const context = await state.query<RouteContexts>(group, {
      q: 'routeContexts',
      user_ids: [...new Set(records.map((r) => r.user_id))],
      event_types: [...new Set(records.map((r) => r.event_type))],
      local: true,
    });
    const now = Date.now();
    const steps: RouteStep[] = records.map((record) => {
      const prefs = context.prefs[record.user_id] ?? defaultPreferences();
      prefsCache.set(record.user_id, prefs);
      const { channels, suppressed } = chooseChannels(prefs, record.priority, record.user_id, now);
      return {
        notification_id: record.notification_id,
        user_id: record.user_id,
        priority: record.priority,
        channels,
        suppressed,
        now,
      };
    });
    if (prefsCache.size > 100_000) prefsCache.clear();
    await criticalIdle();
    const result = await state.command(group, { op: 'routeMany', routes: steps });
    if (result.op !== 'routeMany' || result.results.length !== records.length)
      throw new Error('unexpected answer to routeMany');
    const sends = records.flatMap((record, i) =>
      queueRows(
        record,
        result.results[i]!.rows,
        context.prefs[record.user_id] ?? defaultPreferences(),
        context.templates[record.event_type] ?? {},
      ),
    );
    await Promise.all(sends);
    stats.routed += records.length;
    for (let i = 0; i < records.length; i++) routed.inc();
  }

  /** Routes one record, retrying with backoff while the state groups or the log refuse; false when stopping. */
  async function routeWithRetry(record: IngestRecord, priority: Priority): Promise<boolean> {
    if (priority !== 'critical') return routeRetrying(record, priority);
    criticalRouting++;
    try {
      return await routeRetrying(record, priority);
    } finally {
      if (--criticalRouting === 0) {
        const waiting = criticalDone;
        criticalDone = [];
        for (const w of waiting) w();
      }
    }
  }

  async function routeRetrying(record: IngestRecord, priority: Priority): Promise<boolean> {
    let backoff = 100;
    for (;;) {
      try {
        if (priority === 'low') {
          await criticalIdle();
          await routeLow(record);
        } else await routeOne(record);
        return true;
      } catch (e) {
        if (stopping) return false;
        stats.held++;
        options.logger.log('warn', 'routing held, retrying', { priority, error: String((e as Error).message) });
        await sleep(backoff);
        backoff = Math.min(5000, backoff * 2);
      }
    }
  }

  /** The partition's committed offset, fenced under this router's generation (retried while the log elects). */
  async function resumed(claim: PartitionClaim): Promise<boolean> {
    for (;;) {
      if (stopping || claim.signal.aborted) return false;
      try {
        await claim.resume();
        return true;
      } catch {
        await sleep(500);
      }
    }
  }

  async function loop(priority: Priority, claim: PartitionClaim): Promise<void> {
    if (!(await resumed(claim))) return;
    const consumer = new CheckedConsumer(
      log.consumer(ingestTopic(priority), ROUTER_GROUP, {
        partitions: [claim.partition],
        maxRecords: 200,
        waitMs: 1000,
        generation: () => claim.generation,
      }),
      decodeIngest,
      deadLetters,
    );
    while (!stopping && !claim.signal.aborted) {
      try {
        const records = (await consumer.poll()).map((r) => r.decoded);
        if (claim.signal.aborted) return; // given away during the poll: the new owner routes these
        // Order matters per user (spec rule 5), not across users: each user's records in order, different users
        // concurrently. Routing one record is three round trips to the members (context, route, queue); done one
        // at a time, a loop routed a few records a second under load, and the critical loop fell behind a
        // steady trickle of one-time codes.
        const byUser = new Map<string, IngestRecord[]>();
        for (const record of records) {
          let lane = byUser.get(record.user_id);
          if (lane === undefined) byUser.set(record.user_id, (lane = []));
          lane.push(record);
        }
        const lanes = [...byUser.values()];
        let next = 0;
        let stopped = false;
        await Promise.all(
          Array.from({ length: Math.min(ROUTE_CONCURRENCY, lanes.length) }, async () => {
            while (next < lanes.length && !stopped) {
              for (const record of lanes[next++]!) {
                if (!(await routeWithRetry(record, priority))) {
                  stopped = true;
                  return;
                }
              }
            }
          }),
        );
        if (stopped) return;
        // Committed only once every record of the batch is queued: a router killed mid-batch replays it.
        // (Also past a batch of refused records only: commit sends nothing when no position moved.)
        await consumer.commit();
      } catch (e) {
        if (stopping) return;
        // Whatever of the batch was not handled is read again: the next commit must not pass it.
        consumer.rewind();
        options.logger.log('warn', 'router batch failed', { priority, error: String((e as Error).message) });
        await sleep(500);
      }
    }
  }

  /**
   * The low (bulk) loop: records are routed as their campaign's tokens allow, without holding other campaigns. A
   * batch-at-a-time loop (as the other priorities use) would hold every campaign behind a throttled one: the next
   * poll waits for the slowest record of the batch. Here the loop keeps polling while fewer than LOW_WINDOW records
   * wait; each (campaign, user) pair keeps its records in order (a user's records of two campaigns may be routed out
   * of order: the throttled one is later, which is the point of the limit). Each partition's offset is committed up
   * to its oldest record not yet routed (every second), so a throttled campaign never stops the commits; a router
   * killed meanwhile replays the uncommitted records, which the state group routes once (as for the other loops).
   */
  async function lowLoop(claim: PartitionClaim): Promise<void> {
    const topic = ingestTopic('low');
    if (!(await resumed(claim))) return;
    const consumer = new CheckedConsumer(
      log.consumer(topic, ROUTER_GROUP, {
        partitions: [claim.partition],
        maxRecords: 200,
        waitMs: 1000,
        generation: () => claim.generation,
      }),
      decodeIngest,
      deadLetters,
    );
    const chains = new Map<string, Promise<void>>();
    let inFlight = 0;
    // Per partition: offsets polled and not yet routed, the offset after the last polled, the offset committed.
    const waiting = new Map<number, Set<number>>();
    const polledTo = new Map<number, number>();
    const committedTo = new Map<number, number>();
    let lastCommit = 0;
    let slots = LOW_ROUTE_CONCURRENCY;
    const slotWaiters: Array<() => void> = [];
    let wake: (() => void) | null = null;
    async function withSlot<T>(f: () => Promise<T>): Promise<T> {
      while (slots === 0) await new Promise<void>((r) => slotWaiters.push(r));
      slots--;
      try {
        return await f();
      } finally {
        slots++;
        slotWaiters.shift()?.();
      }
    }
    async function commitRouted(): Promise<void> {
      for (const [partition, next] of polledTo) {
        const open = waiting.get(partition);
        let point = next;
        if (open !== undefined) for (const offset of open) point = Math.min(point, offset);
        let committed = committedTo.get(partition);
        if (committed === undefined)
          committedTo.set(partition, (committed = (await log.committed(topic, partition, ROUTER_GROUP)) ?? 0));
        if (point <= committed) continue;
        try {
          await log.commit(topic, partition, ROUTER_GROUP, point, committed, claim.generation);
          committedTo.set(partition, point);
        } catch (e) {
          // Moved by someone else (a router overlapping this one across a restart, or this commit retried after a
          // lost answer): read it again next time. Records routed twice are routed once by the state group.
          committedTo.delete(partition);
          throw e;
        }
      }
    }
    while (!stopping && !claim.signal.aborted) {
      try {
        if (Date.now() - lastCommit >= 1000) {
          lastCommit = Date.now();
          await commitRouted();
        }
        if (inFlight >= LOW_WINDOW) {
          await Promise.race([new Promise<void>((r) => (wake = r)), sleep(1000)]);
          continue;
        }
        const polled = await consumer.poll();
        // Past the dead-lettered records too (a batch may end with one).
        for (const [partition, next] of consumer.polledTo)
          polledTo.set(partition, Math.max(polledTo.get(partition) ?? 0, next));
        for (const r of polled) {
          // Refused records are in the dead-letter topic already (poll waits for that): done, like routed ones.
          const record = r.decoded;
          let open = waiting.get(r.partition);
          if (open === undefined) waiting.set(r.partition, (open = new Set()));
          open.add(r.offset);
          polledTo.set(r.partition, Math.max(polledTo.get(r.partition) ?? 0, r.offset + 1));
          const chainKey = `${record.campaign_id ?? record.event_type}\u0000${record.user_id}`;
          inFlight++;
          const next = (chains.get(chainKey) ?? Promise.resolve()).then(async () => {
            await campaignToken(record.campaign_id ?? record.event_type);
            if (stopping || claim.signal.aborted) return;
            // Routed (or stopping: then the record stays waiting, uncommitted, and is replayed).
            if (await withSlot(() => routeWithRetry(record, 'low'))) open.delete(r.offset);
          });
          chains.set(chainKey, next);
          void next.finally(() => {
            if (chains.get(chainKey) === next) chains.delete(chainKey);
            inFlight--;
            const w = wake;
            wake = null;
            w?.();
          });
        }
      } catch (e) {
        if (stopping) return;
        options.logger.log('warn', 'router low loop failed', { error: String((e as Error).message) });
        await sleep(500);
      }
    }
  }

  group = new GroupConsumer(log, {
    topics: PRIORITIES.map((p) => ingestTopic(p)),
    group: ROUTER_GROUP,
    member: `router-${options.index}`,
    consume: (claim) => {
      const priority = PRIORITIES.find((p) => ingestTopic(p) === claim.topic)!;
      return priority === 'low' ? lowLoop(claim) : loop(priority, claim);
    },
    onRebalance: (join) =>
      options.logger.log('info', 'router partitions rebalanced', {
        generation: join.generation,
        members: join.members,
        assigned: join.assigned,
      }),
    onError: (e) => options.logger.log('warn', 'router group heartbeat or partition failed', { error: String(e) }),
  });
  if (!stopping) group.start();
  // Retention: expired dedup keys and delivery_log rows older than 7 days leave the state groups (the machine
  // decides by the command's `now`, so every replica drops the same ones).
  const pruner = setInterval(() => {
    for (const group of allStateGroups())
      void state.command(group, { op: 'prune', now: Date.now() }).catch(() => undefined);
  }, PRUNE_EVERY_MS);
  pruner.unref();

  return {
    httpPort: http.port,
    async stop() {
      stopping = true;
      clearInterval(pruner);
      await Promise.race([group?.stop(), sleep(3000)]);
      await http.close();
      await log.close();
      await state.close();
    },
  };
}
