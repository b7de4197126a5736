/**
 * The notification service's replicated state, one NotifyMachine per state group (`notify.state.N`): a user's
 * preferences, frequency-cap counters, delivery_log rows and in-app centre live in the group of hash(user_id), so a
 * bounce disables email in the same entry that records it; idempotency keys live in the group of hash(key);
 * segments in the group of hash(segment_id); templates are written to every group (the router reads a user's whole
 * routing context from one group). Pure: no clock, no I/O; every time is the `now` carried in the command, so the
 * 24 h dedup window and the caps survive restarts and replay identically.
 */
import {
  CHANNELS,
  PRIORITIES,
  type Channel,
  type InAppItem,
  type Priority,
  type PushSubscription,
} from './workers/delivery/channels/channel.js';

export const DEDUP_WINDOW_MS = 24 * 60 * 60_000;
export const CAP_WINDOW_MS = 60 * 60_000;
/** Newest items kept per user's in-app centre. */
export const INBOX_LIMIT = 1_000;
/** How long delivery_log rows stay readable. */
const DELIVERY_RETENTION_MS = 7 * 24 * 60 * 60_000;

export type DeliveryStatus = 'pending' | 'sent' | 'delivered' | 'failed' | 'bounced';

export interface QuietHours {
  /** "HH:MM", local time in `timezone`; start > end spans midnight. */
  start: string;
  end: string;
  /** IANA zone, e.g. Europe/Paris. */
  timezone: string;
}

export interface Preferences {
  channels_enabled: Record<Channel, boolean>;
  quiet_hours: QuietHours | null;
  frequency_cap: Array<{ channel: Channel; max_per_hour: number }>;
  contact: { email: string | null; phone: string | null; push_subscriptions: PushSubscription[] };
}

export function defaultPreferences(): Preferences {
  return {
    channels_enabled: { push: true, email: true, sms: true, in_app: true },
    quiet_hours: null,
    frequency_cap: [],
    contact: { email: null, phone: null, push_subscriptions: [] },
  };
}

export interface DeliveryRow {
  message_id: string;
  notification_id: string;
  user_id: string;
  channel: Channel;
  priority: Priority;
  status: DeliveryStatus;
  attempt_count: number;
  last_attempt_at: number | null;
  provider_message_id: string | null;
  delivered_at: number | null;
  created_at: number;
  reason: string | null;
  /** The channel this row stands in for (critical fallback), when it is one. */
  fallback_from: Channel | null;
}

export interface Template {
  title: string;
  body: string;
}

export interface RouteDecision {
  notification_id: string;
  user_id: string;
  /** Channels the router found suppressed before caps (opted out, quiet hours, no address, sms not critical). */
  suppressed: Array<{ channel: Channel; reason: string }>;
  at: number;
}

export type Outcome =
  | { message_id: string; kind: 'sent'; provider_message_id: string; invalid_subscriptions?: string[] }
  | {
      message_id: string;
      kind: 'delivered';
      provider_message_id: string;
      delivered_at: number;
      invalid_subscriptions?: string[];
    }
  | { message_id: string; kind: 'bounced'; reason: string; provider_message_id?: string }
  | { message_id: string; kind: 'invalid_address'; reason: string; invalid_subscriptions?: string[] }
  | { message_id: string; kind: 'retry'; reason: string }
  | { message_id: string; kind: 'failed'; reason: string };

/** One (notification, user) routing step: the `route` command's fields (`routeMany` carries several). */
export interface RouteStep {
  notification_id: string;
  user_id: string;
  priority: Priority;
  channels: Channel[];
  suppressed: Array<{ channel: Channel; reason: string }>;
  now: number;
}

/** What a routing step answers: the (notification, user)'s rows, and whether it had been routed before. */
export interface RouteAnswer {
  duplicate: boolean;
  rows: DeliveryRow[];
  capped: Channel[];
}

