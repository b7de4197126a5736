/**
 * The auction service on Raft groups (a ServiceDefinition, like the event log): the members' side. Each
 * auction group (`placement.ts`) runs an AuctionMachine; its leader is the single writer of its auctions. Members
 * serve the cluster-internal API the gateways call (`/internal/...`, cluster token; gateways route each call to
 * the group's leader with a GroupRouter) and run the writer's duties: the close timer, the pushes, the projector.
 * Clients use the gateways (`workers/gateway/gateway.ts`): the public `/api` and `/ws` surface is there. See README.md.
 */
import {
  badRequest,
  type ServiceContext,
  HttpError,
  notFound,
  Reply,
  requireInteger,
  requireObject,
  requireString,
  unavailable,
  type ServiceDefinition,
  type OnRequestKind,
  type RequestContext,
  type RouterGroup,
} from '@raftkit/http';
import type { ManagedGroupOptions, ManagedHost, RaftNode } from '@raftkit/raft';
import { BidBatcher } from './bid-batcher.js';
import {
  type AuctionMachine,
  checkAuctionCommand,
  type AuctionCommand,
  type AuctionResult,
  type BidInput,
  type BidResult,
  type CreateInput,
} from '../machine.js';
import { ObservedAuctionMachine } from './observed-machine.js';
import { DEFAULT_GROUP_COUNT, GROUP_PREFIX, groupPlan, isAuctionGroup, locateAuction } from '../placement.js';
import { Projector } from './projector.js';
import { auctionBody, stateQuery, type AuctionBody, type Push } from '../wire.js';
import { Publisher, WatcherRegistry } from './watchers.js';
import { gatewayRole } from '../workers/gateway/gateway.js';
import { checkoutRole } from '../workers/checkout/checkout.js';

type AuctionNode = RaftNode<AuctionCommand, AuctionResult, AuctionMachine>;

/** Bids waiting for their entry on one group beyond which this member answers 503 busy (Retry-After 1). */
export const MAX_PENDING_BIDS = 5_000;
/** How often the writer looks for auctions due to close (the close is decided by the entry's time anyway). */
const CLOSE_TICK_MS = 100;
/** How often it looks while no auction of a group it leads closes within this long. */
const IDLE_CLOSE_TICK_MS = 1_000;
/** Creating the groups once the hosts registered, expiring gateways that stopped refreshing. */
const HOUSEKEEPING_MS = 1_000;
/** Dropping the view's auctions that the state no longer holds. */
const FORGET_MS = 60_000;
/** History entries a GET returns (the newest); `?history=all` returns the whole projected history. */
const GET_HISTORY = 1_000;
const ID = /^[A-Za-z0-9._:-]{1,128}$/;

export interface AuctionServiceOptions {
  groups?: number;
}

/** The auction service: a fresh definition per member (each its own projector, registry and timers). */
export function createAuctionService(options: AuctionServiceOptions = {}): ServiceDefinition {
  const groups = options.groups ?? DEFAULT_GROUP_COUNT;
  const projector = new Projector();
  const registry = new WatcherRegistry();
  let managed: ManagedHost | null = null;
  const publisher = new Publisher(registry, () => managed?.id ?? '');
  const isLeader = (group: string): boolean => managed?.group(group)?.isLeader ?? false;

  // The writer's pushes: only the leader of the auction's group publishes, after the entry applied (rule 1:
  // logged, then memory, then the push). A new leader re-applying entries may publish one again: watchers drop
  // a push whose seq is not above the last they showed.
  const publishResult = (result: AuctionResult): void => {
    const one = (r: BidResult): void => {
      if (r.changed && r.closeAt !== null)
        publisher.publish({
          type: 'bid_update',
          auction_id: r.auctionId,
          high_bid: r.newHighBid,
          bidder: r.highBidderId,
          close_at: r.closeAt,
          seq: r.seq,
        });
    };
    if (result.op === 'bid') one(result);
    else if (result.op === 'bids') result.results.forEach(one);
    else if (result.op === 'close' && result.status === 'closed') {
      const h = result.handoff;
      publisher.publish({
        type: 'auction_closed',
        auction_id: h.auctionId,
        winner: h.winnerId,
        final_price: h.finalPrice,
        seq: result.seq,
      } satisfies Push);
    }
  };

  // The auction groups: each auction's bid log, on the cluster's replica count of processes (3 unless
  // `cluster up --set replicas=5`; fewer while fewer are live).
  const kind: OnRequestKind = {
    name: 'auction',
    provisioning: 'on request',
    includes: isAuctionGroup,
    groupOptions: (name) => {
      const machine = new ObservedAuctionMachine({
        applied: (command, result, time) => {
          projector.push(name, command, result, time);
          if (isLeader(name)) publishResult(result);
        },
        restored: (m) => projector.reseed(name, m),
      });
      return { stateMachine: machine as unknown as ManagedGroupOptions['stateMachine'] };
    },
  };

  return {
    name: 'auction',
    kinds: [kind],
    routes: (service) => {
      managed = service.managed;
      memberRoutes(service, { groups, kind, projector, registry, publisher });
    },
    workers: [gatewayRole, checkoutRole],
  };
}

