/**
 * The notification service on the Raft members: a grouped service made of the event log (the ingestion and channel
 * queues are its topics) and the state groups (NotifyMachine). The POST answers once the event's records are
 * committed on the ingestion topic: accepted, not delivered. Internal callers carry the cluster token or the
 * `service.notify` token of notify's own workers (deriveServiceToken), never a client token whatever its name; a
 * user's token (`client.user.<id>.…`) reads and changes only that user's preferences and inbox. The event log's
 * topics on these members are internal (createLogService's defaultAccess): no client token appends, fetches or
 * commits on them.
 */
import { providerRoles } from '../workers/providers/index.js';
import { randomUUID } from 'node:crypto';
import {
  badRequest,
  combineServices,
  commandOf,
  forbidden,
  type ServiceContext,
  HttpError,
  isInternalCaller,
  notFound,
  Reply,
  requireObject,
  ServiceError,
  servicePrincipal,
  unavailable,
  type ServiceDefinition,
  type OnRequestKind,
  type Principal,
  type RequestContext,
} from '@raftkit/http';
import { createLogService, LogClient, MAX_RECORDS_PER_APPEND } from '@raftkit/log';
import type { ManagedGroupOptions, RaftNode } from '@raftkit/raft';
import { CHANNELS, PRIORITIES, type ReceiptUpdate } from '../workers/delivery/channels/channel.js';
import {
  allStateGroups,
  channelTopic,
  groupOf,
  INGEST_PARTITIONS,
  ingestTopic,
  NOTIFY,
  parseStateGroup,
  DEAD_LETTER_TOPIC,
} from '../placement.js';
import {
  mergePreferences,
  parseChannel,
  parseNotification,
  parseSegment,
  parseTemplate,
  EVENT_TYPE,
  SEGMENT_ID,
  USER_ID,
} from '../input.js';
import { NotifyMachine, type NotifyCommand, type NotifyResult, type Outcome, type Preferences } from '../machine.js';
import { answer, checkQuery, type StateQuery, type StatusPart } from '../queries.js';
import { STATE_COMMAND_ROUTE, StateClient } from '../state-client.js';
import { deliveryRole } from '../workers/delivery/delivery.js';
import type { IngestRecord } from '../records.js';
import { routerRole } from '../workers/router/router.js';

type StateNode = RaftNode<NotifyCommand, NotifyResult, NotifyMachine>;

const OPS = [
  'claim',
  'queued',
  'putPrefs',
  'putSegment',
  'putTemplate',
  'route',
  'routeMany',
  'outcomes',
  'fallback',
  'inboxAdd',
  'inboxRead',
  'prune',
] as const;

export function checkNotifyCommand(value: unknown): NotifyCommand {
  return commandOf(value, OPS) as unknown as NotifyCommand;
}

export function createNotifyService(): ServiceDefinition {
  return combineServices(NOTIFY, [createLogService({ defaultAccess: 'internal' }), notifyPart()]);
}

/**
 * The state groups: a NotifyMachine each, on the cluster's replica count of processes (3 unless `cluster up --set replicas=5`;
 * fewer while fewer are live).
 */
const STATE_KIND: OnRequestKind = {
  name: 'state',
  provisioning: 'on request',
  includes: (name) => parseStateGroup(name) !== null,
  groupOptions: () => {
    const machine = new NotifyMachine();
    const original = machine.apply.bind(machine);
    // Shape first: a malformed entry is refused identically everywhere, before anything changes.
    machine.apply = (command: NotifyCommand): NotifyResult => original(checkNotifyCommand(command));
    // Lease reads: the leader answers a read barrier from its lease (check-quorum's, shorter than an election
    // timeout) instead of a heartbeat round to a majority, so a preference read on the leader is a local read, and
    // a follower's barrier is one round trip to the leader (the spec asks preference lookups to be sub-millisecond).
    return { stateMachine: machine as unknown as ManagedGroupOptions['stateMachine'], core: { leaseReads: true } };
  },
};

function notifyPart(): ServiceDefinition {
  return {
    name: 'notify',
    kinds: [STATE_KIND],
    routes: notifyRoutes,
    // The stand-in providers first, so the channel workers' senders find them listening.
    workers: [...providerRoles, routerRole, deliveryRole],
  };
}

/** Internal callers: the cluster token or notify's own workers' service token; no client token, whatever its name. */
function isInternal(p: Principal | null): boolean {
  return isInternalCaller(p, NOTIFY);
}