export type NotifyCommand =
  | { op: 'claim'; key: string; notification_id: string; now: number }
  | { op: 'queued'; key: string; notification_id: string }
  | { op: 'putPrefs'; user_id: string; prefs: Preferences }
  | { op: 'putSegment'; segment_id: string; user_ids: string[] }
  | { op: 'putTemplate'; event_type: string; channel: Channel; template: Template | null }
  | ({ op: 'route' } & RouteStep)
  | { op: 'routeMany'; routes: RouteStep[] }
  | { op: 'outcomes'; outcomes: Outcome[]; now: number }
  | { op: 'fallback'; from_message_id: string; channel: Channel; now: number }
  | { op: 'inboxAdd'; item: InAppItem }
  | { op: 'inboxRead'; user_id: string; item_ids: string[] | null }
  | { op: 'prune'; now: number };

export type NotifyResult =
  | { ok: true; op: 'claim'; notification_id: string; existing: boolean; queued: boolean }
  | { ok: true; op: 'route'; duplicate: boolean; rows: DeliveryRow[]; capped: Channel[] }
  | { ok: true; op: 'routeMany'; results: RouteAnswer[] }
  | { ok: true; op: 'outcomes'; applied: number; rows: DeliveryRow[] }
  | { ok: true; op: 'fallback'; row: DeliveryRow | null }
  | { ok: true; op: 'inboxAdd'; added: boolean; item: InAppItem }
  | { ok: true; op: 'inboxRead'; marked: number }
  | { ok: true; op: 'putPrefs' | 'putSegment' | 'putTemplate' | 'queued' | 'prune' };

interface Claim {
  notification_id: string;
  at: number;
  queued: boolean;
}

export function messageId(notificationId: string, userId: string, channel: Channel): string {
  return `${notificationId}:${userId}:${channel}`;
}

const TERMINAL: ReadonlySet<DeliveryStatus> = new Set(['delivered', 'failed', 'bounced']);

export class NotifyMachine {
  /** Insertion order is claim order, which is time order: pruning reads from the front. */
  private claims = new Map<string, Claim>();
  private prefs = new Map<string, Preferences>();
  private segments = new Map<string, string[]>();
  private templates = new Map<string, Template>();
  private rows = new Map<string, DeliveryRow>();
  private byNotification = new Map<string, Set<string>>();
  private routes = new Map<string, RouteDecision>();
  /** The users of each notification's routes (the status query reads them without scanning every route). */
  private routeUsers = new Map<string, Set<string>>();
  private sends = new Map<string, number[]>();
  private inboxes = new Map<string, InAppItem[]>();
  /** Not replicated state: the member's hook for in-app items as they apply (none in tests of the pure machine). */
  onInboxItem: ((item: InAppItem) => void) | null = null;

