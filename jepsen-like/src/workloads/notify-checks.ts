/**
 * The notification workload's checks, pure functions of a history (workloads/notify.ts gives its shape), so tests
 * can feed them hand-made histories with a lost delivery, a duplicate, a late critical one.
 *
 * A delivery is what a stand-in provider received (email, push, SMS) or an item in a user's in-app centre, each
 * carrying the delivery's message_id `notification_id:user_id:channel`; the acceptances of `send` name the
 * notification id of each idempotency key.
 *
 * - notify-exactly-once: per accepted idempotency key, each of its users gets each channel it is owed (push, email
 *   and in-app for every priority, SMS for critical) exactly once by dedup key: `lost` (none), `duplicate` (two
 *   deliveries with different message_ids: two notifications made of one key); every acceptance of a key names one
 *   notification (`two-notifications`). The same message_id received again by a provider is a resend (the senders
 *   give it as the provider's idempotency key, so a deduplicating provider drops it): notify's README allows one
 *   only where a delivery worker was killed between the provider's answer and the record of it, so a resend counts
 *   (`provider_resends`, `resends_after_worker_kill`) when a delivery worker was killed or wiped between the first
 *   receipt (less RESEND_SLACK_MS, the placement of the providers' clock) and the resend, and is a `resend` anomaly
 *   otherwise (a router kill, a member partition or pause alone must never make one). A pause of the workload's one
 *   delivery worker is no excuse: the same process finishes and records its batch when it wakes. Nothing reaches
 *   a user the key did not name (`wrong-user`),
 *   nor SMS for a non-critical one (`unowed-channel`); a delivery of a notification no acceptance named is a
 *   `phantom` when every send was accepted (else it may be an unanswered send's: counted, not an anomaly). Unknown
 *   when the final deliveries could not be read.
 * - notify-critical-bound: every critical delivery arrives within the bound after its acceptance or the heal,
 *   whichever is later (`late-critical`). Providers' arrival times are wall-clock milliseconds; they are placed on
 *   the history's clock by the acceptances' `wall` (Date.now() at the answer), on the same host.
 */
import type { HistoryEvent } from '../history.js';
import { healTime, pairOps, quantiles } from './ops.js';
import type { Anomaly, CheckResult } from './workload.js';

export const NOTIFY_USERS = 8;
/** How far before a resend's first receipt a delivery worker's kill may start and still explain it. */
const RESEND_SLACK_MS = 1_000;

/** [channel, message_id, received_at (wall ms)]. */
export type Delivery = [channel: string, messageId: string, receivedAt: number];

/** The channels a user of a notification is owed at this priority (every channel enabled, every address given). */
export function owedChannels(priority: string): readonly string[] {
  return priority === 'critical' ? ['push', 'email', 'sms', 'in_app'] : ['push', 'email', 'in_app'];
}

interface NotifyBound {
  criticalMs: number;
}

interface Key {
  users: string[];
  priority: string;
  ids: Set<string>;
  /** First acceptance's completion (ns). */
  accepted: number;
}