interface MemberParts {
  groups: number;
  kind: OnRequestKind;
  projector: Projector;
  registry: WatcherRegistry;
  publisher: Publisher;
}

function memberRoutes(service: ServiceContext, parts: MemberParts): void {
  const { projector, registry, publisher } = parts;
  const managed = service.managed;
  const batcher = new BidBatcher();
  const metrics = service.metrics;
  const bidsCounter = metrics.counter('auction_bids_total', 'Bids answered by this member (any outcome)');
  const busy = metrics.counter('auction_bids_busy_total', 'Bids refused 503 busy by backpressure');
  metrics
    .gauge('auction_bid_entries_total', 'Raft entries proposed for bids by this member')
    .set(() => batcher.entries);
  metrics
    .gauge('auction_pushes_published_total', 'Pushes this member published as writer')
    .set(() => publisher.published);
  metrics
    .gauge('auction_push_posts_failed_total', 'Push deliveries to gateways that failed')
    .set(() => publisher.failed);
  metrics
    .gauge(
      'auction_push_queue_overflows_total',
      'Times a gateway fell so far behind that its oldest queued pushes were dropped',
    )
    .set(() => publisher.dropped);
  metrics
    .gauge('auction_view_lag_ms', 'Age of the oldest log entry the projector has not folded')
    .set(() => projector.lagMs());
  service.onStop(() => void publisher.close());

  const catalogGroups = (): RouterGroup[] =>
    managed
      .catalog()
      .groupsWithPrefix(GROUP_PREFIX)
      .map((g) => ({ name: g.name, members: g.members, data: g.data }));

  /** The group of an auction: 503 until the groups exist, else the local node (421 naming holders otherwise). */
  const nodeOf = (ctx: RequestContext, auctionId: string): { group: string; node: AuctionNode } => {
    const group = locateAuction(auctionId, catalogGroups());
    if (group === null) throw unavailable('the auction groups are being created', 1);
    return {
      group,
      node: service.requireGroup<AuctionCommand, AuctionResult, AuctionMachine>(ctx, group) as AuctionNode,
    };
  };
  const groupNode = (ctx: RequestContext): { group: string; node: AuctionNode } => {
    const group = ctx.params.group ?? '';
    if (!isAuctionGroup(group)) throw notFound(`no auction group ${group.slice(0, 64)}`);
    return {
      group,
      node: service.requireGroup<AuctionCommand, AuctionResult, AuctionMachine>(ctx, group) as AuctionNode,
    };
  };

  const viewOf = (node: AuctionNode, auctionId: string, historyLimit: number): AuctionBody | null => {
    const now = Date.now();
    const projected = projector.get(auctionId);
    if (projected !== undefined)
      return auctionBody(projected, now, registry.count(auctionId), projector.lagMs(), historyLimit);
    // Applied here but not folded into the view yet (created this very turn): the machine's own view.
    const v = node.readLocal((m) => m.getAuction(auctionId, now));
    if (v === null) return null;
    return auctionBody(
      {
        ...v,
        group: '',
        closed: v.state === 'closed',
        log: [],
        logComplete: false,
        closedAt: v.handoff?.closedAt ?? null,
        history: v.bidHistory.map((h) => ({
          seq: h.seq,
          bid_id: h.bidId,
          bidder_id: h.bidderId,
          amount: h.price,
          at: h.at,
          kind: h.kind,
        })),
      },
      now,
      registry.count(auctionId),
      projector.lagMs(),
      historyLimit,
    );
  };

  /**
   * The view, from a member that reflects every write acknowledged before the read: the leader applied its writes
   * before it answered them; a follower first waits on a read barrier. Either way the projector then folds what it
   * still queues: its own drain runs on a later turn, and a write applied in the event loop's check phase (a Ready
   * processed from setImmediate, answered at once) may be answered before that turn comes.
   */
  const currentView = async (
    node: AuctionNode,
    auctionId: string,
    historyLimit: number,
  ): Promise<AuctionBody | null> => {
    if (!node.isLeader) await service.call(node, () => node.readBarrier());
    projector.drain();
    return viewOf(node, auctionId, historyLimit);
  };

  // Writer's duties, every member checks for the groups it leads: create the groups once the hosts registered,
  // propose close for due auctions, expire gateways that stopped refreshing, trim the view with the state. It looks
  // every CLOSE_TICK_MS while an auction of a group it leads closes within IDLE_CLOSE_TICK_MS, else every
  // IDLE_CLOSE_TICK_MS: a member at rest does not wake ten times a second for nothing.
  const closing = new Set<string>();
  let lastHousekeeping = 0;
  let lastForget = Date.now();
  let timer: NodeJS.Timeout | null = null;
  let stopped = false;
  const tick = (): void => {
    timer = null;
    const now = Date.now();
    const housekeeping = now - lastHousekeeping >= HOUSEKEEPING_MS;
    if (housekeeping) {
      lastHousekeeping = now;
      void ensureGroups(service, parts.kind, parts.groups).catch(() => undefined);
      registry.expire();
    }
    const forget = now - lastForget >= FORGET_MS;
    if (forget) lastForget = now;
    let nextClose = Infinity;
    for (const name of managed.host.groupNames()) {
      if (!isAuctionGroup(name)) continue;
      const node = managed.group<AuctionCommand, AuctionResult, AuctionMachine>(name) as AuctionNode | undefined;
      if (node === undefined) continue;
      if (forget) projector.forgetMissing(name, (id) => node.readLocal((m) => m.getAuction(id, 0) !== null));
      if (!node.isLeader) continue;
      for (const id of node.readLocal((m) => m.due(Date.now(), 200))) {
        if (closing.has(id)) continue;
        closing.add(id);
        node.propose({ op: 'close', auctionId: id }).then(
          () => closing.delete(id),
          () => closing.delete(id),
        );
      }
      nextClose = Math.min(nextClose, node.readLocal((m) => m.nextCloseBound()) ?? Infinity);
    }
    schedule(nextClose - Date.now() <= IDLE_CLOSE_TICK_MS ? CLOSE_TICK_MS : IDLE_CLOSE_TICK_MS);
  };
  let dueAt = 0;
  const schedule = (delayMs: number): void => {
    if (stopped) return;
    if (timer !== null) clearTimeout(timer);
    dueAt = Date.now() + delayMs;
    timer = setTimeout(tick, delayMs);
    timer.unref();
  };
  /**
   * An auction was created here: it may close within the idle period, so look again soon. Only ever brings the
   * next look earlier: re-arming a timer already due sooner would let a steady stream of creates starve it.
   */
  const closeSoon = (): void => {
    if (timer === null || dueAt > Date.now() + CLOSE_TICK_MS) schedule(CLOSE_TICK_MS);
  };
  schedule(CLOSE_TICK_MS);
  service.onStop(() => {
    stopped = true;
    if (timer !== null) clearTimeout(timer);
  });

  service.router
    .post('/internal/auctions', { admits: 'cluster' }, async (ctx) => {
      const c = shaped({ ...requireObject(await ctx.json()), op: 'create' }) as CreateInput;
      const { node } = nodeOf(ctx, c.auctionId);
      const result = await service.group(node).write(c);
      closeSoon();
      if (result.op !== 'create') throw new HttpError(500, 'internal', 'unexpected result');
      return new Reply(result.status === 'created' ? 201 : 200, {
        auction_id: result.auctionId,
        status: result.status,
      });
    })
    .post('/internal/auctions/:id/bids', { admits: 'cluster' }, async (ctx) => {
      const auctionId = idOf(ctx);
      const { op: _op, ...bid } = shaped({ ...requireObject(await ctx.json()), op: 'bid', auctionId }) as BidInput & {
        op: 'bid';
      };
      const { group, node } = nodeOf(ctx, auctionId);
      if (batcher.pending(group) >= MAX_PENDING_BIDS) {
        busy.inc();
        throw new HttpError(
          503,
          'busy',
          'the auction writer is saturated; retry shortly with the same idempotency_key',
          { auction_id: auctionId },
          { 'retry-after': '1' },
        );
      }
      const result = await service
        .group(node)
        .call(() => batcher.submit(group, (command) => node.propose(command), { ...bid, auctionId }));
      bidsCounter.inc();
      return result;
    })
    .post('/internal/auctions/:id/watch', { admits: 'cluster' }, (ctx) => watchAndView(ctx))
    .get('/internal/auctions/:id', { admits: 'cluster' }, async (ctx) => {
      const auctionId = idOf(ctx);
      const { node } = nodeOf(ctx, auctionId);
      const history = ctx.query.get('history');
      const view = await currentView(
        node,
        auctionId,
        history === 'all' ? Infinity : history === 'none' ? 0 : GET_HISTORY,
      );
      if (view === null) throw notFound(`no auction ${auctionId}`, { auction_id: auctionId });
      return view;
    })
    .get('/internal/auctions/:id/log', { admits: 'cluster' }, async (ctx) => {
      const auctionId = idOf(ctx);
      const { node } = nodeOf(ctx, auctionId);
      await currentView(node, auctionId, 0);
      const a = projector.get(auctionId);
      if (a === undefined) throw notFound(`no auction ${auctionId} in this member's view`, { auction_id: auctionId });
      return {
        auction_id: auctionId,
        member: managed.id,
        complete: a.logComplete,
        closed_at: a.closedAt,
        close_at: a.closeAt,
        state: a.closed ? 'closed' : 'open',
        log: a.log,
      };
    })
    .get('/internal/groups/:group/auctions', { admits: 'cluster' }, (ctx) => {
      const { group } = groupNode(ctx);
      const state = stateQuery(ctx);
      const limitText = ctx.query.get('limit') ?? '100';
      const limit = Number(limitText);
      if (!/^\d{1,4}$/.test(limitText) || limit < 1 || limit > 1000)
        throw badRequest('invalid_query', 'limit must be an integer from 1 to 1000', { field: 'limit' });
      const now = Date.now();
      return {
        group,
        auctions: projector.list(group, state, now, limit).map((a) => ({
          ...auctionBody(a, now, registry.count(a.auctionId), projector.lagMs(), 0),
          bid_history: undefined,
        })),
      };
    })
    .get('/internal/groups/:group/handoffs', { admits: 'cluster' }, async (ctx) => {
      const { group, node } = groupNode(ctx);
      // A consumer polls every group several times a second, and a linearizable read is a round of heartbeats that
      // wakes a quiesced group: an idle group would never rest. So this member's own copy answers "none" first; a
      // hand-off it has not applied yet is there at the next poll. Any hand-off found is confirmed linearizably
      // (every hand-off committed before the read, none already acknowledged) before it is handed out.
      if (node.readLocal((m) => m.pendingHandoffs(1)).length === 0) return { group, handoffs: [] };
      const handoffs = await service.call(node, () => node.read((m) => m.pendingHandoffs(500)));
      return { group, handoffs };
    })
    .post('/internal/groups/:group/handoffs/:id/ack', { admits: 'cluster' }, async (ctx) => {
      const { node } = groupNode(ctx);
      const auctionId = idOf(ctx);
      const result = await service.group(node).write({ op: 'ackHandoff', auctionId });
      if (result.op !== 'ackHandoff') throw new HttpError(500, 'internal', 'unexpected result');
      return { auction_id: auctionId, removed: result.removed };
    })
    .post('/internal/groups/:group/block', { admits: 'cluster' }, async (ctx) => {
      const { node } = groupNode(ctx);
      const command = shaped({ ...requireObject(await ctx.json()), op: 'block' });
      const result = await service.group(node).write(command);
      if (result.op !== 'block') throw new HttpError(500, 'internal', 'unexpected result');
      return { bidder_id: result.bidderId, blocked: result.blocked, changed: result.changed };
    })
    .post('/internal/auction/watchers', { admits: 'cluster' }, async (ctx) => {
      const body = requireObject(await ctx.json());
      const gateway = requireString(body, 'gateway', { pattern: ID });
      const url = requireString(body, 'url', { pattern: /^https?:\/\/[^\s]{3,200}$/ });
      const secret = requireString(body, 'secret', { minLength: 16, maxLength: 128 });
      const auctions = countsOf(body.auctions);
      registry.update(gateway, url, secret, auctions, body.full !== false);
      return { gateway, auctions: Object.keys(auctions).length };
    });

  /** A gateway's first watcher on an auction: registered on the writer before its snapshot is read (no gap). */
  function watchAndView(ctx: RequestContext): Promise<AuctionBody> {
    return ctx.json().then(async (raw) => {
      const body = requireObject(raw);
      const auctionId = idOf(ctx);
      const gateway = requireString(body, 'gateway', { pattern: ID });
      const url = requireString(body, 'url', { pattern: /^https?:\/\/[^\s]{3,200}$/ });
      const secret = requireString(body, 'secret', { minLength: 16, maxLength: 128 });
      const count = requireInteger(body, 'count', { min: 0, max: 10_000_000 });
      const { node } = nodeOf(ctx, auctionId);
      registry.update(gateway, url, secret, { [auctionId]: count }, false);
      const view = await currentView(node, auctionId, 0);
      if (view === null) throw notFound(`no auction ${auctionId}`, { auction_id: auctionId });
      registry.update(gateway, url, secret, { [auctionId]: count }, false);
      return { ...view, watcher_count: registry.count(auctionId) };
    });
  }
}