  apply(command: NotifyCommand): NotifyResult {
    switch (command.op) {
      case 'claim': {
        this.pruneClaims(command.now);
        const seen = this.claims.get(command.key);
        if (seen !== undefined)
          return { ok: true, op: 'claim', notification_id: seen.notification_id, existing: true, queued: seen.queued };
        this.claims.set(command.key, { notification_id: command.notification_id, at: command.now, queued: false });
        return { ok: true, op: 'claim', notification_id: command.notification_id, existing: false, queued: false };
      }
      case 'queued': {
        const claim = this.claims.get(command.key);
        if (claim !== undefined && claim.notification_id === command.notification_id) claim.queued = true;
        return { ok: true, op: 'queued' };
      }
      case 'putPrefs':
        this.prefs.set(command.user_id, structuredClone(command.prefs));
        return { ok: true, op: 'putPrefs' };
      case 'putSegment':
        this.segments.set(command.segment_id, [...command.user_ids]);
        return { ok: true, op: 'putSegment' };
      case 'putTemplate': {
        const key = `${command.event_type}\u0000${command.channel}`;
        if (command.template === null) this.templates.delete(key);
        else this.templates.set(key, { ...command.template });
        return { ok: true, op: 'putTemplate' };
      }
      case 'route':
        return { ok: true, op: 'route', ...this.route(command) };
      case 'routeMany':
        // The bulk router's batch: each step applied in order, as that many `route` commands would be.
        return { ok: true, op: 'routeMany', results: command.routes.map((r) => this.route(r)) };
      case 'outcomes':
        return this.outcomes(command.outcomes, command.now);
      case 'fallback': {
        const from = this.rows.get(command.from_message_id);
        if (from === undefined) return { ok: true, op: 'fallback', row: null };
        const id = messageId(from.notification_id, from.user_id, command.channel);
        const existing = this.rows.get(id);
        if (existing !== undefined) return { ok: true, op: 'fallback', row: { ...existing } };
        const row = this.addRow(
          from.notification_id,
          from.user_id,
          command.channel,
          from.priority,
          command.now,
          from.channel,
        );
        return { ok: true, op: 'fallback', row: { ...row } };
      }
      case 'inboxAdd': {
        const item = command.item;
        let inbox = this.inboxes.get(item.user_id);
        if (inbox === undefined) this.inboxes.set(item.user_id, (inbox = []));
        const existing = inbox.find((i) => i.item_id === item.item_id);
        if (existing !== undefined) return { ok: true, op: 'inboxAdd', added: false, item: { ...existing } };
        inbox.push({ ...item, read: false });
        if (inbox.length > INBOX_LIMIT) inbox.splice(0, inbox.length - INBOX_LIMIT);
        this.onInboxItem?.({ ...item, read: false });
        return { ok: true, op: 'inboxAdd', added: true, item: { ...item, read: false } };
      }
      case 'inboxRead': {
        const inbox = this.inboxes.get(command.user_id) ?? [];
        const wanted = command.item_ids === null ? null : new Set(command.item_ids);
        let marked = 0;
        for (const item of inbox) {
          if (!item.read && (wanted === null || wanted.has(item.item_id))) {
            item.read = true;
            marked++;
          }
        }
        return { ok: true, op: 'inboxRead', marked };
      }
      case 'prune':
        this.pruneClaims(command.now);
        for (const [id, row] of this.rows) {
          if (row.created_at + DELIVERY_RETENTION_MS > command.now) break;
          this.rows.delete(id);
          this.byNotification.get(row.notification_id)?.delete(id);
          if (this.byNotification.get(row.notification_id)?.size === 0) {
            this.byNotification.delete(row.notification_id);
          }
          this.forgetRoute(row.notification_id, row.user_id);
        }
        return { ok: true, op: 'prune' };
    }
  }

  /**
   * The router's step for one (notification, user): the first time, applies the frequency caps (sends in the last
   * hour, counted here so two routers cannot both pass a cap) and creates a pending row per channel left; again
   * (a router replaying its partition after a crash), answers the rows made the first time, changing nothing.
   */
  private route(command: RouteStep): RouteAnswer {
    const key = `${command.notification_id}\u0000${command.user_id}`;
    if (this.routes.has(key)) {
      return {
        duplicate: true,
        rows: this.rowsOf(command.notification_id).filter((r) => r.user_id === command.user_id),
        capped: [],
      };
    }
    const prefs = this.prefs.get(command.user_id) ?? defaultPreferences();
    const rows: DeliveryRow[] = [];
    const capped: Channel[] = [];
    for (const channel of command.channels) {
      const cap = prefs.frequency_cap.find((c) => c.channel === channel);
      const sendsKey = `${command.user_id}\u0000${channel}`;
      const recent = (this.sends.get(sendsKey) ?? []).filter((at) => at > command.now - CAP_WINDOW_MS);
      // Critical notifications (one-time codes, security alerts) are never capped: a cap must not lock a user out.
      if (cap !== undefined && command.priority !== 'critical' && recent.length >= cap.max_per_hour) {
        capped.push(channel);
        this.sends.set(sendsKey, recent);
        continue;
      }
      recent.push(command.now);
      this.sends.set(sendsKey, recent);
      rows.push({
        ...this.addRow(command.notification_id, command.user_id, channel, command.priority, command.now, null),
      });
    }
    this.keepRoute({
      notification_id: command.notification_id,
      user_id: command.user_id,
      suppressed: [...command.suppressed, ...capped.map((channel) => ({ channel, reason: 'frequency_cap' }))],
      at: command.now,
    });
    return { duplicate: false, rows, capped };
  }