function requireInternal(ctx: RequestContext): void {
  if (!isInternal(ctx.principal))
    throw forbidden(
      `this endpoint is internal to notify: the cluster token or ${servicePrincipal(NOTIFY)}, not ${ctx.principal?.name ?? 'no token'}`,
      { required: 'service' },
    );
}

function requireSelfOrInternal(ctx: RequestContext, userId: string): void {
  if (isInternal(ctx.principal)) return;
  const p = ctx.principal;
  if (p?.kind !== 'client' || p.name !== `user.${userId}`)
    throw forbidden(`a user token reads only its own user (this one is ${p?.name ?? 'none'})`, {
      required: `user.${userId}`,
    });
}

function tokenOf(ctx: RequestContext): string {
  const header = ctx.req.headers.authorization ?? '';
  return /^Bearer\s+(\S+)/i.exec(header)?.[1] ?? '';
}

function userParam(ctx: RequestContext): string {
  const id = ctx.params.id ?? '';
  if (!USER_ID.test(id))
    throw badRequest('invalid_field', 'a user id is 1 to 59 characters of A-Z a-z 0-9 _ -', { field: 'user_id' });
  return id;
}

/** Turns a failure of the log or of a remote group into the answer the caller should see. */
function queueError(error: unknown): never {
  if (error instanceof HttpError) throw error;
  if (error instanceof ServiceError) {
    if (error.status === 404)
      throw unavailable('the ingestion queue does not exist yet (the router creates it when it starts)', 1, {
        code_detail: 'queue_unavailable',
      });
    if (error.status >= 500 || error.status === 429)
      throw unavailable(`the queue is unavailable: ${error.message}`, 1, { reason: 'queue_unavailable' });
    throw new HttpError(error.status, error.code, error.message);
  }
  throw unavailable(`the queue is unavailable: ${String((error as Error)?.message ?? error)}`, 1, {
    reason: 'queue_unavailable',
  });
}