/** Create the auction groups once: by the meta leader, when every founding member has registered as a host. */
async function ensureGroups(service: ServiceContext, kind: OnRequestKind, count: number): Promise<void> {
  const meta = service.managed.meta;
  if (!meta.isLeader) return;
  if (service.managed.catalog().groupsWithPrefix(GROUP_PREFIX).length > 0) return;
  if (service.liveHosts() < meta.status().config.voters.length) return;
  const { result } = await service.createGroups(kind, groupPlan(count));
  if (!result.ok && result.code !== 'exists') throw new Error(result.message);
}

/** A command checked as the machine would, before it reaches the log: a malformed one is a 400, not an entry. */
function shaped(command: Record<string, unknown>): AuctionCommand {
  try {
    checkAuctionCommand(command);
    return command;
  } catch (error) {
    throw badRequest('invalid_command', String((error as Error).message));
  }
}

function idOf(ctx: RequestContext): string {
  const id = ctx.params.id ?? '';
  if (!ID.test(id))
    throw badRequest('invalid_auction_id', 'an auction id is 1..128 of A-Z a-z 0-9 . _ : -', { field: 'auction_id' });
  return id;
}

function countsOf(value: unknown): Record<string, number> {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw badRequest('invalid_field', 'auctions must be an object of auction id to watcher count', {
      field: 'auctions',
    });
  const out: Record<string, number> = {};
  const entries = Object.entries(value);
  if (entries.length > 1_000_000) throw badRequest('invalid_field', 'too many auctions', { field: 'auctions' });
  for (const [id, n] of entries) {
    if (!ID.test(id) || typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0)
      throw badRequest('invalid_field', `auctions.${id.slice(0, 64)} must be a watcher count`, { field: 'auctions' });
    out[id] = n;
  }
  return out;
}