  private keepRoute(decision: RouteDecision): void {
    this.routes.set(`${decision.notification_id}\u0000${decision.user_id}`, decision);
    let users = this.routeUsers.get(decision.notification_id);
    if (users === undefined) this.routeUsers.set(decision.notification_id, (users = new Set()));
    users.add(decision.user_id);
  }

  private forgetRoute(notificationId: string, userId: string): void {
    if (!this.routes.delete(`${notificationId}\u0000${userId}`)) return;
    const users = this.routeUsers.get(notificationId);
    users?.delete(userId);
    if (users?.size === 0) this.routeUsers.delete(notificationId);
  }

  private addRow(
    notificationId: string,
    userId: string,
    channel: Channel,
    priority: Priority,
    now: number,
    fallbackFrom: Channel | null,
  ): DeliveryRow {
    const row: DeliveryRow = {
      message_id: messageId(notificationId, userId, channel),
      notification_id: notificationId,
      user_id: userId,
      channel,
      priority,
      status: 'pending',
      attempt_count: 0,
      last_attempt_at: null,
      provider_message_id: null,
      delivered_at: null,
      created_at: now,
      reason: null,
      fallback_from: fallbackFrom,
    };
    this.rows.set(row.message_id, row);
    let set = this.byNotification.get(notificationId);
    if (set === undefined) this.byNotification.set(notificationId, (set = new Set()));
    set.add(row.message_id);
    return row;
  }

  /**
   * delivery_log transitions: pending -> sent -> delivered; pending -> delivered (in-app, synchronous providers);
   * pending|sent -> failed | bounced; a retry counts an attempt and stays pending. Terminal rows never change, and
   * `sent` is never undone, so a replayed outcome (a worker killed after recording it) changes nothing.
   */
  private outcomes(outcomes: readonly Outcome[], now: number): NotifyResult {
    let applied = 0;
    const rows: DeliveryRow[] = [];
    for (const outcome of outcomes) {
      const row = this.rows.get(outcome.message_id);
      if (row === undefined) continue;
      rows.push(row);
      if (TERMINAL.has(row.status)) continue;
      const prefs = (): Preferences => {
        let p = this.prefs.get(row.user_id);
        if (p === undefined) this.prefs.set(row.user_id, (p = defaultPreferences()));
        return p;
      };
      const dropSubscriptions = (endpoints: readonly string[] | undefined): void => {
        if (endpoints === undefined || endpoints.length === 0) return;
        const gone = new Set(endpoints);
        const p = prefs();
        p.contact.push_subscriptions = p.contact.push_subscriptions.filter((s) => !gone.has(s.endpoint));
      };
      switch (outcome.kind) {
        case 'sent':
          if (row.status !== 'pending') continue;
          row.status = 'sent';
          row.attempt_count++;
          row.last_attempt_at = now;
          row.provider_message_id = outcome.provider_message_id;
          dropSubscriptions(outcome.invalid_subscriptions);
          break;
        case 'delivered':
          if (row.status === 'pending') {
            row.attempt_count++;
            row.last_attempt_at = now;
          }
          row.status = 'delivered';
          row.provider_message_id = outcome.provider_message_id;
          row.delivered_at = outcome.delivered_at;
          dropSubscriptions(outcome.invalid_subscriptions);
          break;
        case 'bounced':
          if (row.status === 'pending') row.attempt_count++;
          row.status = 'bounced';
          row.last_attempt_at = now;
          row.reason = outcome.reason;
          if (outcome.provider_message_id !== undefined) row.provider_message_id = outcome.provider_message_id;
          // The spec's transition: a hard bounce on email disables email for that user.
          if (row.channel === 'email') prefs().channels_enabled.email = false;
          break;
        case 'invalid_address':
          if (row.status === 'pending') row.attempt_count++;
          row.status = 'failed';
          row.last_attempt_at = now;
          row.reason = outcome.reason;
          dropSubscriptions(outcome.invalid_subscriptions);
          break;
        case 'retry':
          if (row.status !== 'pending') continue;
          row.attempt_count++;
          row.last_attempt_at = now;
          row.reason = outcome.reason;
          break;
        case 'failed':
          if (row.status === 'pending') row.attempt_count++;
          row.status = 'failed';
          row.last_attempt_at = now;
          row.reason = outcome.reason;
          break;
      }
      applied++;
    }
    return { ok: true, op: 'outcomes', applied, rows: rows.map((r) => ({ ...r })) };
  }