export function checkNotify(events: readonly HistoryEvent[], bound: NotifyBound): CheckResult[] {
  const ops = pairOps(events);
  const heal = healTime(events) ?? 0;
  const keys = new Map<string, Key>();
  const keyOf = new Map<string, string>();
  const offsets: number[] = [];
  let sendsOk = 0;
  let sendsInfo = 0;
  let sendsFail = 0;
  const asked = new Set<string>();
  for (const o of ops) {
    if (o.f !== 'send' || o.key === undefined) continue;
    asked.add(o.key);
    if (o.type === 'info') sendsInfo++;
    if (o.type === 'fail') sendsFail++;
    if (o.type !== 'ok') continue;
    sendsOk++;
    const input = o.input as { users: string[]; priority: string };
    const v = o.value as { notification_id: string; wall?: number };
    const k = keys.get(o.key) ?? { users: input.users, priority: input.priority, ids: new Set(), accepted: o.complete };
    keys.set(o.key, k);
    k.ids.add(v.notification_id);
    k.accepted = Math.min(k.accepted, o.complete);
    keyOf.set(v.notification_id, o.key);
    if (typeof v.wall === 'number') offsets.push(v.wall * 1e6 - o.complete);
  }
  offsets.sort((a, b) => a - b);
  // Kills and wipes of delivery workers (history times): the only faults that may explain a resend.
  const workerKills = events
    .filter(
      (e) =>
        e.process === 'nemesis' &&
        (e.f === 'start-kill' || e.f === 'start-wipe') &&
        ((e.value as { targets?: unknown } | undefined)?.targets as unknown[] | undefined)?.some(
          (t) => typeof t === 'string' && t.startsWith('delivery'),
        ) === true,
    )
    .map((e) => e.time);
  const offset = offsets.length > 0 ? offsets[Math.floor(offsets.length / 2)]! : 0;
  const unanswered = [...asked].filter((k) => !keys.has(k)).length;
  const final = ops.filter((o) => o.f === 'final-deliveries' && o.type === 'ok').at(-1);
  const once: Anomaly[] = [];
  const critical: Anomaly[] = [];
  for (const [key, k] of keys)
    if (k.ids.size > 1)
      once.push({
        check: 'notify-exactly-once',
        type: 'two-notifications',
        description: `key ${key} accepted as ${k.ids.size} notifications: ${[...k.ids].join(', ')}`,
        times: [k.accepted],
      });
  const stats: Record<string, unknown> = {
    sends_ok: sendsOk,
    sends_unknown: sendsInfo,
    sends_failed: sendsFail,
    keys_accepted: keys.size,
    keys_unanswered: unanswered,
  };
  if (final === undefined)
    return [
      { name: 'notify-exactly-once', valid: once.length > 0 ? false : 'unknown', anomalies: once, stats },
      { name: 'notify-critical-bound', valid: 'unknown', anomalies: [] },
    ];
  const value = final.value as { received: Delivery[]; inbox: Array<[string, number]> };
  const all: Delivery[] = [...value.received, ...value.inbox.map(([m, at]): Delivery => ['in_app', m, at])];
  // (key, user, channel) -> deliveries.
  const got = new Map<string, Array<{ messageId: string; at: number }>>();
  let unattributed = 0;
  for (const [channel, messageId, at] of all) {
    const [nid, user, ch] = messageId.split(':') as [string, string, string];
    const key = keyOf.get(nid);
    if (key === undefined) {
      if (unanswered > 0) unattributed++;
      else
        once.push({
          check: 'notify-exactly-once',
          type: 'phantom',
          description: `${channel} delivery ${messageId} of a notification no acceptance named`,
        });
      continue;
    }
    const k = keys.get(key)!;
    if (!k.users.includes(user))
      once.push({
        check: 'notify-exactly-once',
        type: 'wrong-user',
        description: `${channel} delivery ${messageId} to ${user}, whom key ${key} did not name`,
      });
    else if (!owedChannels(k.priority).includes(ch) || ch !== channel)
      once.push({
        check: 'notify-exactly-once',
        type: 'unowed-channel',
        description: `${channel} delivery ${messageId} of ${k.priority} key ${key}: not a channel it is owed`,
      });
    const slot = `${key}|${user}|${ch}`;
    const list = got.get(slot) ?? [];
    list.push({ messageId, at });
    got.set(slot, list);
  }
  let owed = 0;
  let lost = 0;
  let duplicates = 0;
  let resends = 0;
  let explained = 0;
  const latency: number[] = [];
  const criticalLatency: number[] = [];
  for (const [key, k] of keys)
    for (const user of k.users)
      for (const channel of owedChannels(k.priority)) {
        owed++;
        const list = got.get(`${key}|${user}|${channel}`) ?? [];
        if (list.length === 0) {
          lost++;
          once.push({
            check: 'notify-exactly-once',
            type: 'lost',
            description: `${k.priority} key ${key} (${[...k.ids].join(', ')}): no ${channel} delivery to ${user}`,
            times: [k.accepted],
          });
          continue;
        }
        const distinct = new Set(list.map((d) => d.messageId));
        // The message_id is the dedup key the senders give providers: the same one again is a resend a provider
        // that deduplicates drops; two of them are two deliveries. A resend is allowed only with a delivery worker
        // killed between the first receipt and it (the README's one window).
        for (const id of distinct) {
          const times = list
            .filter((d) => d.messageId === id)
            .map((d) => d.at * 1e6 - offset)
            .sort((a, b) => a - b);
          for (const again of times.slice(1)) {
            resends++;
            if (workerKills.some((t) => t >= times[0]! - RESEND_SLACK_MS * 1e6 && t <= again)) {
              explained++;
              continue;
            }
            once.push({
              check: 'notify-exactly-once',
              type: 'resend',
              description: `${k.priority} key ${key}: ${channel} ${id} to ${user} received again ${((again - times[0]!) / 1e6).toFixed(0)} ms after the first time, with no delivery worker killed in between`,
              times: [times[0]!, again],
            });
          }
        }
        if (distinct.size > 1) {
          duplicates++;
          once.push({
            check: 'notify-exactly-once',
            type: 'duplicate',
            description: `${k.priority} key ${key}: ${distinct.size} ${channel} deliveries to ${user} (${[...distinct].join(', ')})`,
            times: list.map((d) => d.at * 1e6 - offset),
          });
        }
        const first = Math.min(...list.map((d) => d.at * 1e6 - offset));
        const ms = (first - k.accepted) / 1e6;
        latency.push(Math.max(0, ms));
        if (k.priority !== 'critical') continue;
        criticalLatency.push(Math.max(0, ms));
        const due = Math.max(k.accepted, heal) + bound.criticalMs * 1e6;
        if (first > due)
          critical.push({
            check: 'notify-critical-bound',
            type: 'late-critical',
            description: `critical key ${key}: ${channel} to ${user} delivered ${((first - Math.max(k.accepted, heal)) / 1e9).toFixed(1)} s after its acceptance or the heal (bound ${bound.criticalMs / 1000} s)`,
            times: [k.accepted, first],
          });
      }
  const all_ = quantiles(latency);
  const crit = quantiles(criticalLatency);
  return [
    {
      name: 'notify-exactly-once',
      valid: once.length === 0,
      anomalies: once,
      stats: {
        ...stats,
        owed_deliveries: owed,
        deliveries: all.length,
        lost,
        duplicates,
        provider_resends: resends,
        resends_after_worker_kill: explained,
        unattributed,
        latency_p50_ms: all_.p50,
        latency_p99_ms: all_.p99,
        latency_max_ms: all_.max,
      },
    },
    {
      name: 'notify-critical-bound',
      valid: critical.length === 0,
      anomalies: critical,
      stats: {
        critical_deliveries: criticalLatency.length,
        late: critical.length,
        critical_p50_ms: crit.p50,
        critical_p99_ms: crit.p99,
        critical_max_ms: crit.max,
      },
    },
  ];
}