function notifyRoutes(service: ServiceContext): void {
  const managed = service.managed;
  const endpoints = (): string[] =>
    managed
      .catalog()
      .hosts()
      .map((h) => h.http)
      .filter((u): u is string => u !== null);
  // Clients per caller token (calls are made with the caller's rights); few internal callers, so a small map.
  const logClients = new Map<string, LogClient>();
  let remote: StateClient | null = null;
  const logFor = (token: string): LogClient => {
    let client = logClients.get(token);
    if (client === undefined) {
      if (logClients.size >= 16) {
        for (const c of logClients.values()) void c.close();
        logClients.clear();
      }
      client = new LogClient({ endpoints: endpoints(), token, timeoutMs: 5_000 });
      logClients.set(token, client);
    }
    return client;
  };
  service.onStop(() => {
    for (const c of logClients.values()) void c.close();
    void remote?.close();
  });
  const remoteState = (): StateClient =>
    (remote ??= new StateClient({ endpoints: endpoints(), token: 'unused', timeoutMs: 10_000 }));

  const accepted = service.metrics.counter('notify_accepted_total', 'Notification requests accepted (records queued)');
  const duplicates = service.metrics.counter(
    'notify_duplicate_requests_total',
    'Requests whose idempotency key was already seen in 24 h',
  );

  /** A command on a state group: proposed here when this member holds it, else sent to one that does. */
  async function command(ctx: RequestContext, group: string, cmd: NotifyCommand): Promise<NotifyResult> {
    const node = managed.group<NotifyCommand, NotifyResult, NotifyMachine>(group);
    if (node !== undefined) return service.group(node).write(cmd);
    try {
      return await remoteState().command(group, cmd, { token: tokenOf(ctx) });
    } catch (e) {
      return queueError(e);
    }
  }

  async function query<T>(ctx: RequestContext, group: string, q: StateQuery): Promise<T> {
    const node = managed.group<NotifyCommand, NotifyResult, NotifyMachine>(group) as StateNode | undefined;
    if (node !== undefined) {
      await service.call(node, () => node.readBarrier());
      return node.readLocal((m) => answer(m, q)) as T;
    }
    try {
      return await remoteState().query<T>(group, q, { token: tokenOf(ctx) });
    } catch (e) {
      return queueError(e);
    }
  }

  const stateNode = (ctx: RequestContext): StateNode => {
    const group = ctx.params.group ?? '';
    if (parseStateGroup(group) === null)
      throw badRequest('invalid_group', 'not a notify state group', { field: 'group' });
    return service.requireGroup<NotifyCommand, NotifyResult, NotifyMachine>(ctx, group) as StateNode;
  };

  // Internal; a user's token passes only for its own preferences and inbox (a member forwarding that user's
  // request to a group it does not hold forwards the user's token).
  service.commandRoute<NotifyCommand, NotifyResult>(STATE_COMMAND_ROUTE, {
    admits: 'authenticated',
    check: checkNotifyCommand,
    group: (ctx, cmd) => {
      // Who may ask before where the group is: a refused caller learns nothing of the placement (no 421).
      if (cmd.op === 'putPrefs' || cmd.op === 'inboxRead') requireSelfOrInternal(ctx, cmd.user_id);
      else requireInternal(ctx);
      return stateNode(ctx);
    },
  });

  service.router
    // Created once by the router worker at its start (cluster token): the state groups and every topic.
    .post('/v1/notify/setup', { admits: 'service' }, async (ctx) => {
      const catalog = managed.catalog();
      const missing = allStateGroups().filter((n) => catalog.group(n) === undefined);
      if (missing.length > 0) {
        const { result } = await service.createGroups(
          STATE_KIND,
          missing.map((name) => ({ name, data: { service: 'notify' } })),
        );
        if (!result.ok && result.code !== 'exists') throw new HttpError(500, 'internal', result.message);
      }
      const log = logFor(tokenOf(ctx));
      try {
        for (const priority of PRIORITIES)
          await log.createTopic(ingestTopic(priority), { partitions: INGEST_PARTITIONS });
        const topics = new Set(
          PRIORITIES.flatMap((priority) => CHANNELS.map((channel) => channelTopic(priority, channel))),
        );
        for (const topic of [...topics, DEAD_LETTER_TOPIC]) await log.createTopic(topic, { partitions: 1 });
      } catch (e) {
        queueError(e);
      }
      return { groups: allStateGroups(), created: missing };
    })
    .post('/v1/notify/groups/:group/query', { admits: 'authenticated' }, async (ctx) => {
      const q = checkQuery(await ctx.json());
      if (q.q === 'prefs' || q.q === 'inbox') requireSelfOrInternal(ctx, q.user_id);
      else requireInternal(ctx);
      const node = stateNode(ctx);
      // The router's preference lookup skips the barrier (a Raft round per record): the spec wants preference
      // lookups sub-millisecond; the leader's applied state holds every acknowledged PUT (only a deposed leader could
      // be behind, by moments). A follower still reads through the barrier. Delivery rows (was it sent already?) are
      // always read linearizably.
      if (!((q.q === 'routeContext' || q.q === 'routeContexts') && q.local === true && node.isLeader))
        await service.call(node, () => node.readBarrier());
      return node.readLocal((m) => answer(m, q));
    })

    .post('/v1/notifications', { admits: 'service' }, async (ctx) => {
      const input = parseNotification(await ctx.json());
      let users = input.user_ids;
      if (users === null) {
        const seg = await query<{ user_ids: string[] | null }>(ctx, groupOf('segment', input.segment_id!), {
          q: 'segment',
          segment_id: input.segment_id!,
        });
        if (seg.user_ids === null) throw notFound(`no segment ${input.segment_id}`, { segment_id: input.segment_id });
        users = seg.user_ids;
      }
      const now = Date.now();
      const keyGroup = groupOf('key', input.idempotency_key);
      const claim = await command(ctx, keyGroup, {
        op: 'claim',
        key: input.idempotency_key,
        notification_id: randomUUID(),
        now,
      });
      if (claim.op !== 'claim') throw new HttpError(500, 'internal', 'unexpected answer to claim');
      if (claim.existing && claim.queued) {
        duplicates.inc();
        return new Reply(200, { notification_id: claim.notification_id, status: 'accepted', duplicate: true });
      }
      // New, or claimed by an earlier attempt that failed before its records were queued: queue them (again). The
      // router routes a (notification, user) once, so records queued twice are delivered once.
      const log = logFor(tokenOf(ctx));
      try {
        const byPartition = new Map<number, Array<{ key: string; value: string }>>();
        for (const user of users) {
          const record: IngestRecord = {
            notification_id: claim.notification_id,
            user_id: user,
            event_type: input.event_type,
            priority: input.priority,
            data: input.data,
            accepted_at: now,
            campaign_id: input.campaign_id,
          };
          const partition = await log.partitionFor(ingestTopic(input.priority), user);
          let list = byPartition.get(partition);
          if (list === undefined) byPartition.set(partition, (list = []));
          list.push({ key: user, value: JSON.stringify(record) });
        }
        await Promise.all(
          [...byPartition].map(async ([partition, records]) => {
            for (let i = 0; i < records.length; i += MAX_RECORDS_PER_APPEND)
              await log.append(ingestTopic(input.priority), partition, records.slice(i, i + MAX_RECORDS_PER_APPEND));
          }),
        );
      } catch (e) {
        queueError(e);
      }
      await command(ctx, keyGroup, {
        op: 'queued',
        key: input.idempotency_key,
        notification_id: claim.notification_id,
      });
      accepted.inc();
      return new Reply(claim.existing ? 200 : 202, {
        notification_id: claim.notification_id,
        status: 'accepted',
        users: users.length,
      });
    })

    .get('/v1/notifications/:nid/status', { admits: 'service' }, async (ctx) => {
      const id = ctx.params.nid ?? '';
      if (!/^[0-9a-f-]{36}$/.test(id))
        throw badRequest('invalid_field', 'a notification_id is a UUID', { field: 'notification_id' });
      const parts = await Promise.all(
        allStateGroups().map((g) => query<StatusPart>(ctx, g, { q: 'status', notification_id: id })),
      );
      const rows = parts.flatMap((p) => p.rows);
      const routes = parts.flatMap((p) => p.routes);
      return {
        notification_id: id,
        users_routed: routes.length,
        channels: rows.map((r) => ({
          channel: r.channel,
          status: r.status,
          delivered_at: r.delivered_at,
          user_id: r.user_id,
          attempt_count: r.attempt_count,
          last_attempt_at: r.last_attempt_at,
          provider_message_id: r.provider_message_id,
          reason: r.reason,
          fallback_from: r.fallback_from,
        })),
        suppressed: routes.flatMap((r) => r.suppressed.map((s) => ({ user_id: r.user_id, ...s }))),
      };
    })

    .get('/v1/users/:id/preferences', { admits: 'authenticated' }, async (ctx) => {
      const user = userParam(ctx);
      requireSelfOrInternal(ctx, user);
      const { prefs } = await query<{ prefs: Preferences }>(ctx, groupOf('user', user), { q: 'prefs', user_id: user });
      return { user_id: user, ...prefs };
    })
    .put('/v1/users/:id/preferences', { admits: 'authenticated' }, async (ctx) => {
      const user = userParam(ctx);
      requireSelfOrInternal(ctx, user);
      const body = await ctx.json();
      const group = groupOf('user', user);
      const { prefs } = await query<{ prefs: Preferences }>(ctx, group, { q: 'prefs', user_id: user });
      const next = mergePreferences(prefs, body);
      await command(ctx, group, { op: 'putPrefs', user_id: user, prefs: next });
      return { user_id: user, ...next };
    })

    .put('/v1/segments/:sid', { admits: 'service' }, async (ctx) => {
      const id = ctx.params.sid ?? '';
      if (!SEGMENT_ID.test(id))
        throw badRequest('invalid_field', 'a segment id is 1 to 100 characters of A-Z a-z 0-9 . _ -', {
          field: 'segment_id',
        });
      const users = parseSegment(await ctx.json());
      await command(ctx, groupOf('segment', id), { op: 'putSegment', segment_id: id, user_ids: users });
      return { segment_id: id, users: users.length };
    })
    .get('/v1/segments/:sid', { admits: 'service' }, async (ctx) => {
      const id = ctx.params.sid ?? '';
      if (!SEGMENT_ID.test(id))
        throw badRequest('invalid_field', 'a segment id is 1 to 100 characters of A-Z a-z 0-9 . _ -', {
          field: 'segment_id',
        });
      const seg = await query<{ user_ids: string[] | null }>(ctx, groupOf('segment', id), {
        q: 'segment',
        segment_id: id,
      });
      if (seg.user_ids === null) throw notFound(`no segment ${id}`, { segment_id: id });
      return { segment_id: id, user_ids: seg.user_ids };
    })

    // Templates are copied to every state group, so the router reads a user's whole context from one group.
    .put('/v1/templates/:event/:channel', { admits: 'service' }, async (ctx) => {
      const event = ctx.params.event ?? '';
      if (!EVENT_TYPE.test(event))
        throw badRequest('invalid_field', 'event_type is 1 to 100 characters of A-Z a-z 0-9 . _ -', {
          field: 'event_type',
        });
      const channel = parseChannel(ctx.params.channel);
      const template = parseTemplate(await ctx.json());
      for (const g of allStateGroups())
        await command(ctx, g, { op: 'putTemplate', event_type: event, channel, template });
      return { event_type: event, channel, ...template };
    })
    .delete('/v1/templates/:event/:channel', { admits: 'service' }, async (ctx) => {
      const event = ctx.params.event ?? '';
      if (!EVENT_TYPE.test(event))
        throw badRequest('invalid_field', 'event_type is 1 to 100 characters of A-Z a-z 0-9 . _ -', {
          field: 'event_type',
        });
      const channel = parseChannel(ctx.params.channel);
      for (const g of allStateGroups())
        await command(ctx, g, { op: 'putTemplate', event_type: event, channel, template: null });
      return { event_type: event, channel, deleted: true };
    })

    .get('/v1/users/:id/inbox', { admits: 'authenticated' }, async (ctx) => {
      const user = userParam(ctx);
      requireSelfOrInternal(ctx, user);
      const unreadOnly = ctx.query.get('unread') === 'true';
      const limitText = ctx.query.get('limit') ?? '50';
      if (!/^\d{1,4}$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > 1000)
        throw badRequest('invalid_query', 'limit must be 1..1000', { field: 'limit' });
      const inbox = await query<{ items: unknown[]; unread: number }>(ctx, groupOf('user', user), {
        q: 'inbox',
        user_id: user,
        unread_only: unreadOnly,
        limit: Number(limitText),
      });
      return { user_id: user, ...inbox };
    })
    .post('/v1/users/:id/inbox/read', { admits: 'authenticated' }, async (ctx) => {
      const user = userParam(ctx);
      requireSelfOrInternal(ctx, user);
      const body = requireObject(await ctx.json());
      let ids: string[] | null = null;
      if (body.all !== true) {
        if (
          !Array.isArray(body.item_ids) ||
          body.item_ids.length === 0 ||
          body.item_ids.length > 1000 ||
          !body.item_ids.every((x) => typeof x === 'string')
        ) {
          throw badRequest('invalid_field', 'give item_ids (1 to 1000 ids) or all: true', { field: 'item_ids' });
        }
        ids = body.item_ids as string[];
      }
      const result = await command(ctx, groupOf('user', user), { op: 'inboxRead', user_id: user, item_ids: ids });
      return { user_id: user, marked: result.op === 'inboxRead' ? result.marked : 0 };
    })

    // Delivery receipts from providers (SMS status callbacks, asynchronous email bounces).
    .post('/v1/receipts', { admits: 'service' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      const list = Array.isArray(body.receipts) ? (body.receipts as unknown[]) : [body];
      if (list.length === 0 || list.length > 1000)
        throw badRequest('invalid_field', 'receipts must hold 1 to 1000 receipts', { field: 'receipts' });
      const byGroup = new Map<string, Outcome[]>();
      for (const [i, raw] of list.entries()) {
        const r = requireObject(raw, `receipts[${i}]`) as Partial<ReceiptUpdate>;
        const parts = typeof r.message_id === 'string' ? r.message_id.split(':') : [];
        if (parts.length !== 3 || !USER_ID.test(parts[1]!))
          throw badRequest('invalid_field', `receipts[${i}].message_id must be notification:user:channel`, {
            field: 'message_id',
          });
        if (r.status !== 'delivered' && r.status !== 'failed' && r.status !== 'bounced')
          throw badRequest('invalid_field', 'status must be delivered, failed or bounced', { field: 'status' });
        const at = typeof r.at === 'number' && Number.isFinite(r.at) ? r.at : Date.now();
        const outcome: Outcome =
          r.status === 'delivered'
            ? {
                message_id: r.message_id!,
                kind: 'delivered',
                provider_message_id: String(r.provider_message_id ?? ''),
                delivered_at: at,
              }
            : r.status === 'bounced'
              ? {
                  message_id: r.message_id!,
                  kind: 'bounced',
                  reason: String(r.reason ?? 'bounced'),
                  ...(r.provider_message_id !== undefined
                    ? { provider_message_id: String(r.provider_message_id) }
                    : {}),
                }
              : { message_id: r.message_id!, kind: 'failed', reason: String(r.reason ?? 'provider reported failure') };
        const g = groupOf('user', parts[1]!);
        let l = byGroup.get(g);
        if (l === undefined) byGroup.set(g, (l = []));
        l.push(outcome);
      }
      let applied = 0;
      for (const [g, outcomes] of byGroup) {
        const result = await command(ctx, g, { op: 'outcomes', outcomes, now: Date.now() });
        if (result.op === 'outcomes') applied += result.applied;
      }
      return { applied };
    });
}