  private pruneClaims(now: number): void {
    for (const [key, claim] of this.claims) {
      if (claim.at + DEDUP_WINDOW_MS > now) break;
      this.claims.delete(key);
    }
  }

  // Reads (readLocal on a member).

  preferences(userId: string): Preferences {
    return structuredClone(this.prefs.get(userId) ?? defaultPreferences());
  }

  hasPreferences(userId: string): boolean {
    return this.prefs.has(userId);
  }

  segment(segmentId: string): string[] | null {
    const users = this.segments.get(segmentId);
    return users === undefined ? null : [...users];
  }

  template(eventType: string, channel: Channel): Template | null {
    const t = this.templates.get(`${eventType}\u0000${channel}`);
    return t === undefined ? null : { ...t };
  }

  rowsOf(notificationId: string): DeliveryRow[] {
    return [...(this.byNotification.get(notificationId) ?? [])].map((id) => ({ ...this.rows.get(id)! }));
  }

  row(id: string): DeliveryRow | null {
    const row = this.rows.get(id);
    return row === undefined ? null : { ...row };
  }

  routesOf(notificationId: string): RouteDecision[] {
    const out: RouteDecision[] = [];
    for (const user of this.routeUsers.get(notificationId) ?? []) {
      const decision = this.routes.get(`${notificationId}\u0000${user}`);
      if (decision !== undefined) out.push(structuredClone(decision));
    }
    return out;
  }

  claim(key: string): Claim | null {
    const c = this.claims.get(key);
    return c === undefined ? null : { ...c };
  }

  inbox(userId: string, options: { unreadOnly: boolean; limit: number }): { items: InAppItem[]; unread: number } {
    const inbox = this.inboxes.get(userId) ?? [];
    const unread = inbox.filter((i) => !i.read).length;
    const items = inbox
      .filter((i) => !options.unreadOnly || !i.read)
      .slice(-options.limit)
      .reverse()
      .map((i) => structuredClone(i));
    return { items, unread };
  }

  snapshot(): Uint8Array {
    const state = {
      claims: [...this.claims],
      prefs: [...this.prefs],
      segments: [...this.segments],
      templates: [...this.templates],
      rows: [...this.rows.values()],
      routes: [...this.routes.values()],
      sends: [...this.sends],
      inboxes: [...this.inboxes],
    };
    return new TextEncoder().encode(JSON.stringify(state));
  }

  restore(data: Uint8Array): void {
    const s = JSON.parse(new TextDecoder().decode(data)) as {
      claims: Array<[string, Claim]>;
      prefs: Array<[string, Preferences]>;
      segments: Array<[string, string[]]>;
      templates: Array<[string, Template]>;
      rows: DeliveryRow[];
      routes: RouteDecision[];
      sends: Array<[string, number[]]>;
      inboxes: Array<[string, InAppItem[]]>;
    };
    this.claims = new Map(s.claims);
    this.prefs = new Map(s.prefs);
    this.segments = new Map(s.segments);
    this.templates = new Map(s.templates);
    this.rows = new Map();
    this.byNotification = new Map();
    for (const row of s.rows) {
      this.rows.set(row.message_id, row);
      let set = this.byNotification.get(row.notification_id);
      if (set === undefined) this.byNotification.set(row.notification_id, (set = new Set()));
      set.add(row.message_id);
    }
    this.routes = new Map();
    this.routeUsers = new Map();
    for (const r of s.routes) this.keepRoute(r);
    this.sends = new Map(s.sends);
    this.inboxes = new Map(s.inboxes);
  }
}

export const isChannel = (v: unknown): v is Channel =>
  typeof v === 'string' && (CHANNELS as readonly string[]).includes(v);
export const isPriority = (v: unknown): v is Priority =>
  typeof v === 'string' && (PRIORITIES as readonly string[]).includes(v);
